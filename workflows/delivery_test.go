package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"hookrelay/activities"
	"hookrelay/delivery"
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
	// markStatus answers a mark; nil answers the status asked for.
	markStatus func(activities.MarkRequest) (delivery.Status, error)
	// eventsPerSend, when set, grows the run's history length by this much
	// per attempt (the test environment does not count it).
	eventsPerSend int
}

func (s *scripted) send(_ context.Context, req activities.SendRequest) (activities.SendResult, error) {
	i := len(s.calls)
	s.calls = append(s.calls, s.env.Now().Sub(s.start))
	if s.eventsPerSend > 0 {
		s.env.SetCurrentHistoryLength(s.eventsPerSend * len(s.calls))
	}
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

func (s *scripted) mark(_ context.Context, req activities.MarkRequest) (activities.MarkResult, error) {
	s.marks = append(s.marks, req)
	if s.markStatus != nil {
		st, err := s.markStatus(req)
		return activities.MarkResult{Status: st}, err
	}
	return activities.MarkResult{Status: req.Status}, nil
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
	for i, w := range delivery.DefaultSchedule() {
		out = append(out, delivery.Jitter(w, dlv, i+1))
	}
	return out
}

func TestFirstAttemptSucceeds(t *testing.T) {
	t.Parallel()
	for _, local := range []bool{false, true} {
		env, s, in := setup(t, local, ok())
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		st := result(t, env)
		require.Equal(t, delivery.StatusSucceeded, st.Status)
		require.Equal(t, 1, st.AttemptCount)
		require.Len(t, s.calls, 1)
		require.Equal(t, expectedWaits()[0], s.calls[0], "first attempt waits the first jittered wait")
		require.Empty(t, s.marks, "a first-attempt success costs no extra activity")
	}
}

func TestSixFailuresDeadLetterAt72Minutes(t *testing.T) {
	t.Parallel()
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

	require.Equal(t, delivery.StatusPending, early.Status, "before the first attempt")
	require.Zero(t, early.AttemptCount)
	require.True(t, s.start.Add(expectedWaits()[0]).Equal(*early.NextAttemptAt), "next attempt time")
	require.Equal(t, delivery.StatusDelivering, mid.Status)
	require.Equal(t, 3, mid.AttemptCount, "1 s + 5 s + 30 s elapsed by 40 s")
	require.NotNil(t, mid.NextAttemptAt)
	require.Equal(t, 502, mid.LastAttempt.StatusCode)

	require.Equal(t, delivery.StatusDeadLettered, dead.Status)
	require.Contains(t, dead.DeadLetterReason, "all 6 attempts failed")
	require.Nil(t, dead.NextAttemptAt)
	require.Equal(t, delivery.StatusDeadLettered, st.Status, "retention passed without replay")
	require.Equal(t, []activities.MarkRequest{{DeliveryID: dlv, Status: delivery.StatusDeadLettered, Reason: dead.DeadLetterReason, Cycle: 1, LastClass: delivery.ClassRetryable}}, s.marks)
}

func TestThrottledHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	throttled := fail(429)
	throttled.RetryAfter, throttled.HasRetryAfter = 120*time.Second, true
	env, s, in := setup(t, false, throttled, ok())
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Len(t, s.calls, 2)
	require.Equal(t, 120*time.Second, s.calls[1]-s.calls[0])
}

func TestThrottledWithoutHintUsesSchedule(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, fail(429), ok())
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Equal(t, expectedWaits()[1], s.calls[1]-s.calls[0])
}

func TestThrottledHintIsClampedToOneSecond(t *testing.T) {
	t.Parallel()
	throttled := fail(429)
	throttled.HasRetryAfter = true // Retry-After: 0
	env, s, in := setup(t, false, throttled, ok())
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Equal(t, time.Second, s.calls[1]-s.calls[0])
}

func TestThrottledHintPastDeadlineDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	throttled := fail(429)
	throttled.RetryAfter, throttled.HasRetryAfter = 2*time.Hour, true
	env, s, in := setup(t, false, throttled)
	dead := queryAt(t, env, time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	result(t, env)
	require.Len(t, s.calls, 1)
	require.Equal(t, delivery.StatusDeadLettered, dead.Status)
	require.Contains(t, dead.DeadLetterReason, "beyond the deadline")
}

func TestPermanentFailuresDeadLetterAfterOneAttempt(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 403, 404, 301, 302} {
		res := fail(code)
		res.Error = fmt.Sprintf("HTTP %d; check the endpoint's configuration", code)
		env, s, in := setup(t, false, res)
		dead := queryAt(t, env, time.Minute)
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		result(t, env)
		require.Len(t, s.calls, 1, "HTTP %d", code)
		require.Equal(t, delivery.StatusDeadLettered, dead.Status)
		require.Equal(t, fmt.Sprintf("permanent failure on attempt 1 (HTTP %d; check the endpoint's configuration)", code), dead.DeadLetterReason,
			"the attempt's own advice, once")
	}
}

func TestGoneDeadLettersAndReportsDisabled(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, fail(410))
	dead := queryAt(t, env, time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	result(t, env)
	require.Len(t, s.calls, 1)
	require.Contains(t, dead.DeadLetterReason, "410 Gone; the endpoint was disabled")
	require.Equal(t, activities.ClassPermanent, dead.LastAttempt.Class, "contract §4: a 410 is permanent")
}

// TestActivityFailureIsNoAttempt: an attempt that did not complete (the
// worker died) uses its slot of the schedule but is not an attempt.
func TestActivityFailureIsNoAttempt(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, activities.SendResult{}, ok())
	s.errs = []error{errors.New("worker lost")}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Len(t, s.calls, 2)
	require.Equal(t, 1, st.AttemptCount)
	require.Equal(t, activities.ClassSuccess, st.Attempts[0].Class)
	require.Equal(t, 2, st.Attempts[0].Number)
}

func TestDisabledEndpointCancelsWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, activities.SendResult{Class: activities.ClassEndpointDisabled})
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusCanceled, st.Status)
	require.Zero(t, st.AttemptCount, "nothing was sent")
	require.Equal(t, delivery.StatusCanceled, s.marks[len(s.marks)-1].Status)
}

// TestNoSigningKeyDeadLettersAtOnce: nothing can be sent, so the delivery
// dead-letters with that reason instead of retrying until the deadline.
func TestNoSigningKeyDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	s.errs = []error{temporal.NewNonRetryableApplicationError("endpoint ep_1 has no valid signing key; nothing was sent", activities.ErrNoSigningKey, nil)}
	dead := queryAt(t, env, time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	result(t, env)
	require.Len(t, s.calls, 1)
	require.Equal(t, delivery.StatusDeadLettered, dead.Status)
	require.Zero(t, dead.AttemptCount)
	require.Contains(t, dead.DeadLetterReason, "no valid signing key")
}

// TestDeliveryGoneEndsTheRun: once the delivery's row is gone (its app was
// deleted), the run ends at once, whichever activity finds out.
func TestDeliveryGoneEndsTheRun(t *testing.T) {
	t.Parallel()
	goneErr := temporal.NewNonRetryableApplicationError("delivery gone", activities.ErrDeliveryGone, nil)
	t.Run("attempt", func(t *testing.T) {
		env, s, in := setup(t, false)
		s.errs = []error{goneErr}
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		st := result(t, env)
		require.Len(t, s.calls, 1)
		require.Empty(t, s.marks)
		require.Equal(t, delivery.StatusCanceled, st.Status)
	})
	t.Run("mark", func(t *testing.T) {
		env, s, in := setup(t, false, fail(404))
		s.markStatus = func(activities.MarkRequest) (delivery.Status, error) { return "", goneErr }
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		result(t, env)
		require.Len(t, s.marks, 1, "not retried")
	})
}

