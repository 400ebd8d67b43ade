package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/workflows"
)

// carrierRun runs a carrier whose first attempts answer by delivery ID,
// with DeliveryWorkflow mocked, and returns its result, the hand-offs' inputs
// and when (carrier time) each attempt started. A group sent at once
// (SendGroup) answers each of its deliveries the same way, unless group is
// given: it then answers SendGroup.
func carrierRun(t *testing.T, answers map[string]func() (activities.SendResult, error), deliveries []workflows.Input,
	group ...func([]activities.SendRequest) ([]activities.SendOutcome, error)) (workflows.CarrierResult, map[string]workflows.Input, map[string]time.Duration) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	start := env.Now()
	var a *activities.Activities
	env.RegisterActivity(&activities.Activities{})
	var mu sync.Mutex
	started := map[string]time.Duration{}
	env.OnActivity(a.SendSigned, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.SendRequest) (activities.SendResult, error) {
		mu.Lock()
		started[req.DeliveryID] = env.Now().Sub(start)
		mu.Unlock()
		res, err := answers[req.DeliveryID]()
		res.Number, res.StartedAt = req.Number, env.Now()
		return res, err
	})
	env.OnActivity(a.SendGroup, mock.Anything, mock.Anything).Return(func(_ context.Context, reqs []activities.SendRequest) ([]activities.SendOutcome, error) {
		if len(group) > 0 {
			return group[0](reqs)
		}
		outs := make([]activities.SendOutcome, len(reqs))
		for i, req := range reqs {
			// A request with a due time leaves at it (the activity waits).
			at := env.Now()
			if req.At.After(at) {
				at = req.At
			}
			mu.Lock()
			started[req.DeliveryID] = at.Sub(start)
			mu.Unlock()
			res, err := answers[req.DeliveryID]()
			res.Number, res.StartedAt = req.Number, at
			outs[i] = activities.Outcome(res, err)
		}
		return outs, nil
	})
	handed := map[string]workflows.Input{}
	env.RegisterWorkflow(workflows.DeliveryWorkflow)
	env.OnWorkflow(workflows.DeliveryWorkflow, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in workflows.Input) (workflows.State, error) {
		mu.Lock()
		handed[in.DeliveryID] = in
		mu.Unlock()
		return workflows.State{}, nil
	})
	env.RegisterWorkflow(workflows.CarrierWorkflow)
	env.ExecuteWorkflow(workflows.CarrierWorkflow, workflows.CarrierInput{Deliveries: deliveries})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.CarrierResult
	require.NoError(t, env.GetWorkflowResult(&res))
	return res, handed, started
}

