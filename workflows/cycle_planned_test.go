package workflows_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/workflows"
)

// TestDelayedRunKeepsTheRetryItsRecordPlanned: the sender's record plans
// attempt 2 with delivery.Plan at the failure (t0) and the dispatcher
// delays the run to that time. Planned again from the run's (delayed)
// start, Plan's deadline check would count the schedule's wait twice and
// dead-letter a retry that fits the deadline, as the record (and the API)
// promised; the run keeps the record's plan.
func TestDelayedRunKeepsTheRetryItsRecordPlanned(t *testing.T) {
	t.Parallel()
	throttled := fail(429)
	throttled.RetryAfter, throttled.HasRetryAfter = 20*time.Second, true
	for _, tc := range []struct {
		name     string
		set      delivery.Settings
		first    activities.SendResult
		throttle *time.Duration
	}{
		// Deadline 20 s, request timeout 5 s, attempt 2 after 10 s (±10 %):
		// at t0 (acceptance + 100 ms) 14.9 s are left for a start, the
		// retry is due by t0+11 s and finishes by t0+16 s.
		{"scheduled retry", delivery.Settings{Schedule: []time.Duration{0, 10 * time.Second}, Deadline: 20 * time.Second, RequestTimeout: 5 * time.Second}, fail(502), nil},
		// Deadline 45 s, timeout 10 s, Retry-After 20 s: due at t0+20 s,
		// done by t0+30 s.
		{"429 Retry-After", delivery.Settings{Schedule: []time.Duration{0, time.Hour}, Deadline: 45 * time.Second, RequestTimeout: 10 * time.Second}, throttled, &throttled.RetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, s, in := setup(t, false, ok())
			accepted := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
			t0 := accepted.Add(100 * time.Millisecond)
			next := handOffDelayed(env, s, &in, tc.set, tc.first, tc.throttle, accepted, t0)
			require.Empty(t, next.DeadLetter, "the record plans attempt 2")
			require.LessOrEqual(t, next.At.Sub(t0), 30*time.Second, "within StartDelayMax: the dispatcher delays the run to it")
			env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
			st := result(t, env)
			require.Equal(t, delivery.StatusSucceeded, st.Status, "dead letter reason: %q", st.DeadLetterReason)
			require.Len(t, s.reqs, 1)
		})
	}
}

// TestInputWithPlannedTimeReplaysATimerRecordedByAnOlderWorker: a run
// whose input a newer sender made (Resume.Result.NextAttemptAt set, start
// delayed) but whose first task an older worker took (a rolling deploy, a
// rollback) recorded the timer the old code plans. Replaying it, today's
// code must plan that timer again (versionPlannedRetry is absent from the
// history), not skip it because the planned time has passed. The history
// is v7-retry-then-success (recorded before the planned time existed) with
// the NextAttemptAt a newer sender would have put in its input.
func TestInputWithPlannedTimeReplaysATimerRecordedByAnOlderWorker(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/v7-retry-then-success.json")
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(raw, &h))
	started := h["events"].([]any)[0].(map[string]any)["workflowExecutionStartedEventAttributes"].(map[string]any)
	p := started["input"].(map[string]any)["payloads"].([]any)[0].(map[string]any)
	data, err := base64.StdEncoding.DecodeString(p["data"].(string))
	require.NoError(t, err)
	const planned = `"NextAttemptAt":"2026-12-02T12:00:32.900000000Z",`
	patched := strings.Replace(string(data), `"RetryAfter":"0s"}}`, strings.TrimSuffix(planned, ",")+`,"RetryAfter":"0s"}}`, 1)
	require.NotEqual(t, string(data), patched)
	p["data"] = base64.StdEncoding.EncodeToString([]byte(patched))
	out, err := json.Marshal(h)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "mixed.json")
	require.NoError(t, os.WriteFile(f, out, 0o600))
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.DeliveryWorkflow)
	require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
}

// TestDelayedRunKeepsTheStateItsStartSet: the dispatcher starts a failed
// first attempt's run with HookrelayState delivering, so the run upserts no
// delivering before attempt 2 (each upsert is a visibility write); a run
// whose history has planned-retry version 1 (an older worker's) still does,
// and a run an older dispatcher started (LocalActivity set, so send-async is
// asked too) taken by today's worker does not.
func TestDelayedRunKeepsTheStateItsStartSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version workflow.Version
		local   bool
		want    []string
	}{
		{"today", 0, false, []string{"succeeded"}},
		{"recorded by an older worker", 1, false, []string{"delivering", "succeeded"}},
		{"started by an older dispatcher", 0, true, []string{"succeeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, s, in := setup(t, tc.local, ok())
			if tc.version != 0 {
				env.OnGetVersion("planned-retry", workflow.DefaultVersion, 2).Return(tc.version)
			}
			var states []string
			recordStates(env, &states)
			handOffDelayed(env, s, &in, delivery.Settings{Schedule: []time.Duration{0, time.Second}}, fail(502), nil, env.Now(), env.Now())
			env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
			require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
			require.Len(t, s.reqs, 1)
			require.Equal(t, tc.want, states)
		})
	}
}

// TestPlannedRetryOnATimerKeepsTheStartState: a retry planned further out
// than the start delay's bound waits on the run's timer; the run still
// keeps the state its start set (the query says delivering while it waits),
// and a cancel during the wait is its only upsert.
func TestPlannedRetryOnATimerKeepsTheStartState(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, ok())
	in.Settings.Schedule = []time.Duration{0, time.Hour}
	failed := fail(503)
	failed.Number, failed.StartedAt, failed.NextAttemptAt = 1, env.Now().Add(-time.Second), env.Now().Add(time.Hour)
	in.Resume = &workflows.Resume{Result: failed}
	var states []string
	recordStates(env, &states)
	mid := queryAt(t, env, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalCancel, nil) }, 2*time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusCanceled, result(t, env).Status)
	require.Empty(t, s.reqs, "canceled before attempt 2")
	require.Equal(t, []string{"canceled"}, states)
	require.Equal(t, delivery.StatusDelivering, mid.Status)
	require.NotNil(t, mid.NextAttemptAt)
}

// recordStates appends each HookrelayState the run upserts to states.
func recordStates(env *testsuite.TestWorkflowEnvironment, states *[]string) {
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(workflows.SAState); ok {
			*states = append(*states, v)
		}
	}).Return(nil)
}

// handOffDelayed makes in the hand-off of a sender's first attempt first,
// made at t0 for a delivery accepted at accepted: attempt 2 planned as the
// attempt's record plans it (delivery.Plan, what activities.nextAttempt
// records), and the run's first task at that time, where the dispatcher's
// start delay ends. It returns the plan.
func handOffDelayed(env *testsuite.TestWorkflowEnvironment, s *scripted, in *workflows.Input, set delivery.Settings,
	first activities.SendResult, throttle *time.Duration, accepted, t0 time.Time) delivery.Next {
	next := delivery.Plan(set, dlv, 2, throttle, t0, accepted.Add(set.WithDefaults().Deadline))
	env.SetStartTime(next.At)
	s.start = next.At
	in.Settings, in.AcceptedAt = set, accepted
	first.Number, first.StartedAt, first.NextAttemptAt = 1, t0, next.At
	in.Resume = &workflows.Resume{Result: first}
	return next
}