// TestSuccessWinsOverCancel: a cancel that arrives while an attempt is in
// flight does not undo its 2xx.
func TestSuccessWinsOverCancel(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	env.RegisterActivity(&activities.Activities{})
	var marks []activities.MarkRequest
	env.OnActivity(a.SendSigned, mock.Anything, mock.Anything).After(3*time.Second).Return(ok(), nil)
	env.OnActivity(a.MarkDelivery, mock.Anything, mock.Anything).Return(func(_ context.Context, m activities.MarkRequest) (activities.MarkResult, error) {
		marks = append(marks, m)
		return activities.MarkResult{Status: m.Status}, nil
	})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalCancel, nil) }, 2*time.Second)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, workflows.Input{DeliveryID: dlv})
	st := result(t, env)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Empty(t, marks, "no cancel recorded")
}

// TestCancelWhileParkedKeepsTheDeadLetter: a cancel ends a parked dead
// letter's run; the row answers that it is still dead-lettered.
func TestCancelWhileParkedKeepsTheDeadLetter(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, fail(404))
	s.markStatus = func(m activities.MarkRequest) (delivery.Status, error) { return delivery.StatusDeadLettered, nil }
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalCancel, nil) }, time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusDeadLettered, st.Status)
	require.Equal(t, delivery.StatusCanceled, s.marks[1].Status, "asked")
	require.Less(t, env.Now().Sub(s.start), 2*time.Hour, "ended at the cancel, not at retention")
}

// TestDeadlineCountsFromAcceptance: an event accepted 74 minutes before its
// workflow started has a minute left: 3 attempts instead of 6.
func TestDeadlineCountsFromAcceptance(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	in.AcceptedAt = env.Now().Add(-74 * time.Minute)
	dead := queryAt(t, env, 10*time.Minute)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	result(t, env)
	require.Len(t, s.calls, 3)
	require.Contains(t, dead.DeadLetterReason, "deadline")
	for _, r := range s.reqs {
		require.True(t, r.Deadline.Equal(in.AcceptedAt.Add(delivery.DeadlineDefault)), "the attempt knows the deadline")
	}
}

func TestCancelSignalWhileWaiting(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalCancel, nil) }, 10*time.Second)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusCanceled, st.Status)
	require.Len(t, s.calls, 2, "attempts at 1 s and 6 s, canceled during the 30 s wait")
}

// continued returns the input of the run a finished run continued as.
func continued(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.Input {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	require.Equal(t, workflows.WorkflowName, can.WorkflowType.Name)
	var in workflows.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	return in
}

func TestReplayAfterDeadLetterContinuesAsNew(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, fail(404))
	dead := queryAt(t, env, time.Hour)
	newer := delivery.Settings{Schedule: []time.Duration{0, time.Minute}, Deadline: time.Hour, RequestTimeout: 3 * time.Second}
	requested := env.Now().Add(2 * time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 7, Settings: &newer, RequestedAt: requested})
	}, 2*time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusDeadLettered, dead.Status)
	next := continued(t, env)
	require.Equal(t, 2, next.Cycle)
	require.Equal(t, int64(7), next.ReplayID)
	require.Equal(t, newer, next.Settings, "the new cycle uses the endpoint's settings at the replay")
	require.True(t, next.AcceptedAt.Equal(requested), "its deadline counts from the replay's request")
	require.Equal(t, dlv, next.DeliveryID, "same delivery, so the same event ID")
	require.Equal(t, []delivery.Status{delivery.StatusDeadLettered}, []delivery.Status{s.marks[0].Status})

	// The next run: cycle 2 from attempt 1 with a fresh schedule.
	env2, s2, _ := setup(t, false, ok())
	env2.ExecuteWorkflow(workflows.DeliveryWorkflow, next)
	st := result(t, env2)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Equal(t, 2, st.Cycle)
	require.Equal(t, 1, s2.reqs[0].Number)
	require.Equal(t, 2, s2.reqs[0].Cycle)
	require.Equal(t, newer.RequestTimeout, s2.reqs[0].Timeout)
	require.Equal(t, activities.MarkRequest{DeliveryID: dlv, Status: delivery.StatusDelivering, Cycle: 2, ReplayID: 7}, s2.marks[0])
	require.Len(t, st.Attempts, 1, "the state holds the current cycle only")
}

