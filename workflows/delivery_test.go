package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"hookrelay/activities"
	"hookrelay/workflows"
)

const dlv = "dlv_test"

// scripted plays SendSigned results in order and records when each attempt
// started in workflow time.
type scripted struct {
	env     *testsuite.TestWorkflowEnvironment
	start   time.Time
	results []activities.SendResult
	errs    []error
	calls   []time.Duration
	reqs    []activities.SendRequest
	marks   []activities.MarkRequest
}

func (s *scripted) send(_ context.Context, req activities.SendRequest) (activities.SendResult, error) {
	i := len(s.calls)
	s.calls = append(s.calls, s.env.Now().Sub(s.start))
	s.reqs = append(s.reqs, req)
	if i < len(s.errs) && s.errs[i] != nil {
		return activities.SendResult{}, s.errs[i]
	}
	r := activities.SendResult{Class: activities.ClassRetryable, StatusCode: 502, Error: "HTTP 502"}
	if i < len(s.results) {
		r = s.results[i]
	}
	r.Number = req.Number
	r.StartedAt = s.env.Now()
	return r, nil
}

func (s *scripted) mark(_ context.Context, req activities.MarkRequest) error {
	s.marks = append(s.marks, req)
	return nil
}

func setup(t *testing.T, local bool, results ...activities.SendResult) (*testsuite.TestWorkflowEnvironment, *scripted, workflows.Input) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	s := &scripted{env: env, start: env.Now(), results: results}
	var a *activities.Activities
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.SendSigned, mock.Anything, mock.Anything).Return(s.send)
	env.OnActivity(a.MarkDelivery, mock.Anything, mock.Anything).Return(s.mark)
	env.RegisterWorkflow(workflows.DeliveryWorkflow)
	in := workflows.Input{DeliveryID: dlv, EventID: "evt_1", EndpointID: "ep_1", AppID: "app_1", EventType: "payment.succeeded", LocalActivity: local}
	return env, s, in
}

func ok() activities.SendResult {
	return activities.SendResult{Class: activities.ClassSuccess, StatusCode: 200}
}
func fail(code int) activities.SendResult {
	return activities.SendResult{Class: activities.ClassifyStatus(code), StatusCode: code, Error: "HTTP"}
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.State {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st workflows.State
	require.NoError(t, env.GetWorkflowResult(&st))
	return st
}

func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.State {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.QueryState)
	require.NoError(t, err)
	var st workflows.State
	require.NoError(t, v.Get(&st))
	return st
}

// queryAt answers the state query after d of workflow time; read the
// result once the workflow has run.
func queryAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration) *workflows.State {
	st := &workflows.State{}
	env.RegisterDelayedCallback(func() { *st = query(t, env) }, d)
	return st
}

// expectedWaits returns the jittered default schedule of dlv.
func expectedWaits() []time.Duration {
	var out []time.Duration
	for i, w := range workflows.DefaultSchedule() {
		out = append(out, workflows.Jitter(w, dlv, i+1))
	}
	return out
}

func TestFirstAttemptSucceeds(t *testing.T) {
	for _, local := range []bool{false, true} {
		env, s, in := setup(t, local, ok())
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		st := result(t, env)
		require.Equal(t, workflows.StatusSucceeded, st.Status)
		require.Equal(t, 1, st.AttemptCount)
		require.Len(t, s.calls, 1)
		require.Equal(t, expectedWaits()[0], s.calls[0], "first attempt waits the first jittered wait")
		require.Empty(t, s.marks, "a first-attempt success costs no extra activity")
	}
}

