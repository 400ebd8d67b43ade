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
// (queryable in webhook_inbox_outcomes). Equal versions with different
// content, or a missing version, are a conflict, never an overwrite.
func ApplyIfNewer(ctx context.Context, tx pgx.Tx, c Change, apply func() error) (Outcome, error) {
	record := func(o Outcome, version *big.Rat, reason string) (Outcome, error) {
		var v any
		if version != nil {
			v = version.FloatString(9)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_inbox_outcomes (source, resource, event_id, version, outcome, reason)
			VALUES ($1, $2, $3, $4::numeric, $5, $6)`, c.Source, c.Resource, c.EventID, v, string(o), reason); err != nil {
			return "", fmt.Errorf("record outcome of %s: %w", c.EventID, err)
		}
		return o, nil
	}
	version, err := versionOf(c.Body, c.VersionField)
	if err != nil {
		return record(OutcomeConflict, nil, err.Error())
	}
	content := sha256.Sum256(c.Body)
	if _, err := tx.Exec(ctx, `INSERT INTO webhook_inbox_versions (source, resource) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		c.Source, c.Resource); err != nil {
		return "", fmt.Errorf("version of %s: %w", c.Resource, err)
	}
	var stored *string
	var storedContent []byte
	if err := tx.QueryRow(ctx, `SELECT version::text, content FROM webhook_inbox_versions WHERE source = $1 AND resource = $2 FOR UPDATE`,
		c.Source, c.Resource).Scan(&stored, &storedContent); err != nil {
		return "", fmt.Errorf("version of %s: %w", c.Resource, err)
	}
	if stored != nil {
		old, ok := new(big.Rat).SetString(*stored)
		if !ok {
			return "", fmt.Errorf("version of %s: stored %q is not a number", c.Resource, *stored)
		}
		switch order := version.Cmp(old); {
		case order < 0:
			return record(OutcomeStale, version, "older than the version applied")
		case order == 0 && bytes.Equal(storedContent, content[:]):
			return record(OutcomeDuplicate, version, "")
		case order == 0:
			return record(OutcomeConflict, version, "same version as the one applied, different content")
		}
	}
	if err := apply(); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_inbox_versions SET version = $3::numeric, event_id = $4, content = $5, updated_at = now()
		WHERE source = $1 AND resource = $2`, c.Source, c.Resource, version.FloatString(9), c.EventID, content[:]); err != nil {
		return "", fmt.Errorf("version of %s: %w", c.Resource, err)
	}
	return record(OutcomeApplied, version, "")
}

// versionOf reads the version that orders a change: the envelope's
// "created", or data[field] as a number or an RFC 3339 time (as Unix
// seconds, to the nanosecond).
func versionOf(body []byte, field string) (*big.Rat, error) {
	var env struct {
		Created string                     `json:"created"`
		Data    map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: the body is not an envelope", ErrNoVersion)
	}
	raw := json.RawMessage(nil)
	if field == "" {
		if env.Created != "" {
			raw, _ = json.Marshal(env.Created)
		}
	} else {
		raw = env.Data[field]
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%w: %s is missing", ErrNoVersion, cmp.Or(field, "created"))
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is neither a number nor an RFC 3339 time", ErrNoVersion, cmp.Or(field, "created"))
		}
		return new(big.Rat).SetFrac(big.NewInt(t.UnixNano()), big.NewInt(int64(time.Second))), nil
	}
	v, ok := new(big.Rat).SetString(string(raw))
	if !ok {
		return nil, fmt.Errorf("%w: %s is neither a number nor an RFC 3339 time", ErrNoVersion, field)
	}
	return v, nil
}
