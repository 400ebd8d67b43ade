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

// TestHandedOffRetryWaitsForItsRecordedTime: a sender's failed first attempt
// handed off with the time its record planned for attempt 2 is retried
// exactly then, not after a wait planned again from the run's start (the
// dispatcher delays that start to the planned time: nothing left to wait);
// without that time (histories recorded before it) the run plans the wait.
func TestHandedOffRetryWaitsForItsRecordedTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		ahead time.Duration // planned time, from the run's start
		want  time.Duration // attempt 2, from the run's start
	}{
		{"planned time ahead", 3 * time.Second, 3 * time.Second},
		{"run started at its planned time", 0, 0},
		{"run started after it", -2 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, s, in := setup(t, false, ok())
			in.Settings.Schedule = []time.Duration{0, 10 * time.Minute}
			failed := fail(502)
			failed.Number, failed.StartedAt, failed.NextAttemptAt = 1, env.Now().Add(-time.Second), env.Now().Add(tc.ahead)
			in.Resume = &workflows.Resume{Result: failed}
			env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
			st := result(t, env)
			require.Equal(t, delivery.StatusSucceeded, st.Status)
			require.Equal(t, []time.Duration{tc.want}, s.calls)
			require.Equal(t, 2, s.reqs[0].Number)
		})
	}
	t.Run("no planned time", func(t *testing.T) {
		t.Parallel()
		env, s, in := setup(t, false, ok())
		in.Settings.Schedule = []time.Duration{0, 10 * time.Minute}
		failed := fail(502)
		failed.Number, failed.StartedAt = 1, env.Now().Add(-time.Second)
		in.Resume = &workflows.Resume{Result: failed}
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
		require.Len(t, s.calls, 1)
		require.InDelta(t, float64(10*time.Minute), float64(s.calls[0]), float64(time.Minute), "the schedule's wait (jittered), planned from the run's start")
	})
}