func TestSixFailuresDeadLetterAt72Minutes(t *testing.T) {
	env, s, in := setup(t, false)
	early := queryAt(t, env, 500*time.Millisecond)
	mid := queryAt(t, env, 40*time.Second)
	dead := queryAt(t, env, 80*time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env) // completes when retention ends

	require.Len(t, s.calls, 6)
	var sum time.Duration
	for i, w := range expectedWaits() {
		sum += w
		require.Equal(t, sum, s.calls[i], "attempt %d", i+1)
	}
	// 4356 s ± 10 %, never past the 75 min deadline.
	require.InDelta(t, 4356, s.calls[5].Seconds(), 436)
	require.Less(t, s.calls[5], 75*time.Minute-10*time.Second)

	require.Equal(t, workflows.StatusPending, early.Status, "before the first attempt")
	require.Zero(t, early.AttemptCount)
	require.True(t, s.start.Add(expectedWaits()[0]).Equal(*early.NextAttemptAt), "next attempt time")
	require.Equal(t, workflows.StatusDelivering, mid.Status)
	require.Equal(t, 3, mid.AttemptCount, "1 s + 5 s + 30 s elapsed by 40 s")
	require.NotNil(t, mid.NextAttemptAt)
	require.Equal(t, 502, mid.LastAttempt.StatusCode)

	require.Equal(t, workflows.StatusDeadLettered, dead.Status)
	require.Contains(t, dead.DeadLetterReason, "all 6 attempts failed")
	require.Nil(t, dead.NextAttemptAt)
	require.Equal(t, workflows.StatusDeadLettered, st.Status, "retention passed without replay")
	require.Equal(t, []activities.MarkRequest{{DeliveryID: dlv, Status: workflows.StatusDeadLettered, Reason: dead.DeadLetterReason, Cycle: 1}}, s.marks)
}

func TestThrottledHonoursRetryAfter(t *testing.T) {
	throttled := fail(429)
	throttled.RetryAfter, throttled.HasRetryAfter = 120*time.Second, true
	env, s, in := setup(t, false, throttled, ok())
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, workflows.StatusSucceeded, st.Status)
	require.Len(t, s.calls, 2)
	require.Equal(t, 120*time.Second, s.calls[1]-s.calls[0])
}

func TestThrottledWithoutHintUsesSchedule(t *testing.T) {
	env, s, in := setup(t, false, fail(429), ok())
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, workflows.StatusSucceeded, result(t, env).Status)
	require.Equal(t, expectedWaits()[1], s.calls[1]-s.calls[0])
}

func TestThrottledHintIsClampedToOneSecond(t *testing.T) {
	throttled := fail(429)
	throttled.HasRetryAfter = true // Retry-After: 0
	env, s, in := setup(t, false, throttled, ok())
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, workflows.StatusSucceeded, result(t, env).Status)
	require.Equal(t, time.Second, s.calls[1]-s.calls[0])
}

func TestThrottledHintPastDeadlineDeadLettersAtOnce(t *testing.T) {
	throttled := fail(429)
	throttled.RetryAfter, throttled.HasRetryAfter = 2*time.Hour, true
	env, s, in := setup(t, false, throttled)
	dead := queryAt(t, env, time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	result(t, env)
	require.Len(t, s.calls, 1)
	require.Equal(t, workflows.StatusDeadLettered, dead.Status)
	require.Contains(t, dead.DeadLetterReason, "beyond the deadline")
}

func TestPermanentFailuresDeadLetterAfterOneAttempt(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 301, 302} {
		env, s, in := setup(t, false, fail(code))
		dead := queryAt(t, env, time.Minute)
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		result(t, env)
		require.Len(t, s.calls, 1, "HTTP %d", code)
		require.Equal(t, workflows.StatusDeadLettered, dead.Status)
		require.Contains(t, dead.DeadLetterReason, "check the endpoint's configuration")
	}
}

func TestGoneDeadLettersAndReportsDisabled(t *testing.T) {
	env, s, in := setup(t, false, fail(410))
	dead := queryAt(t, env, time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	result(t, env)
	require.Len(t, s.calls, 1)
	require.Contains(t, dead.DeadLetterReason, "410")
	require.Equal(t, activities.ClassGone, dead.LastAttempt.Class)
}

func TestActivityFailureIsRetryable(t *testing.T) {
	env, s, in := setup(t, false, activities.SendResult{}, ok())
	s.errs = []error{errors.New("worker lost")}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, workflows.StatusSucceeded, st.Status)
	require.Equal(t, activities.ClassRetryable, st.Attempts[0].Class)
	require.Contains(t, st.Attempts[0].Error, "worker lost")
}

