package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/store"
)

// TestFirstAttemptRateLimitSlotIsNotBeforeItsDueTime: a first attempt to
// a rate-limited endpoint leaves at its due time, and the slot it is
// counted on is not before that time: the endpoint's next slot is a full
// step after the request, as the rate limit promises.
func TestFirstAttemptRateLimitSlotIsNotBeforeItsDueTime(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	ctx := context.Background()
	one := 1
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{RateLimit: &one})
	require.NoError(t, err)
	id := f.publish(t)
	_, cancel, done := f.run(t, &fakeClient{})
	f.waitOutboxEmpty(t)
	cancel()
	<-done
	late, err := f.st.FirstRequestLateness(ctx, f.app.ID, nil)
	require.NoError(t, err)
	require.Len(t, late, 1)
	var started, next time.Time
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT min(started_at) FROM attempts WHERE delivery_id = $1`, id).Scan(&started))
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT next_slot FROM endpoint_slots WHERE endpoint_id = $1`, f.ep.ID).Scan(&next))
	due := started.Add(-late[0])
	slot := next.Add(-store.SlotStep(one))
	require.GreaterOrEqual(t, late[0], time.Duration(0))
	require.False(t, slot.Before(due.Truncate(time.Microsecond)), "the request left at its due time on a slot reserved %s before it", due.Sub(slot))
}
