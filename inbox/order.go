package inbox

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Outcome is what ApplyIfNewer did with a change.
type Outcome string

// Outcomes of ApplyIfNewer.
const (
	// OutcomeApplied: the change was newer than what the resource holds (or
	// the first), and apply ran.
	OutcomeApplied Outcome = "applied"
	// OutcomeStale: an older change arrived after a newer one; skipped.
	OutcomeStale Outcome = "stale"
	// OutcomeDuplicate: the same version with the same content again.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeConflict: the versions cannot be ordered (the same version
	// with other content, or no version at all); skipped and recorded for
	// a person to decide, never silently overwritten.
	OutcomeConflict Outcome = "conflict"
)

// ErrNoVersion: the event carries no version to order it by.
var ErrNoVersion = errors.New("inbox: no version to order the event by")

// Change is one event's change to one resource.
type Change struct {
	// Source is the sender (or tenant); Resource the object the event is
	// about, e.g. "subscription:sub_42".
	Source, Resource, EventID string
	// Body is the verified envelope, exactly as received.
	Body []byte
	// VersionField names a numeric or RFC 3339 field of the envelope's data
	// that orders changes of the resource (e.g. "version" or "updated_at");
	// empty orders by the envelope's "created".
	VersionField string
}

// ApplyIfNewer orders events by their own time, not by arrival (first
// seed §4: delivery order is not guaranteed): inside the caller's
// transaction it compares the change's version with the one the resource
// last applied, runs apply only for a newer one, and records the outcome
// (queryable in webhook_inbox_outcomes). Versions compare exactly: numbers
// as the exact decimals they were sent as, RFC 3339 times as instants to
// the nanosecond (hookrelay's created has milliseconds), other strings as
// strings (byte order). Equal versions with different content, versions of
// different kinds (a number after a string), or a missing version are a
// conflict, never an overwrite: the change is recorded, not applied, and the
// handler should still answer 2xx (sending it again changes nothing) and
// leave the decision to a person or to the resource's own API.
func ApplyIfNewer(ctx context.Context, tx pgx.Tx, c Change, apply func() error) (Outcome, error) {
	record := func(o Outcome, v version, reason string) (Outcome, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_inbox_outcomes (source, resource, event_id, version, version_text, version_kind, outcome, reason)
			VALUES ($1, $2, $3, $4::numeric, $5, $6, $7, $8)`, c.Source, c.Resource, c.EventID, v.numeric(), v.textValue(), v.kindValue(), string(o), reason); err != nil {
			return "", fmt.Errorf("record outcome of %s: %w", c.EventID, err)
		}
		return o, nil
	}
	v, err := versionOf(c.Body, c.VersionField)
	if err != nil {
		return record(OutcomeConflict, version{}, err.Error())
	}
	content := sha256.Sum256(c.Body)
	if _, err := tx.Exec(ctx, `INSERT INTO webhook_inbox_versions (source, resource) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		c.Source, c.Resource); err != nil {
		return "", fmt.Errorf("version of %s: %w", c.Resource, err)
	}
	var storedNum, storedText, storedKind *string
	var storedContent []byte
	if err := tx.QueryRow(ctx, `SELECT version::text, version_text, version_kind, content FROM webhook_inbox_versions WHERE source = $1 AND resource = $2 FOR UPDATE`,
		c.Source, c.Resource).Scan(&storedNum, &storedText, &storedKind, &storedContent); err != nil {
		return "", fmt.Errorf("version of %s: %w", c.Resource, err)
	}
	if storedNum != nil || storedText != nil {
		// Rows written before version_kind: a number or a time, which
		// compared as numbers then.
		old := version{kind: versionKind(cmp.Or(ptrValue(storedKind), string(v.kind)))}
		if storedText != nil {
			old.text, old.kind = *storedText, kindString
		} else if old.num, _ = new(big.Rat).SetString(*storedNum); old.num == nil {
			return "", fmt.Errorf("version of %s: stored %q is not a number", c.Resource, *storedNum)
		} else if old.kind == kindString {
			old.kind = kindNumber
		}
		order, comparable := v.compare(old)
		switch {
		case !comparable:
			return record(OutcomeConflict, v, "a version of another kind than the one applied (a number and a string)")
		case order < 0:
			return record(OutcomeStale, v, "older than the version applied")
		case order == 0 && bytes.Equal(storedContent, content[:]):
			return record(OutcomeDuplicate, v, "")
		case order == 0:
			return record(OutcomeConflict, v, "same version as the one applied, different content")
		}
	}
	if err := apply(); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_inbox_versions SET version = $3::numeric, version_text = $4, version_kind = $5, event_id = $6, content = $7, updated_at = now()
		WHERE source = $1 AND resource = $2`, c.Source, c.Resource, v.numeric(), v.textValue(), v.kindValue(), c.EventID, content[:]); err != nil {
		return "", fmt.Errorf("version of %s: %w", c.Resource, err)
	}
	return record(OutcomeApplied, v, "")
}

// versionKind is what a version is; versions of different kinds do not
// order.
type versionKind string

// Kinds of version.
const (
	kindNumber versionKind = "number"
	kindTime   versionKind = "time"
	kindString versionKind = "string"
)

// version orders a change: an exact number (a JSON number), an instant (an
// RFC 3339 time, as Unix seconds to the nanosecond, any year), or a string
// compared as bytes.
type version struct {
	kind versionKind
	num  *big.Rat
	text string
}

// compare orders v after old (1), before it (-1) or equal (0); false when
// they are of different kinds.
func (v version) compare(old version) (int, bool) {
	if v.kind != old.kind {
		return 0, false
	}
	if v.kind == kindString {
		return strings.Compare(v.text, old.text), true
	}
	return v.num.Cmp(old.num), true
}

func (v version) kindValue() any {
	if v.kind == "" {
		return nil
	}
	return string(v.kind)
}

func ptrValue(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// numeric is v as the exact decimal Postgres keeps (nil for a string or no
// version).
func (v version) numeric() any {
	if v.num == nil {
		return nil
	}
	return exactDecimal(v.num)
}

func (v version) textValue() any {
	if v.kind != kindString {
		return nil
	}
	return v.text
}

// MaxVersionScale bounds the digits after the point (and the exponent) of a
// numeric version, and twice it the number's length, so a hostile number
// cannot cost more than a normal one.
const MaxVersionScale = 100

// exactDecimal writes r, a finite decimal, with every digit it has.
func exactDecimal(r *big.Rat) string {
	ten := big.NewRat(10, 1)
	scaled := new(big.Rat).Set(r)
	for digits := 0; digits <= MaxVersionScale; digits++ {
		if scaled.IsInt() {
			return r.FloatString(digits)
		}
		scaled.Mul(scaled, ten)
	}
	return r.FloatString(MaxVersionScale) // not reached: versionOf bounds the scale
}

// jsonNumber is a JSON number with its exponent apart.
var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(\.[0-9]+)?(?:[eE]([+-]?[0-9]+))?$`)

