package inbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"hookrelay/inbox"
)

func deliverVersion(t *testing.T, pool *pgxpool.Pool, resource, field, id, created, data string) inbox.Outcome {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	o, err := inbox.ApplyIfNewer(ctx, tx, inbox.Change{Source: "billing", Resource: resource, EventID: id,
		Body: envelope(id, "x.updated", created, data), VersionField: field}, func() error { return nil })
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	return o
}

// TestTimesOutsideInt64NanosOrderAsInstants: RFC 3339 allows years 0000–9999
// and "9999-12-31T23:59:59Z" is a common "never" in data; times compare as
// instants in any year (int64 nanoseconds wrap outside 1678–2262), so a
// created of 1600 does not pin a resource.
func TestTimesOutsideInt64NanosOrderAsInstants(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	const at = "2026-12-01T10:00:00.000Z"
	require.Equal(t, inbox.OutcomeApplied, deliverVersion(t, pool, "sub:1", "", "evt_a", "1600-01-01T00:00:00.000Z", `{}`))
	assert.Equal(t, inbox.OutcomeApplied, deliverVersion(t, pool, "sub:1", "", "evt_b", at, `{}`),
		"a change of 2026 is newer than one of 1600")

	require.Equal(t, inbox.OutcomeApplied, deliverVersion(t, pool, "doc:1", "updated_at", "evt_c", at, `{"updated_at":"2026-12-01T10:00:00Z"}`))
	assert.Equal(t, inbox.OutcomeApplied, deliverVersion(t, pool, "doc:1", "updated_at", "evt_d", at, `{"updated_at":"2300-01-01T00:00:00Z"}`),
		"2300 is after 2026")
	assert.Equal(t, inbox.OutcomeApplied, deliverVersion(t, pool, "doc:1", "updated_at", "evt_e", at, `{"updated_at":"9999-12-31T23:59:59Z"}`),
		"9999 is after 2300")
}

// TestATimeAfterANumberIsAConflict: a time and a number are versions of
// different kinds, which do not order: a conflict, never an overwrite.
func TestATimeAfterANumberIsAConflict(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	const at = "2026-12-01T10:00:00.000Z"
	require.Equal(t, inbox.OutcomeApplied, deliverVersion(t, pool, "doc:2", "version", "evt_a", at, `{"version":5}`))
	require.Equal(t, inbox.OutcomeConflict, deliverVersion(t, pool, "doc:2", "version", "evt_b", at, `{"version":"2026-12-01T10:00:00Z"}`),
		"a string (a time) after a number")
}