// TestCarrierJudgesEachFirstAttempt: each kind of first result reaches the
// right next state: a 2xx is done, a deleted delivery is dropped, and every
// other result goes on in its own DeliveryWorkflow, which judges it as if
// it had made the attempt itself.
func TestCarrierJudgesEachFirstAttempt(t *testing.T) {
	t.Parallel()
	throttled := fail(429)
	throttled.RetryAfter, throttled.HasRetryAfter = 3*time.Second, true
	answers := map[string]func() (activities.SendResult, error){
		"dlv_ok":      func() (activities.SendResult, error) { return ok(), nil },
		"dlv_502":     func() (activities.SendResult, error) { return fail(502), nil },
		"dlv_429":     func() (activities.SendResult, error) { return throttled, nil },
		"dlv_404":     func() (activities.SendResult, error) { return fail(404), nil },
		"dlv_410":     func() (activities.SendResult, error) { return fail(410), nil },
		"dlv_timeout": func() (activities.SendResult, error) { return activities.SendResult{}, errors.New("activity timeout") },
		"dlv_nokey": func() (activities.SendResult, error) {
			return activities.SendResult{}, temporal.NewNonRetryableApplicationError("no valid signing key", activities.ErrNoSigningKey, nil)
		},
		"dlv_gone": func() (activities.SendResult, error) {
			return activities.SendResult{}, temporal.NewNonRetryableApplicationError("gone", activities.ErrDeliveryGone, nil)
		},
		"dlv_disabled": func() (activities.SendResult, error) {
			return activities.SendResult{Class: activities.ClassEndpointDisabled}, nil
		},
	}
	var in []workflows.Input
	for id := range answers {
		in = append(in, workflows.Input{DeliveryID: id, EndpointID: "ep_1", AppID: "app_1", EventType: "a.b", Cycle: 1,
			Settings: delivery.Settings{Schedule: []time.Duration{0, time.Second, time.Second}}})
	}
	res, handed, _ := carrierRun(t, answers, in)
	require.Equal(t, workflows.CarrierResult{Delivered: 1, HandedOff: 7, Gone: 1}, res)
	require.NotContains(t, handed, "dlv_ok")
	require.NotContains(t, handed, "dlv_gone")

	// Each hand-off, run for real: what its DeliveryWorkflow does next.
	want := map[string]struct {
		status   delivery.Status
		attempts int // requests its own workflow makes
		reason   string
	}{
		"dlv_502":      {delivery.StatusSucceeded, 1, ""},
		"dlv_429":      {delivery.StatusSucceeded, 1, ""},
		"dlv_timeout":  {delivery.StatusSucceeded, 1, ""},
		"dlv_404":      {delivery.StatusDeadLettered, 0, "permanent failure on attempt 1 (HTTP)"},
		"dlv_410":      {delivery.StatusDeadLettered, 0, "410 Gone"},
		"dlv_nokey":    {delivery.StatusDeadLettered, 0, "no valid signing key"},
		"dlv_disabled": {delivery.StatusCanceled, 0, ""},
	}
	for id, w := range want {
		child, found := handed[id]
		require.True(t, found, id)
		require.NotNil(t, child.Resume, id)
		env, s, _ := setup(t, true, ok())
		dead := queryAt(t, env, 30*time.Second)
		env.ExecuteWorkflow(workflows.DeliveryWorkflow, child)
		st := result(t, env)
		require.Len(t, s.calls, w.attempts, id)
		if w.status == delivery.StatusDeadLettered {
			require.Equal(t, w.status, dead.Status, id)
			require.Contains(t, dead.DeadLetterReason, w.reason, id)
			continue
		}
		require.Equal(t, w.status, st.Status, id)
		if w.attempts > 0 {
			require.Equal(t, 2, s.reqs[0].Number, "%s goes on from attempt 2", id)
		}
		if id == "dlv_429" {
			require.Equal(t, 3*time.Second, s.calls[0], "the Retry-After of the carried attempt applies")
		}
	}
}

// TestCarrierWaitsEachFirstWait: each first attempt starts at its own first
// wait, never early and never late.
func TestCarrierWaitsEachFirstWait(t *testing.T) {
	t.Parallel()
	answers := map[string]func() (activities.SendResult, error){}
	var in []workflows.Input
	for i, w := range []time.Duration{0, time.Second, 1010 * time.Millisecond, 5 * time.Second} {
		id := "dlv_" + string(rune('a'+i))
		answers[id] = func() (activities.SendResult, error) { return ok(), nil }
		in = append(in, workflows.Input{DeliveryID: id, Settings: delivery.Settings{Schedule: []time.Duration{w, time.Second}}})
	}
	res, _, started := carrierRun(t, answers, in)
	require.Equal(t, 4, res.Delivered)
	for _, d := range in {
		wait := delivery.Jitter(d.Settings.Schedule[0], d.DeliveryID, 1)
		require.Equal(t, wait, started[d.DeliveryID], d.DeliveryID)
	}
}

// TestCarrierCountsFirstWaitsFromAcceptance: a carrier the dispatcher
// starts near its deliveries' due times (they waited their first wait in
// the outbox) sends each at its acceptance plus its first wait, not a
// first wait after the carrier's start.
func TestCarrierCountsFirstWaitsFromAcceptance(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	accepted := suite.NewTestWorkflowEnvironment().Now().Add(-900 * time.Millisecond)
	answers := map[string]func() (activities.SendResult, error){}
	var in []workflows.Input
	for i := range 3 {
		id := "dlv_" + string(rune('a'+i))
		answers[id] = func() (activities.SendResult, error) { return ok(), nil }
		in = append(in, workflows.Input{DeliveryID: id, AcceptedAt: accepted, Settings: delivery.Settings{Schedule: []time.Duration{time.Second, time.Second}}})
	}
	res, _, started := carrierRun(t, answers, in)
	require.Equal(t, 3, res.Delivered)
	for _, d := range in {
		due := delivery.Jitter(time.Second, d.DeliveryID, 1) - 900*time.Millisecond
		// Both environments' clocks start at the wall clock's time, a few
		// microseconds apart.
		require.InDelta(t, max(due, 0), started[d.DeliveryID], float64(time.Millisecond), "%s: due %s after the carrier's start", d.DeliveryID, due)
	}
}