func TestDisabledEndpointCancels(t *testing.T) {
	env, s, in := setup(t, false, activities.SendResult{Class: activities.ClassEndpointDisabled})
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, workflows.StatusCanceled, result(t, env).Status)
	require.Equal(t, workflows.StatusCanceled, s.marks[len(s.marks)-1].Status)
}

func TestCancelSignalWhileWaiting(t *testing.T) {
	env, s, in := setup(t, false)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalCancel, nil) }, 10*time.Second)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, workflows.StatusCanceled, st.Status)
	require.Len(t, s.calls, 2, "attempts at 1 s and 6 s, canceled during the 30 s wait")
}

func TestReplayAfterDeadLetterStartsNewCycle(t *testing.T) {
	env, s, in := setup(t, false, fail(404), ok())
	dead := queryAt(t, env, time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin"})
	}, 2*time.Hour)
	replayed := queryAt(t, env, 2*time.Hour+500*time.Millisecond)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)

	require.Equal(t, workflows.StatusDeadLettered, dead.Status)
	require.Equal(t, workflows.StatusPending, replayed.Status, "new cycle waits its first wait")
	require.Equal(t, 2, replayed.Cycle)
	require.Equal(t, workflows.StatusSucceeded, st.Status)
	require.Equal(t, 2, st.Cycle)
	require.Len(t, s.reqs, 2)
	require.Equal(t, 1, s.reqs[0].Cycle)
	require.Equal(t, 2, s.reqs[1].Cycle)
	require.Equal(t, 1, s.reqs[1].Number, "a new cycle starts from attempt 1 with a fresh schedule")
	require.Equal(t, dlv, s.reqs[1].DeliveryID, "same delivery, so the same event ID")
	require.Equal(t, 2*time.Hour+expectedWaits()[0], s.calls[1])
	require.Equal(t, []string{workflows.StatusDeadLettered, workflows.StatusDelivering}, []string{s.marks[0].Status, s.marks[1].Status})
}

func TestNewRunFromReplayAfterRetention(t *testing.T) {
	env, s, in := setup(t, false, ok())
	in.Cycle = 3
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, workflows.StatusSucceeded, st.Status)
	require.Equal(t, 3, s.reqs[0].Cycle)
	require.Equal(t, workflows.StatusDelivering, s.marks[0].Status)
}

func TestDeadlineStopsAttempts(t *testing.T) {
	env, s, in := setup(t, false)
	in.Settings = workflows.Settings{
		Schedule:       []time.Duration{time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second},
		Deadline:       25 * time.Second,
		RequestTimeout: 5 * time.Second,
	}
	dead := queryAt(t, env, time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	result(t, env)
	// Attempts at ≈1 s and ≈11 s; the third is scheduled ≈10 s later, past
	// the latest start that could finish by 25 s (20 s), so it never starts.
	require.Len(t, s.calls, 2)
	require.Contains(t, dead.DeadLetterReason, "deadline")
}

func TestJitterBounds(t *testing.T) {
	for _, base := range workflows.DefaultSchedule() {
		for i := 0; i < 2000; i++ {
			id := "dlv_" + string(rune('a'+i%26)) + time.Duration(i).String()
			got := workflows.Jitter(base, id, i%6+1)
			require.GreaterOrEqual(t, got, time.Duration(float64(base)*0.9)-time.Millisecond)
			require.LessOrEqual(t, got, time.Duration(float64(base)*1.1)+time.Millisecond)
			require.Equal(t, got, workflows.Jitter(base, id, i%6+1), "deterministic")
		}
	}
	require.Zero(t, workflows.Jitter(0, "x", 1), "a zero wait stays zero")
}

// TestReplayRacingSuccess: a replay signal that reaches the run in the same
// task as its success starts a new cycle instead of being dropped.
func TestReplayRacingSuccess(t *testing.T) {
	env, s, in := setup(t, false, ok(), ok())
	// Delivered at ≈0.9–1.1 s; the signal lands in the same task.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin"})
	}, expectedWaits()[0])
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, workflows.StatusSucceeded, st.Status)
	require.Equal(t, 2, st.Cycle)
	require.Len(t, s.reqs, 2)
}
