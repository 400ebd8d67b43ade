package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/store"
)

// TestClaimThatWaitedSeesTheOtherClaim: a claim that waited for another
// claim's lock on the same delivery answers "on the wire" from the row as
// the other claim committed it, never "refused" from its own snapshot (the
// sender would then mark an enabled endpoint's delivery canceled while a
// request is open).
func TestClaimThatWaitedSeesTheOtherClaim(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // after commit, a no-op
	// The other claim, as claimAttempts writes it, not yet committed.
	_, err = tx.Exec(ctx, `UPDATE deliveries SET status = $2, inflight_until = now() + interval '1 minute' WHERE id = $1`,
		dlv, delivery.StatusDelivering)
	require.NoError(t, err)
	got := make(chan store.Claim, 1)
	go func() {
		c, err := f.st.ClaimAttempt(ctx, dlv, time.Now().Add(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	// The claim waits on the row's lock.
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting))
		return waiting > 0
	}, 10*time.Second, 5*time.Millisecond, "the second claim waits for the first")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, store.ClaimOnTheWire, <-got)
}
