package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
	"hookrelay/workflows"
)

// sequenced runs a SequencerWorkflow whose RunSequence answers the steps
// given, in order (then Empty), and records each run's input and time.
type sequenced struct {
	env   *testsuite.TestWorkflowEnvironment
	start time.Time
	steps []func() (workflows.SequenceStep, error)
	runs  []workflows.SequenceRun
	at    []time.Duration
	// local says which runs were local activities.
	local []bool
}

func newSequenced(t *testing.T, steps ...func() (workflows.SequenceStep, error)) *sequenced {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	s := &sequenced{env: suite.NewTestWorkflowEnvironment(), steps: steps}
	s.start = s.env.Now()
	s.env.RegisterWorkflowWithOptions(workflows.SequencerWorkflow, workflow.RegisterOptions{Name: workflows.SequencerWorkflowName})
	s.env.RegisterActivityWithOptions(func(ctx context.Context, in workflows.SequenceRun) (workflows.SequenceStep, error) {
		s.runs = append(s.runs, in)
		s.local = append(s.local, activity.GetInfo(ctx).IsLocalActivity)
		s.at = append(s.at, s.env.Now().Sub(s.start))
		if len(s.steps) == 0 {
			return workflows.SequenceStep{Empty: true}, nil
		}
		next := s.steps[0]
		s.steps = s.steps[1:]
		return next()
	}, activity.RegisterOptions{Name: workflows.RunSequenceName})
	return s
}

func answer(step workflows.SequenceStep) func() (workflows.SequenceStep, error) {
	return func() (workflows.SequenceStep, error) { return step, nil }
}

// after runs fn d into the test.
func (s *sequenced) after(d time.Duration, fn func()) { s.env.RegisterDelayedCallback(fn, d) }

func (s *sequenced) run(t *testing.T) {
	t.Helper()
	s.env.ExecuteWorkflow(workflows.SequencerWorkflowName, workflows.SequencerInput{EndpointID: "ep_1", OrderingKey: "k"})
	require.True(t, s.env.IsWorkflowCompleted())
	require.NoError(t, s.env.GetWorkflowError())
}

func TestSequencerEndsWhenItsSequenceIsEmpty(t *testing.T) {
	t.Parallel()
	s := newSequenced(t, answer(workflows.SequenceStep{More: true, Sent: 9}))
	s.run(t)
	require.Len(t, s.runs, 2, "a run that used its budget runs again at once; empty ends")
	require.Equal(t, []time.Duration{0, 0}, s.at)
	require.Equal(t, workflows.SequenceRun{EndpointID: "ep_1", OrderingKey: "k", Budget: workflows.SequenceLocalBudget}, s.runs[0])
	require.Equal(t, workflows.SequenceRun{EndpointID: "ep_1", OrderingKey: "k"}, s.runs[1])
	require.Equal(t, []bool{true, false}, s.local, "the first run in the first workflow task, the rest regular activities")
}

func TestSequencerWaitsForTheDeliveryAheadToEnd(t *testing.T) {
	t.Parallel()
	s := newSequenced(t, answer(workflows.SequenceStep{WaitingOn: "dlv_1"}))
	s.after(10*time.Second, func() { s.env.SignalWorkflow(workflows.SignalWake, nil) })
	s.after(20*time.Second, func() {
		s.env.SignalWorkflow(workflows.SignalEnded, workflows.Ended{DeliveryID: "dlv_1", Status: delivery.StatusSucceeded})
	})
	s.run(t)
	require.Equal(t, []time.Duration{0, 20 * time.Second}, s.at, "a wake queues behind the delivery waited for; its end moves the sequence")
	require.False(t, s.runs[1].Check)
	require.Equal(t, "dlv_1", s.runs[1].WaitingOn, "the delivery waited for is read first")
}

