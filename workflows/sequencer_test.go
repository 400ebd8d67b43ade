package workflows_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"hookrelay/delivery"
	"hookrelay/workflows"
)

// sequenced records the DeliveryWorkflow runs a sequencer starts.
type sequenced struct {
	env    *testsuite.TestWorkflowEnvironment
	start  time.Time
	ids    []string
	at     []time.Duration
	inputs []workflows.Input
}

func newSequenced(t *testing.T) *sequenced {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	s := &sequenced{env: suite.NewTestWorkflowEnvironment()}
	s.start = s.env.Now()
	s.env.RegisterWorkflowWithOptions(workflows.SequencerWorkflow, workflow.RegisterOptions{Name: workflows.SequencerWorkflowName})
	s.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in workflows.Input) (workflows.State, error) {
		s.ids = append(s.ids, in.DeliveryID)
		s.at = append(s.at, s.env.Now().Sub(s.start))
		s.inputs = append(s.inputs, in)
		if strings.HasSuffix(in.DeliveryID, "_fails") {
			return workflows.State{}, errors.New("the run failed")
		}
		// A delivery ends by SignalEnded (the test's); its workflow may
		// live on (a dead letter waiting for a replay).
		return workflows.State{}, workflow.Sleep(ctx, 24*time.Hour)
	}, workflow.RegisterOptions{Name: workflows.WorkflowName})
	return s
}

func ordered(id string, seq int64) workflows.Input {
	return workflows.Input{DeliveryID: id, EndpointID: "ep_1", AppID: "app_1", EventType: "a.b", Sequence: seq}
}

// after runs fn d into the test.
func (s *sequenced) after(d time.Duration, fn func()) { s.env.RegisterDelayedCallback(fn, d) }

func (s *sequenced) enqueue(in workflows.Input) {
	s.env.SignalWorkflow(workflows.SignalEnqueue, in)
}

func (s *sequenced) end(id string) {
	s.env.SignalWorkflow(workflows.SignalEnded, workflows.Ended{DeliveryID: id, Status: delivery.StatusSucceeded})
}

func TestSequencerStartsOneAtATimeInSequenceOrder(t *testing.T) {
	s := newSequenced(t)
	// Enqueued out of order before the first task; a stale end is ignored.
	s.after(0, func() {
		s.enqueue(ordered("dlv_3", 3))
		s.enqueue(ordered("dlv_2", 2))
	})
	s.after(time.Minute, func() { s.end("dlv_9") })
	s.after(2*time.Minute, func() { s.end("dlv_1") })
	s.after(3*time.Minute, func() { s.end("dlv_2") })
	s.after(4*time.Minute, func() { s.end("dlv_3") })
	s.env.ExecuteWorkflow(workflows.SequencerWorkflowName, workflows.SequencerInput{EndpointID: "ep_1", Queue: []workflows.Input{ordered("dlv_1", 1)}})
	require.True(t, s.env.IsWorkflowCompleted())
	require.NoError(t, s.env.GetWorkflowError())
	require.Equal(t, []string{"dlv_1", "dlv_2", "dlv_3"}, s.ids)
	require.Equal(t, []time.Duration{0, 2 * time.Minute, 3 * time.Minute}, s.at)
	for i, in := range s.inputs {
		require.Equal(t, int64(i+1), in.Sequence)
		require.Equal(t, "default-test-workflow-id", in.Sequencer, "each run signals its sequencer")
	}
}

func TestSequencerDropsRepeats(t *testing.T) {
	s := newSequenced(t)
	s.after(time.Second, func() {
		s.enqueue(ordered("dlv_1", 1)) // running: a repeat
		s.enqueue(ordered("dlv_2", 2))
		s.enqueue(ordered("dlv_2", 2)) // queued: a repeat
	})
	s.after(time.Minute, func() { s.end("dlv_1") })
	s.after(2*time.Minute, func() {
		s.enqueue(ordered("dlv_1", 1)) // started before: a repeat
		s.end("dlv_2")
	})
	s.env.ExecuteWorkflow(workflows.SequencerWorkflowName, workflows.SequencerInput{EndpointID: "ep_1", Queue: []workflows.Input{ordered("dlv_1", 1)}})
	require.NoError(t, s.env.GetWorkflowError())
	require.Equal(t, []string{"dlv_1", "dlv_2"}, s.ids)
}

