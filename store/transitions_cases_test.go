package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/store"
)

// TestReplayedCycleSurvivesAStaleMark: a delivery dead-letters in cycle 1;
// the mark activity's reply is lost and Temporal retries it after a replay
// was queued (the replay gives the row cycle 2). The retried cycle-1 mark
// changes nothing: no second dead letter, no second failure count, and the
// replay's cycle-2 mark and claim apply, so the replay is sent.
func TestReplayedCycleSurvivesAStaleMark(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	mark := store.Mark{DeliveryID: dlv, Status: delivery.StatusDeadLettered, Reason: "all attempts failed", Cycle: 1}
	_, err := f.st.MarkDelivery(ctx, mark)
	require.NoError(t, err)
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`) // the start row was taken long ago
	require.NoError(t, err)
	queued, err := store.ReplayDeliveries(ctx, f.st.Pool(), f.app.ID, []string{dlv}, "key_1", "ops")
	require.NoError(t, err)
	require.Equal(t, []string{dlv}, queued)

	again, err := f.st.MarkDelivery(ctx, mark) // the activity's retry
	require.NoError(t, err)
	started, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: delivery.StatusDelivering, Cycle: 2, ReplayID: 1})
	require.NoError(t, err)
	require.Equal(t, delivery.StatusDelivering, started.Status,
		"the replay's cycle starts (the stale cycle-1 mark left the row %s, changed=%v)", again.Status, again.Changed)
}

// TestLateFirstCycleRecordDoesNotEatAReplay: a cycle-1 2xx recorded late
// (a worker that lost its activity) after a replay gave the row cycle 2 is
// kept as an attempt but changes no status: the replay's cycle starts.
func TestLateFirstCycleRecordDoesNotEatAReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	f.attempt(t, dlv, 1, 1, 500, delivery.ClassRetryable)
	_, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: delivery.StatusDeadLettered, Reason: "deadline", Cycle: 1})
	require.NoError(t, err)
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	_, err = store.ReplayDeliveries(ctx, f.st.Pool(), f.app.ID, []string{dlv}, "key_1", "ops")
	require.NoError(t, err)
	f.attempt(t, dlv, 1, 2, 200, delivery.ClassSuccess) // late, of cycle 1
	started, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: delivery.StatusDelivering, Cycle: 2, ReplayID: 1})
	require.NoError(t, err)
	require.Equal(t, delivery.StatusDelivering, started.Status, "the replay's cycle starts")
}