// TestSequencerChecksAWorkflowThatNeverSignals: a delivery waited for in
// its own workflow is checked after SequenceCheckEvery, then after twice
// the last wait each time it still runs, up to SequenceCheckMax.
func TestSequencerChecksAWorkflowThatNeverSignals(t *testing.T) {
	t.Parallel()
	waiting := answer(workflows.SequenceStep{WaitingOn: "dlv_1"})
	s := newSequenced(t, waiting, waiting, waiting, waiting, waiting, waiting, waiting, waiting)
	s.env.SetTestTimeout(time.Minute)
	s.run(t)
	var waits []time.Duration
	for i := 1; i < len(s.at); i++ {
		waits = append(waits, s.at[i]-s.at[i-1])
		require.True(t, s.runs[i].Check, "a wait that timed out asks whether the workflow still runs")
	}
	m := workflows.SequenceCheckEvery
	require.Equal(t, []time.Duration{m, 2 * m, 4 * m, 8 * m, 16 * m, 32 * m, workflows.SequenceCheckMax, workflows.SequenceCheckMax}, waits)
}

// TestSequencerBlockedOrPausedWaitsForASignalOrAnHour: a sequence blocked by
// a dead letter, or whose endpoint is paused, runs again on its signal (a
// replay's wake, a release's end, a resume's wake), else only after
// SequenceCheckMax: the look that ends a sequence whose endpoint or app
// was deleted meanwhile.
func TestSequencerBlockedOrPausedWaitsForASignalOrAnHour(t *testing.T) {
	t.Parallel()
	for _, step := range []workflows.SequenceStep{{WaitingOn: "dlv_1", Blocked: true}, {Paused: true}} {
		s := newSequenced(t, answer(step))
		s.after(10*time.Minute, func() { s.env.SignalWorkflow(workflows.SignalWake, nil) })
		s.run(t)
		require.Equal(t, []time.Duration{0, 10 * time.Minute}, s.at, "%+v: its signal", step)

		s = newSequenced(t, answer(step))
		s.run(t)
		require.Equal(t, []time.Duration{0, workflows.SequenceCheckMax}, s.at, "%+v: no signal", step)
	}
}

func TestSequencerWaitsForTheHeadsDueTimeOrAWake(t *testing.T) {
	t.Parallel()
	s := newSequenced(t)
	s.steps = []func() (workflows.SequenceStep, error){
		func() (workflows.SequenceStep, error) {
			return workflows.SequenceStep{NextAt: s.env.Now().Add(30 * time.Second)}, nil
		},
		func() (workflows.SequenceStep, error) {
			return workflows.SequenceStep{NextAt: s.env.Now().Add(30 * time.Second)}, nil
		},
	}
	s.after(5*time.Second, func() { s.env.SignalWorkflow(workflows.SignalWake, nil) })
	s.run(t)
	require.Equal(t, []time.Duration{0, 5 * time.Second, 35*time.Second - attempt.ClaimLead}, s.at,
		"a wake reads the sequence again (a replay may come first); else the due time, ClaimLead early")
	require.False(t, s.runs[2].Check)
}

func TestSequencerRunsAgainAfterItsActivityFailed(t *testing.T) {
	t.Parallel()
	s := newSequenced(t, func() (workflows.SequenceStep, error) { return workflows.SequenceStep{}, errors.New("postgres down") })
	s.env.SetTestTimeout(time.Minute)
	s.run(t)
	require.GreaterOrEqual(t, len(s.runs), 2, "the failed run's tries, then one more run")
}

func TestSequencerContinuesAsNewCarryingOnlyItsSequence(t *testing.T) {
	t.Parallel()
	s := newSequenced(t, answer(workflows.SequenceStep{More: true}), func() (workflows.SequenceStep, error) {
		return workflows.SequenceStep{More: true}, nil
	})
	s.steps[1] = func() (workflows.SequenceStep, error) {
		s.env.SetCurrentHistoryLength(workflows.HistoryBound + 1)
		return workflows.SequenceStep{More: true}, nil
	}
	s.env.ExecuteWorkflow(workflows.SequencerWorkflowName, workflows.SequencerInput{EndpointID: "ep_1", OrderingKey: "k"})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(s.env.GetWorkflowError(), &can))
	var next workflows.SequencerInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, workflows.SequencerInput{EndpointID: "ep_1", OrderingKey: "k"}, next)
}

