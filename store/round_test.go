package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
	"hookrelay/store"
)

// TestRoundIsOneTransaction: a round's claim locks its rows until it ends
// (another round claims none of them meanwhile); its queued writes (a
// lease, a delete) are written only when it commits, and a round closed
// without committing writes nothing and lets its rows be claimed again.
func TestRoundIsOneTransaction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	leased, deleted := f.publish(t), f.publish(t)
	idOf := func(rows []outbox.Row, delivery string) int64 {
		for _, r := range rows {
			if r.DeliveryID == delivery {
				return r.ID
			}
		}
		t.Fatalf("delivery %s's row not claimed: %v", delivery, rows)
		return 0
	}
	state := func() (rows int, leasedUntil *time.Time) {
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*), max(leased_until) FROM outbox`).Scan(&rows, &leasedUntil))
		return rows, leasedUntil
	}

	first, rows, err := store.BeginRound(ctx, f.st.Pool(), 10)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	first.Lease([]int64{idOf(rows, leased)}, []time.Time{until})
	first.Done([]int64{idOf(rows, deleted)})
	second, others, err := store.BeginRound(ctx, f.st.Pool(), 10)
	require.NoError(t, err)
	require.Empty(t, others, "the open round's rows are locked")
	second.Close()
	n, lease := state()
	require.Equal(t, 2, n, "nothing written before the commit")
	require.Nil(t, lease)
	first.Close()

	again, rows, err := store.BeginRound(ctx, f.st.Pool(), 10)
	require.NoError(t, err)
	require.Len(t, rows, 2, "a round closed without its commit wrote nothing and holds nothing")
	again.Lease([]int64{idOf(rows, leased)}, []time.Time{until})
	again.Done([]int64{idOf(rows, deleted)})
	require.NoError(t, again.Commit(ctx))
	again.Close()
	n, lease = state()
	require.Equal(t, 1, n, "the done row is gone")
	require.NotNil(t, lease)
	require.True(t, until.Equal(*lease), "leased until %s, not %s", *lease, until)

	after, rows, err := store.BeginRound(ctx, f.st.Pool(), 10)
	require.NoError(t, err)
	require.Empty(t, rows, "the leased row is not claimed")
	after.Close()
}

// TestRoundFailedWriteCommitsNothing: when a queued write fails, the
// commit fails, nothing of the round is written, and its connection goes
// back usable.
func TestRoundFailedWriteCommitsNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publish(t)
	r, rows, err := store.BeginRound(ctx, f.st.Pool(), 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	r.Done([]int64{rows[0].ID})
	// Postgres refuses a NUL byte in text: the stamp fails on the server.
	r.Stamp([]int64{rows[0].ID}, []string{"carrier\x00"})
	require.Error(t, r.Commit(ctx))
	r.Close()
	var n int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE leased_until IS NULL`).Scan(&n))
	require.Equal(t, 1, n, "the delete queued before the failed write was rolled back")
	again, rows, err := store.BeginRound(ctx, f.st.Pool(), 10)
	require.NoError(t, err)
	require.Len(t, rows, 1, "the row is claimed again")
	again.Close()
}