// TestReplayIDRunsOnce: a replay signal whose ID the run has already run
// (the outbox row was dispatched twice) starts no cycle.
func TestReplayIDRunsOnce(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, fail(404))
	in.Cycle, in.ReplayID = 2, 9
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 9})
	}, time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env) // retention passed: no new cycle
	require.Equal(t, delivery.StatusDeadLettered, st.Status)
	require.Len(t, s.calls, 1)

	env, _, in = setup(t, false, fail(404))
	in.Cycle, in.ReplayID = 2, 9
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 9})
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 10})
	}, time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, int64(10), continued(t, env).ReplayID)
}

// TestThreeHundredReplaysStayBounded replays one delivery 300 times: every
// run holds one cycle, so its state (the query answer and the result) does
// not grow.
func TestThreeHundredReplaysStayBounded(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, fail(404))
	smallest, largest := 1<<30, 0
	for i := 1; i <= 300; i++ {
		replay := int64(i)
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: replay})
		}, time.Hour)
		st := queryAt(t, env, 30*time.Minute)
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
		in = continued(t, env)
		require.Equal(t, i+1, in.Cycle)
		require.Equal(t, 1, st.AttemptCount)
		raw, err := json.Marshal(st)
		require.NoError(t, err)
		smallest, largest = min(smallest, len(raw)), max(largest, len(raw))
		env, _, _ = setup(t, false, fail(404))
	}
	// Only the cycle number and timestamps change length (a few bytes);
	// kept in one run, 300 cycles would hold 300 attempts.
	require.LessOrEqual(t, largest-smallest, 16, "state size does not grow with replays: %d–%d bytes", smallest, largest)
}

func TestNewRunFromReplayAfterRetention(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, ok())
	in.Cycle = 3
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Equal(t, 3, s.reqs[0].Cycle)
	require.Equal(t, delivery.StatusDelivering, s.marks[0].Status)
}

func TestDeadlineStopsAttempts(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	in.Settings = delivery.Settings{
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

// TestReplayRacingSuccess: a replay signal that reaches the run in the same
// task as its success starts a new cycle instead of being dropped.
func TestReplayRacingSuccess(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, ok(), ok())
	// Delivered at ≈0.9–1.1 s; the signal lands in the same task.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin"})
	}, expectedWaits()[0])
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, 2, continued(t, env).Cycle)
	require.Len(t, s.reqs, 1)
}

// TestBusyEndpointContinuesAsNew: an endpoint that stays busy for hours
// sends nothing; the run continues as new past HistoryBound events with
// the attempt it waits to make, instead of growing to Temporal's limit.
func TestBusyEndpointContinuesAsNew(t *testing.T) {
	t.Parallel()
	busy := activities.SendResult{Class: activities.ClassEndpointBusy}
	results := make([]activities.SendResult, 5000)
	for i := range results {
		results[i] = busy
	}
	env, s, in := setup(t, false, results...)
	s.eventsPerSend = 6
	in.Settings = delivery.Settings{Schedule: []time.Duration{0, time.Second}, Deadline: 3 * time.Hour}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	next := continued(t, env)
	require.NotNil(t, next.Progress)
	require.Equal(t, 1, next.Progress.Attempt, "still waiting to make attempt 1")
	require.Empty(t, next.Progress.Attempts)
	require.False(t, next.AcceptedAt.IsZero(), "the deadline keeps counting from the first run's acceptance")
	require.LessOrEqual(t, 6*len(s.calls), workflows.HistoryBound+6)

	// The next run makes that attempt when the endpoint has room.
	env2, s2, _ := setup(t, false, ok())
	env2.ExecuteWorkflow(workflows.DeliveryWorkflow, next)
	st := result(t, env2)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Equal(t, 1, s2.reqs[0].Number)
}

