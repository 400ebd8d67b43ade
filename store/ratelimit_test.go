package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/store"
)

// TestReserveSlotFrom: slots are a step apart and never before now; a slot
// reserved for a request due later (from) is no earlier than that time,
// whether it is the endpoint's first slot or a later one, and the next
// slot is a full step after it.
func TestReserveSlotFrom(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	step := store.SlotStep(5)
	before := time.Now().Add(-time.Millisecond)

	first, err := f.st.ReserveSlot(ctx, f.ep.ID, 5, time.Time{})
	require.NoError(t, err)
	require.True(t, first.After(before), "first slot %s is before now", first)
	second, err := f.st.ReserveSlot(ctx, f.ep.ID, 5, time.Time{})
	require.NoError(t, err)
	require.Equal(t, step.Microseconds(), second.Sub(first).Microseconds())

	due := second.Add(10 * step).Truncate(time.Microsecond)
	third, err := f.st.ReserveSlot(ctx, f.ep.ID, 5, due)
	require.NoError(t, err)
	require.True(t, third.Equal(due), "slot %s, due %s", third, due)
	fourth, err := f.st.ReserveSlot(ctx, f.ep.ID, 5, second)
	require.NoError(t, err)
	require.Equal(t, step.Microseconds(), fourth.Sub(third).Microseconds(), "an earlier from does not move the next slot back")

	// An endpoint's first slot, for a request due later.
	ep2, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: f.app.ID, URL: "https://example.com/other", Environment: "live",
		RetrySchedule: f.ep.RetrySchedule, Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	got, err := f.st.ReserveSlot(ctx, ep2.ID, 5, later)
	require.NoError(t, err)
	require.True(t, got.Equal(later), "slot %s, due %s", got, later)
}