// versionOf reads the version that orders a change: the envelope's
// "created", or data[field] as a number, an RFC 3339 time or a string.
func versionOf(body []byte, field string) (version, error) {
	var env struct {
		Created string                     `json:"created"`
		Data    map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return version{}, fmt.Errorf("%w: the body is not an envelope", ErrNoVersion)
	}
	name := cmp.Or(field, "created")
	raw := json.RawMessage(nil)
	if field == "" {
		if env.Created != "" {
			raw, _ = json.Marshal(env.Created)
		}
	} else {
		raw = env.Data[field]
	}
	if len(raw) == 0 || string(raw) == "null" {
		return version{}, fmt.Errorf("%w: %s is missing", ErrNoVersion, name)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			// Seconds and nanoseconds apart: UnixNano wraps outside 1678–2262.
			at := new(big.Rat).SetFrac(big.NewInt(int64(t.Nanosecond())), big.NewInt(int64(time.Second)))
			return version{kind: kindTime, num: at.Add(at, new(big.Rat).SetInt64(t.Unix()))}, nil
		}
		if field == "" {
			return version{}, fmt.Errorf("%w: created is not an RFC 3339 time", ErrNoVersion)
		}
		return version{kind: kindString, text: s}, nil
	}
	m := jsonNumber.FindSubmatch(raw)
	if m == nil {
		return version{}, fmt.Errorf("%w: %s is neither a number nor a string", ErrNoVersion, name)
	}
	exp, _ := strconv.Atoi(string(m[2]))
	if scale := max(len(m[1])-1, 0) - exp; len(raw) > 2*MaxVersionScale || scale > MaxVersionScale || exp > MaxVersionScale {
		return version{}, fmt.Errorf("%w: %s has more than %d digits of scale", ErrNoVersion, name, MaxVersionScale)
	}
	v, ok := new(big.Rat).SetString(string(raw))
	if !ok {
		return version{}, fmt.Errorf("%w: %s is not a number", ErrNoVersion, name)
	}
	return version{kind: kindNumber, num: v}, nil
}
