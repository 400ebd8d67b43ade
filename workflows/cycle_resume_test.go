package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/workflows"
)

// TestCarrierRateLimitedResumeSendsAtItsSlot: a run a carrier handed off
// with a rate-limit slot waits for that slot and makes attempt 1 there, as
// runCycle did before its phases (f11380e): the resume's wait checked no
// HistoryBound, so a run whose history is past it by then still sends
// rather than continue as new (the command sequence is unchanged).
func TestCarrierRateLimitedResumeSendsAtItsSlot(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, ok())
	slot := env.Now().Add(10 * time.Minute)
	in.Cycle = 1
	in.Resume = &workflows.Resume{Result: activities.SendResult{Class: activities.ClassRateLimited, SlotAt: slot}}
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(workflows.HistoryBound + 1) }, time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Len(t, s.reqs, 1)
	require.Equal(t, 1, s.reqs[0].Number)
	require.True(t, slot.Equal(s.reqs[0].Slot), "the attempt uses the slot the carrier reserved")
}
