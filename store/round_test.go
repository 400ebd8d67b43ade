package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

	first, rows := beginRound(t, f.st.Pool(), 2)
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	first.Lease([]int64{idOf(rows, leased)}, []time.Time{until})
	first.Done([]int64{idOf(rows, deleted)})
	second, _ := beginRound(t, f.st.Pool(), 0, "the open round's rows are locked")
	second.Close()
	n, lease := state()
	require.Equal(t, 2, n, "nothing written before the commit")
	require.Nil(t, lease)
	first.Close()

	again, rows := beginRound(t, f.st.Pool(), 2, "a round closed without its commit wrote nothing and holds nothing")
	again.Lease([]int64{idOf(rows, leased)}, []time.Time{until})
	again.Done([]int64{idOf(rows, deleted)})
	require.NoError(t, again.Commit(ctx))
	again.Close()
	n, lease = state()
	require.Equal(t, 1, n, "the done row is gone")
	require.NotNil(t, lease)
	require.True(t, until.Equal(*lease), "leased until %s, not %s", *lease, until)

	after, _ := beginRound(t, f.st.Pool(), 0, "the leased row is not claimed")
	after.Close()
}

// beginRound begins a round on p and requires that it claimed n rows.
func beginRound(t *testing.T, p *pgxpool.Pool, n int, msgAndArgs ...any) (*store.Round, []outbox.Row) {
	t.Helper()
	r, rows, err := store.BeginRound(context.Background(), p, 10)
	require.NoError(t, err)
	require.Len(t, rows, n, msgAndArgs...)
	return r, rows
}