func TestSequencerEndsWhenItsQueueEmpties(t *testing.T) {
	s := newSequenced(t)
	s.env.ExecuteWorkflow(workflows.SequencerWorkflowName, workflows.SequencerInput{EndpointID: "ep_1"})
	require.True(t, s.env.IsWorkflowCompleted())
	require.NoError(t, s.env.GetWorkflowError())
	require.Empty(t, s.ids)
}

func TestSequencerContinuesAsNewWithItsQueue(t *testing.T) {
	s := newSequenced(t)
	s.after(time.Minute, func() {
		s.enqueue(ordered("dlv_3", 3))
		s.enqueue(ordered("dlv_2", 2))
	})
	s.after(2*time.Minute, func() {
		// The next signal's task finds the history past its bound.
		s.env.SetCurrentHistoryLength(workflows.HistoryBound + 1)
		s.end("dlv_9")
	})
	s.env.ExecuteWorkflow(workflows.SequencerWorkflowName, workflows.SequencerInput{EndpointID: "ep_1", OrderingKey: "k", Queue: []workflows.Input{ordered("dlv_1", 1)}})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(s.env.GetWorkflowError(), &can))
	var next workflows.SequencerInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, "dlv_1", next.Running)
	require.Equal(t, int64(1), next.Last)
	require.Equal(t, "k", next.OrderingKey)
	require.Len(t, next.Queue, 2)
	require.Equal(t, "dlv_2", next.Queue[0].DeliveryID)
	require.Equal(t, "dlv_3", next.Queue[1].DeliveryID)
}

func TestSequencerID(t *testing.T) {
	require.Equal(t, "sequencer/ep_1/cust:42", workflows.SequencerID("ep_1", "cust:42"))
	require.NotEqual(t, workflows.SequencerID("ep_1", ""), workflows.SequencerID("ep_1", "x"))
}

func TestSequencerMovesOnWhenTheRunningDeliveryFails(t *testing.T) {
	s := newSequenced(t)
	s.after(time.Minute, func() { s.end("dlv_2") })
	s.env.ExecuteWorkflow(workflows.SequencerWorkflowName, workflows.SequencerInput{EndpointID: "ep_1",
		Queue: []workflows.Input{ordered("dlv_1_fails", 1), ordered("dlv_2", 2)}})
	require.NoError(t, s.env.GetWorkflowError())
	require.Equal(t, []string{"dlv_1_fails", "dlv_2"}, s.ids)
	require.Equal(t, []time.Duration{0, 0}, s.at, "a run that closed without SignalEnded frees its sequence")
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

func TestOrderedDeadLetterFreesItsSequenceAndItsReplayDoesNot(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, fail(400))
	got := endedSignals(env)
	in.Sequencer, in.Sequence = "sequencer/ep_1/k", 1
	env.RegisterDelayedCallback(func() {
		require.Equal(t, []workflows.Ended{{DeliveryID: dlv, Status: delivery.StatusDeadLettered}}, *got)
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{ReplayID: 7})
	}, time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can))
	var next workflows.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, 2, next.Cycle)
	require.Empty(t, next.Sequencer, "a replay's cycle holds no sequence")
	require.Equal(t, int64(1), next.Sequence, "it keeps its number")
	require.Len(t, *got, 1)
}

func TestUnorderedDeliverySignalsNoSequencer(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, ok())
	got := endedSignals(env)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	require.Equal(t, delivery.StatusSucceeded, result(t, env).Status)
	require.Empty(t, *got)
}

func TestBlockingDeadLetterHoldsItsSequenceUntilItsReplaySucceeds(t *testing.T) {
	t.Parallel()
	env, _, in := setup(t, false, fail(400))
	got := endedSignals(env)
	in.Sequencer, in.Sequence, in.BlockOnDeadLetter = "sequencer/ep_1/k", 1, true
	env.RegisterDelayedCallback(func() {
		require.Empty(t, *got, "a blocking dead letter holds its sequence")
		env.SignalWorkflow(workflows.SignalReplay, workflows.ReplaySignal{ReplayID: 7})
	}, time.Hour)
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can))
	var next workflows.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, "sequencer/ep_1/k", next.Sequencer, "the replay's cycle frees the sequence it holds")
	require.True(t, next.BlockOnDeadLetter)

	// The replay's run succeeds and frees it.
	env2, _, _ := setup(t, false, ok())
	got2 := endedSignals(env2)
	env2.ExecuteWorkflow(workflows.DeliveryWorkflow, next)
	require.Equal(t, delivery.StatusSucceeded, result(t, env2).Status)
	require.Equal(t, []workflows.Ended{{DeliveryID: dlv, Status: delivery.StatusSucceeded}}, *got2)
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