func TestSequencerID(t *testing.T) {
	require.Equal(t, "sequencer/ep_1/cust:42", workflows.SequencerID("ep_1", "cust:42"))
	require.NotEqual(t, workflows.SequencerID("ep_1", ""), workflows.SequencerID("ep_1", "x"))
}

// endedSignals records the SignalEnded a DeliveryWorkflow sends.
func endedSignals(env *testsuite.TestWorkflowEnvironment) *[]workflows.Ended {
	var got []workflows.Ended
	env.OnSignalExternalWorkflow(mock.Anything, "sequencer/ep_1/k", "", workflows.SignalEnded, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			got = append(got, arg.(workflows.Ended))
			return nil
		})
	return &got
}

func TestOrderedDeliveryFreesItsSequenceOnce(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, fail(500), ok())
	got := endedSignals(env)
	in.Sequencer, in.Sequence = "sequencer/ep_1/k", 3
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Equal(t, []workflows.Ended{{DeliveryID: dlv, Status: delivery.StatusSucceeded}}, *got)
}

func TestOrderedDeadLetterTellsItsSequencerAndItsReplayCycleTellsTheOneThatSentIt(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, fail(400))
	got := endedSignals(env)
	in.Sequencer, in.Sequence = "sequencer/ep_1/k", 1
	env.RegisterDelayedCallback(func() {
		require.Equal(t, []workflows.Ended{{DeliveryID: dlv, Status: delivery.StatusDeadLettered}}, *got,
			"the sequencer reads whether the dead letter blocks (fifo_on_dead_letter)")
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{ReplayID: 7, Sequencer: "sequencer/ep_1/k"})
	}, time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can))
	var next workflows.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, 2, next.Cycle)
	require.Equal(t, "sequencer/ep_1/k", next.Sequencer, "the replay's cycle tells the sequencer that sent it")
	require.Equal(t, int64(1), next.Sequence, "it keeps its number")
	require.Len(t, *got, 1)

	// The replay's run tells it once, when its cycle ends.
	env2, _, _ := setup(t, false, ok())
	got2 := endedSignals(env2)
	env2.ExecuteWorkflow(workflows.DeliveryWorkflow, next)
	require.Equal(t, delivery.StatusSucceeded, result(t, env2).Status)
	require.Equal(t, []workflows.Ended{{DeliveryID: dlv, Status: delivery.StatusSucceeded}}, *got2)
}

func TestUnorderedDeliverySignalsNoSequencer(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, ok())
	got := endedSignals(env)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Empty(t, *got)
}

func TestOrderedFirstWaitCountsFromAcceptance(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false, ok())
	endedSignals(env)
	in.Sequencer, in.Sequence = "sequencer/ep_1/k", 2
	in.AcceptedAt = env.Now().Add(-time.Minute) // waited a minute behind the one before
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Equal(t, []time.Duration{0}, s.calls, "sent at once: its first wait passed while it waited")

	env2, s2, in2 := setup(t, false, ok())
	endedSignals(env2)
	in2.Sequencer, in2.Sequence = "sequencer/ep_1/k", 1
	in2.AcceptedAt = env2.Now()
	env2.ExecuteWorkflow(workflows.DeliveryWorkflow, in2)
	require.Equal(t, delivery.StatusSucceeded, result(t, env2).Status)
	require.Equal(t, expectedWaits()[:1], s2.calls, "a head accepted now waits its first wait")
}

// TestSequencerReadsAgainOnAWakeWhileBlocked: a wake while the sequence is
// blocked by a dead letter (its replay was queued) reads the sequence
// again at once; a wake while a delivery runs in its own workflow does not
// (TestSequencerWaitsForTheDeliveryAheadToEnd).
func TestSequencerReadsAgainOnAWakeWhileBlocked(t *testing.T) {
	t.Parallel()
	s := newSequenced(t, answer(workflows.SequenceStep{WaitingOn: "dlv_1", Blocked: true}))
	s.after(10*time.Second, func() { s.env.SignalWorkflow(workflows.SignalWake, nil) })
	s.run(t)
	require.Equal(t, []time.Duration{0, 10 * time.Second}, s.at, "the blocking dead letter's replay goes when it is queued")
	require.Equal(t, "dlv_1", s.runs[1].WaitingOn)
}
