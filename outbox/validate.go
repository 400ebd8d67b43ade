package outbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"hookrelay/delivery"
)

// ValidateType checks an event type name: resource.action.
func ValidateType(name string) error {
	switch {
	case name == "":
		return errors.New("is required")
	case len(name) > MaxTypeLength || !typePattern.MatchString(name):
		return errors.New("must be resource.action: [a-z0-9_] segments joined by '.', at most 128 characters")
	}
	return nil
}

// Validate checks an event and fills its defaults. JSON is UTF-8 (RFC
// 8259): a receiver that decodes the body as text would change other bytes
// and fail every signature check, so invalid UTF-8 is refused, as are
// numbers no JSON parser can hold (beyond float64).
func (e *Event) Validate(now time.Time) error {
	for _, f := range []struct{ name, value string }{{"type", e.Type}, {"id", e.ID}, {"ordering_key", e.OrderingKey}, {"api_version", e.APIVersion}, {"data", string(e.Data)}} {
		if !utf8.ValidString(f.value) {
			return &delivery.FieldError{Field: f.name, Reason: "must be valid UTF-8"}
		}
	}
	if err := ValidateType(e.Type); err != nil {
		return &delivery.FieldError{Field: "type", Reason: err.Error()}
	}
	switch {
	case e.ID != "" && (len(e.ID) > MaxIDLength || !idPattern.MatchString(e.ID)):
		return &delivery.FieldError{Field: "id", Reason: fmt.Sprintf("must be 1–%d characters of [A-Za-z0-9_:-] (no '.': the signed content is id.timestamp.body)", MaxIDLength)}
	case e.OrderingKey != "" && (len(e.OrderingKey) > MaxOrderingKeyLength || !orderingKeyPattern.MatchString(e.OrderingKey)):
		return &delivery.FieldError{Field: "ordering_key", Reason: fmt.Sprintf("must be 1–%d characters of [A-Za-z0-9_:.-]", MaxOrderingKeyLength)}
	case len(bytes.TrimSpace(e.Data)) == 0:
		return &delivery.FieldError{Field: "data", Reason: "is required (a JSON object)"}
	case e.Created.After(now.Add(MaxCreatedAhead)):
		return &delivery.FieldError{Field: "created", Reason: fmt.Sprintf("is more than %s in the future (%s); a receiver that orders by it would take every later event for stale", MaxCreatedAhead, e.Created.UTC().Format(CreatedFormat))}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, e.Data); err != nil || compact.Bytes()[0] != '{' {
		return &delivery.FieldError{Field: "data", Reason: "must be a JSON object"}
	}
	if err := finiteNumbers(compact.Bytes()); err != nil {
		return &delivery.FieldError{Field: "data", Reason: err.Error()}
	}
	if compact.Len() > MaxPayloadBytes {
		return &delivery.TooLargeError{Field: "data", Limit: MaxPayloadBytes}
	}
	e.Data = compact.Bytes()
	if e.APIVersion == "" {
		e.APIVersion = APIVersionDefault
	}
	return nil
}

// finiteNumbers checks that every number in a JSON value fits a float64.
func finiteNumbers(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("is not valid JSON")
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return fmt.Errorf("number %.32s is beyond what a JSON parser can hold (float64)", n)
			}
		}
	}
}

// contentHash identifies what the producer sent, for idempotency: the same
// ID with the same content is a repeat, with other content a conflict.
func (e Event) contentHash() []byte {
	h := sha256.New()
	created := ""
	if !e.Created.IsZero() {
		created = e.Created.UTC().Format(time.RFC3339Nano)
	}
	for _, part := range []string{e.Type, created, e.APIVersion, string(e.Data)} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	// Only a keyed event hashes its key: the hashes of events stored
	// before keys existed stay valid.
	if e.OrderingKey != "" {
		fmt.Fprintf(h, "k%d:%s", len(e.OrderingKey), e.OrderingKey)
	}
	return h.Sum(nil)
}
