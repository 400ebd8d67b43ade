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

// TestReplayOfFirstDueRunWaitsItsFirstWaitAndIsNotLocal: a run the
// dispatcher started at its first attempt's due time (workflow mode, with a
// local first attempt) dead-letters; a replay continues it as new
// (run.next). FirstDue and FirstLocal belong to the first cycle's start only:
// the replay's cycle must plan its attempt 1 from the replay (its schedule's
// first wait) and make it a regular activity (no LocalFirsts place was
// reserved for it by anyone).
func TestReplayOfFirstDueRunWaitsItsFirstWaitAndIsNotLocal(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, fail(404))
	in.FirstDue, in.FirstLocal = env.Now(), true
	in.AcceptedAt = env.Now().Add(-time.Second)
	newer := delivery.Settings{Schedule: []time.Duration{time.Minute, time.Minute}, Deadline: time.Hour, RequestTimeout: 3 * time.Second}
	requested := env.Now().Add(2 * time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 7, Settings: &newer, RequestedAt: requested})
	}, 2*time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	next := continued(t, env)
	require.Equal(t, 2, next.Cycle)

	env2, s2, _ := setup(t, false, ok())
	var kinds []bool
	env2.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "SendSigned" {
			kinds = append(kinds, false)
		}
	})
	env2.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == "SendSigned" {
			kinds = append(kinds, true)
		}
	})
	env2.ExecuteWorkflow(workflows.DeliveryWorkflow, next)
	st := result(t, env2)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Len(t, s2.calls, 1)
	// Pass these first to show what the replay's run actually did.
	t.Logf("replay cycle input: FirstDue=%v FirstLocal=%v; attempt 1 at +%s, local=%v", next.FirstDue, next.FirstLocal, s2.calls[0], kinds)
	require.Equal(t, []bool{false}, kinds, "the replay's attempt 1 is a regular activity: no LocalFirsts place was reserved for it")
	require.Equal(t, delivery.Jitter(time.Minute, dlv, 1), s2.calls[0], "the replay's attempt 1 waits its schedule's first wait")
	require.True(t, next.FirstDue.IsZero() && !next.FirstLocal, "FirstDue/FirstLocal carried into the replay's input")
	_ = activities.ClassSuccess
}
