package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/workflows"
)

// startedAtDue is a run the dispatcher started at its first attempt's due
// time (workflow mode): FirstDue at the test clock's start, plus offset.
func startedAtDue(t *testing.T, local bool, offset time.Duration, results ...activities.SendResult) (workflows.State, *scripted, []bool) {
	t.Helper()
	env, s, in := setup(t, false, results...)
	var kinds []bool // per attempt: made as a local activity
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "SendSigned" {
			kinds = append(kinds, false)
		}
	})
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == "SendSigned" {
			kinds = append(kinds, true)
		}
	})
	in.FirstDue, in.FirstLocal = env.Now().Add(offset), local
	in.AcceptedAt = env.Now().Add(-time.Second)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	return result(t, env), s, kinds
}

// TestStartedAtDueSendsAtOnce: a run started at its first attempt's due
// time waits no first wait again, and makes attempt 1 as a local activity
// when the starter gave it a place; attempt 2 is a regular activity on the
// schedule.
func TestStartedAtDueSendsAtOnce(t *testing.T) {
	t.Parallel()
	for _, local := range []bool{true, false} {
		st, s, kinds := startedAtDue(t, local, 0, ok())
		require.Equal(t, delivery.StatusSucceeded, st.Status)
		require.Equal(t, []time.Duration{0}, s.calls, "attempt 1 at the run's start: its first wait was spent in the outbox")
		require.Equal(t, []bool{local}, kinds)
		require.Empty(t, s.marks, "a success costs no mark")
	}
	st, s, kinds := startedAtDue(t, true, 0, fail(502), ok())
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Equal(t, 2, st.AttemptCount)
	require.Equal(t, []time.Duration{0, expectedWaits()[1]}, s.calls, "attempt 2 after its own wait")
	require.Equal(t, []bool{true, false}, kinds, "only attempt 1 is local")
}

// TestStartedBeforeDueWaitsTheRest: a run started a little before its due
// time (a start that came early) waits only the rest.
func TestStartedBeforeDueWaitsTheRest(t *testing.T) {
	t.Parallel()
	st, s, _ := startedAtDue(t, true, 300*time.Millisecond, ok())
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Equal(t, []time.Duration{300 * time.Millisecond}, s.calls)
}

// TestStartedAtDueAfterDeadline: a run started at its due time with its
// deadline gone dead-letters with nothing sent.
func TestStartedAtDueAfterDeadline(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	in.Settings = delivery.Settings{Deadline: time.Minute}
	in.AcceptedAt = env.Now().Add(-2 * time.Minute)
	in.FirstDue, in.FirstLocal = env.Now(), true
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusDeadLettered, st.Status)
	require.Empty(t, s.calls)
	require.Contains(t, st.DeadLetterReason, "deadline")
}