// TestReplayOfAHandedOffDeliveryStartsFresh: a delivery a carrier handed
// off dead-letters on its carried result; a replay's cycle makes its own
// first attempt instead of judging that result again.
func TestReplayOfAHandedOffDeliveryStartsFresh(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	in.Cycle = 1
	in.Resume = &workflows.Resume{Result: fail(404)}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{By: "key_admin", ReplayID: 3})
	}, time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Empty(t, s.calls, "the carried 404 dead-lettered the first cycle")
	next := continued(t, env)
	require.Nil(t, next.Resume)

	env2, s2, _ := setup(t, false, ok())
	env2.ExecuteWorkflow(workflows.DeliveryWorkflow, next)
	st := result(t, env2)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Len(t, s2.calls, 1, "the replayed cycle sent its own first attempt")
}

// TestCarrierSendsEachGroupAtOnce: the first attempts due within
// CarrierWindow go in one SendGroup, each with its due time; a delivery due
// later goes in a SendGroup of its own after a timer; a SendGroup that
// fails as a whole (nothing sent) is followed by one SendSigned each, with
// the same results.
func TestCarrierSendsEachGroupAtOnce(t *testing.T) {
	t.Parallel()
	ok := func() (activities.SendResult, error) {
		return activities.SendResult{Class: activities.ClassSuccess, StatusCode: 200}, nil
	}
	fail := func() (activities.SendResult, error) {
		return activities.SendResult{Class: activities.ClassRetryable, StatusCode: 503}, nil
	}
	answers := map[string]func() (activities.SendResult, error){"dlv_a": ok, "dlv_b": fail, "dlv_c": ok}
	later := delivery.Settings{Schedule: []time.Duration{10 * time.Second, time.Minute}, Deadline: time.Hour, RequestTimeout: time.Second}
	now := delivery.Settings{Schedule: []time.Duration{0, time.Minute}, Deadline: time.Hour, RequestTimeout: time.Second}
	ins := []workflows.Input{{DeliveryID: "dlv_a", Settings: now}, {DeliveryID: "dlv_b", Settings: now}, {DeliveryID: "dlv_c", Settings: later}}
	var groups [][]string
	res, handed, started := carrierRun(t, answers, ins, func(reqs []activities.SendRequest) ([]activities.SendOutcome, error) {
		var ids []string
		outs := make([]activities.SendOutcome, len(reqs))
		for i, r := range reqs {
			require.False(t, r.At.IsZero(), "%s has its due time", r.DeliveryID)
			ids = append(ids, r.DeliveryID)
			res, err := answers[r.DeliveryID]()
			res.Number = r.Number
			outs[i] = activities.Outcome(res, err)
		}
		groups = append(groups, ids)
		return outs, nil
	})
	require.Equal(t, workflows.CarrierResult{Delivered: 2, HandedOff: 1}, res)
	require.Equal(t, [][]string{{"dlv_a", "dlv_b"}, {"dlv_c"}}, groups)
	require.Empty(t, started, "no SendSigned")
	require.Equal(t, 503, handed["dlv_b"].Resume.Result.StatusCode)

	res, handed, started = carrierRun(t, answers, ins, func([]activities.SendRequest) ([]activities.SendOutcome, error) {
		return nil, errors.New("postgres unreachable")
	})
	require.Equal(t, workflows.CarrierResult{Delivered: 2, HandedOff: 1}, res)
	require.Len(t, started, 3, "each sent on its own after the group failed")
	require.Equal(t, 503, handed["dlv_b"].Resume.Result.StatusCode)
}