// TestHeldEndpointWaitsForItsProbe: an attempt an endpoint's breaker held
// (HeldUntil: the end of its cool-down) is made again about then, spread by
// the jitter, not every BusyRecheck; a hold past the deadline ends at the
// last moment an attempt fits before it, and the delivery is dead-lettered.
func TestHeldEndpointWaitsForItsProbe(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	in.Settings = delivery.Settings{Schedule: []time.Duration{0, time.Second}, Deadline: time.Hour}
	s.results = []activities.SendResult{{Class: activities.ClassEndpointBusy, HeldUntil: s.start.Add(2 * time.Minute)}, ok()}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Len(t, s.calls, 2, "the held attempt was rechecked before its endpoint's probe")
	require.Equal(t, s.calls[0]+delivery.HeldWait(s.start.Add(2*time.Minute), s.start.Add(s.calls[0]), dlv, 1), s.calls[1])
	require.InDelta(t, float64(2*time.Minute), float64(s.calls[1]), float64(13*time.Second))

	env, s, in = setup(t, false)
	in.Settings = delivery.Settings{Schedule: []time.Duration{0, time.Second}, Deadline: time.Minute}
	s.results = []activities.SendResult{{Class: activities.ClassEndpointBusy, HeldUntil: s.start.Add(5 * time.Minute)}}
	atDeadline := queryAt(t, env, time.Minute+time.Second)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusDeadLettered, result(t, env).Status)
	require.Equal(t, []time.Duration{0, time.Minute - delivery.RequestTimeoutDefault}, s.calls,
		"the held attempt is made again at the last moment it fits before the deadline")
	require.Equal(t, delivery.StatusDeadLettered, atDeadline.Status, "the hold outlasted the deadline")
}

// TestHeldSpreadKeepsAnAttemptThatFits: a probe 168 s in, for a delivery
// whose last start is 170 s in (deadline 3 min, timeout 10 s): the spread
// would take the attempt to its last start (the test's timers fire on
// time; a real one fires a little late and the delivery is dead-lettered),
// so the wait ends 1 s before it (delivery.HeldLead). With the last start
// 0.8 s away and the probe 0.5 s away, the attempt is made at the probe,
// not after the busy recheck (about 1 s, past the last start).
func TestHeldSpreadKeepsAnAttemptThatFits(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	in.Settings = delivery.Settings{Schedule: []time.Duration{0, time.Second}, Deadline: 3 * time.Minute}
	probe := s.start.Add(168 * time.Second)
	last := 3*time.Minute - delivery.RequestTimeoutDefault
	require.Greater(t, delivery.HeldWait(probe, s.start, dlv, 1), last, "the case must spread past the last start")
	s.results = []activities.SendResult{{Class: activities.ClassEndpointBusy, HeldUntil: probe}, ok()}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Equal(t, []time.Duration{0, last - delivery.HeldLead}, s.calls)

	env, s, in = setup(t, false)
	in.Settings = delivery.Settings{Schedule: []time.Duration{0, time.Second}, Deadline: delivery.RequestTimeoutDefault + 800*time.Millisecond}
	s.results = []activities.SendResult{{Class: activities.ClassEndpointBusy, HeldUntil: s.start.Add(500 * time.Millisecond)}, ok()}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Equal(t, []time.Duration{0, 500 * time.Millisecond}, s.calls)
}

// TestReplayBufferedBeforeFirstTaskIsKept: a newer replay that reached a
// replay's run before its first task is run when this cycle ends, not
// dropped with the signal that started the run.
func TestReplayBufferedBeforeFirstTaskIsKept(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, ok())
	in.Cycle, in.ReplayID = 2, 9
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 9})
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 12})
	}, 0)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, int64(12), continued(t, env).ReplayID)
}

// TestContinuedCycleIsNotStartedAgain: a replayed cycle carried on into a
// new run (Progress) does not mark the delivery delivering again, so a
// cancel recorded meanwhile stays.
func TestContinuedCycleIsNotStartedAgain(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, ok())
	in.Cycle, in.ReplayID = 2, 9
	in.Progress = &workflows.Progress{Attempt: 1}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	for _, m := range s.marks {
		require.NotEqual(t, delivery.StatusDelivering, m.Status, "the cycle was started by the first run")
	}
	require.Equal(t, 2, s.reqs[0].Cycle)
}
