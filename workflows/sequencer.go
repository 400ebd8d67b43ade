package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// Names of the sequencer workflow, its activity and its signals
// (docs/contract.md#14-ordered-delivery).
const (
	// SequencerWorkflowName is the registered name of SequencerWorkflow.
	SequencerWorkflowName = "SequencerWorkflow"
	// RunSequenceName is the registered name of the activity that sends a
	// sequence's deliveries (dispatch's RunSequence).
	RunSequenceName = "RunSequence"
	// SignalWake tells a sequencer that its sequence has new rows (new
	// deliveries, replays); the dispatcher sends it with signal-with-start.
	SignalWake = "wake"
	// SignalEnded tells a sequencer that the delivery it waits for ended a
	// cycle (Ended), or that a blocking dead letter was released.
	SignalEnded = "ended"
)

// Change IDs of SequencerWorkflow (see workflow.GetVersion).
const (
	// versionSequencerBlockedWaits makes a sequencer blocked by a dead
	// letter look again only every SequenceCheckMax, not every
	// SequenceCheckEvery.
	versionSequencerBlockedWaits = "sequencer-blocked-waits"
	// versionSequencerLocalRun makes a sequencer's first RunSequence a
	// local activity of its first workflow task, bounded by
	// SequenceLocalBudget (before: a regular activity, with its own task
	// and a second workflow task).
	versionSequencerLocalRun = "sequencer-local-run"
)

// Bounds of a sequencer.
const (
	// SequenceRunBudget bounds how long one RunSequence activity sends:
	// past it the activity returns, so the sequencer's history shows its
	// progress and a run can continue as new.
	SequenceRunBudget = time.Minute
	// SequenceLocalBudget bounds a sequencer's first run, made as a local
	// activity in its first workflow task: a new key's event or two (the
	// common case: one event, sent and done) cost one workflow task; a
	// sequence with more to send goes on in regular runs.
	SequenceLocalBudget = 3 * time.Second
	// SequenceCheckEvery is how long a sequencer waits for the delivery
	// ahead (in its own workflow, or a dead letter that blocks) or for a
	// paused endpoint before it reads its sequence again: a delivery
	// workflow that failed or was terminated, which signals nothing, is
	// found so and released from the sequence.
	SequenceCheckEvery = time.Minute
	// SequenceCheckMax bounds SequenceCheckEvery doubled: each check that
	// finds the delivery waited for still running doubles the next wait,
	// so a head on a long retry schedule costs its sequencer a few tasks
	// an hour, not one a minute.
	SequenceCheckMax = time.Hour
	// SequenceWaitInRun is the longest a RunSequence activity waits for its
	// head's due time itself (holding one of the sequencers' slots); a head
	// due later is waited for on a timer between runs, holding nothing.
	// Shorter waits stay in the run: a Temporal server fires a timer due
	// sooner than a second late (see CarrierWindow).
	SequenceWaitInRun = time.Second
	// SequenceHeartbeat is RunSequence's heartbeat timeout: a worker killed
	// mid-sequence has its activity run again elsewhere after it.
	SequenceHeartbeat = 20 * time.Second
	// sequenceRetryWait is how long a sequencer waits after its activity
	// failed every try (Postgres or Temporal unreachable) before it runs it
	// again; it ends only when its sequence is empty.
	sequenceRetryWait = 10 * time.Second
)

// SequencerID is the workflow ID of the sequencer of an endpoint's
// sequence for key ("" is the endpoint's default sequence). Endpoint IDs
// hold no '/', so the ID names one pair.
func SequencerID(endpointID, key string) string {
	return "sequencer/" + endpointID + "/" + key
}

// SequencerInput names a sequencer's sequence. Its state is in Postgres
// (the sequence's open deliveries and their rows), so a run that continues
// as new carries nothing else.
type SequencerInput struct {
	EndpointID  string
	OrderingKey string
	// WaitingOn is the delivery the run that continued as new waited for.
	WaitingOn string `json:",omitempty"`
}

// SequenceRun is RunSequence's input.
type SequenceRun struct {
	EndpointID  string
	OrderingKey string
	// WaitingOn is the delivery the sequencer waits for (the last step's):
	// it is read first, and while it is open nothing else is sent.
	WaitingOn string `json:",omitempty"`
	// Check asks whether the workflow of the delivery waited for still
	// runs (see SequenceCheckEvery).
	Check bool `json:",omitempty"`
	// Budget bounds the run's sending (zero: SequenceRunBudget).
	Budget time.Duration `json:",omitempty"`
}

// SequenceStep is what one RunSequence activity did and where the
// sequence stands.
type SequenceStep struct {
	// Sent counts the deliveries it sent that ended (succeeded, or
	// canceled before their request).
	Sent int `json:",omitempty"`
	// WaitingOn is the delivery the sequence waits for: in its own
	// workflow (a retry, a replay's cycle), or a dead letter that blocks.
	WaitingOn string `json:",omitempty"`
	// NextAt is when to look again when nothing signals: the head's first
	// attempt is due then, or its endpoint is paused, or another run holds
	// the sequence. Zero: WaitingOn's end is signaled.
	NextAt time.Time `json:",omitempty"`
	// Blocked: WaitingOn is a dead letter that blocks the sequence
	// (fifo_on_dead_letter block). Its replay is queued as a row of the
	// sequence, which a wake announces: a wake reads the sequence again.
	Blocked bool `json:",omitempty"`
	// Paused: the sequence's endpoint is paused; its resume wakes the
	// sequencer (the dispatcher claims the sequence's rows again).
	Paused bool `json:",omitempty"`
	// Empty: every delivery of the sequence has ended.
	Empty bool `json:",omitempty"`
	// More: the activity used its budget with deliveries left to send.
	More bool `json:",omitempty"`
}

// Ended is the SignalEnded payload.
type Ended struct {
	DeliveryID string
	Status     delivery.Status `json:",omitempty"`
}

// SequencerWorkflow sends the deliveries of one endpoint and ordering key
// one at a time, in sequence order. Each RunSequence activity sends the
// heads' first attempts itself while they succeed; a head that fails goes to
// its own DeliveryWorkflow (workflow ID = delivery ID), as does a replay,
// and the sequence waits for its SignalEnded. It continues as new past
// HistoryBound events and ends when every delivery of its sequence ended.
func SequencerWorkflow(ctx workflow.Context, in SequencerInput) error {
	wake := workflow.GetSignalChannel(ctx, SignalWake)
	ended := workflow.GetSignalChannel(ctx, SignalEnded)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A run's budget, its last request and recording.
		StartToCloseTimeout: SequenceRunBudget + 2*delivery.MaxRequestTimeout,
		HeartbeatTimeout:    SequenceHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 6,
		},
		Summary: "send the sequence's deliveries in order",
	})
	// The first run goes in the first workflow task, as a local activity.
	local := workflow.GetVersion(ctx, versionSequencerLocalRun, workflow.DefaultVersion, 1) == 1
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: SequenceLocalBudget + 2*delivery.MaxRequestTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                "send the sequence's next deliveries in order",
	})
	check := false
	// checkEvery is the next wait for the delivery waited for before its
	// workflow is checked.
	checkEvery := SequenceCheckEvery
	for {
		drain(wake)
		drain(ended)
		var step SequenceStep
		run := SequenceRun{EndpointID: in.EndpointID, OrderingKey: in.OrderingKey, WaitingOn: in.WaitingOn, Check: check}
		var err error
		if local {
			// A failed local run is not retried in place: the loop below
			// waits sequenceRetryWait and runs a regular activity.
			local, run.Budget = false, SequenceLocalBudget
			err = workflow.ExecuteLocalActivity(lctx, RunSequenceName, run).Get(ctx, &step)
		} else {
			err = workflow.ExecuteActivity(actx, RunSequenceName, run).Get(ctx, &step)
		}
		check = false
		if err != nil {
			workflow.GetLogger(ctx).Warn("sequencer: sending failed; trying again", "error", err)
			step = SequenceStep{WaitingOn: in.WaitingOn, NextAt: workflow.Now(ctx).Add(sequenceRetryWait)}
		}
		if step.WaitingOn == "" || step.WaitingOn != in.WaitingOn {
			checkEvery = SequenceCheckEvery
		}
		in.WaitingOn = step.WaitingOn
		if step.Empty && !wake.ReceiveAsync(nil) && !ended.ReceiveAsync(nil) {
			// Every buffered signal is taken in this task: a row queued
			// after the activity read the sequence starts a new run.
			return nil
		}
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > HistoryBound {
			return workflow.NewContinueAsNewError(ctx, SequencerWorkflowName, in)
		}
		if step.More || step.Empty {
			continue
		}
		if check = awaitSequence(ctx, step, checkEvery, wake, ended); check {
			checkEvery = min(2*checkEvery, SequenceCheckMax)
		}
	}
}

// awaitSequence waits until the sequence may move: the delivery waited for
// ended, or (when none is waited for) a wake, or step.NextAt (ClaimLead
// early: the run waits for the rest), or checkEvery while a delivery runs
// in its own workflow. A blocked or paused sequence waits for its signal
// (the blocking dead letter's replay or release, the endpoint's resume) or
// SequenceCheckMax. It reports whether the wait timed out while waiting
// for a delivery (its workflow is then checked).
func awaitSequence(ctx workflow.Context, step SequenceStep, checkEvery time.Duration, wake, ended workflow.ReceiveChannel) (check bool) {
	wait := checkEvery
	if step.Paused || (step.Blocked && workflow.GetVersion(ctx, versionSequencerBlockedWaits, workflow.DefaultVersion, 1) == 1) {
		// Its replay, release or resume signals it; the hourly look ends
		// a sequence whose endpoint or app was deleted meanwhile, which
		// signals nothing.
		wait = SequenceCheckMax
	} else if !step.NextAt.IsZero() {
		wait = min(wait, max(step.NextAt.Add(-attempt.ClaimLead).Sub(workflow.Now(ctx)), time.Millisecond))
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, wait)
	for done := false; !done; {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) { done, check = true, step.WaitingOn != "" })
		sel.AddReceive(ended, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			done = true
		})
		sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			// New rows queue behind the delivery waited for, but for the
			// replay of a blocking dead letter, which is its way on.
			done = step.WaitingOn == "" || step.Blocked
		})
		sel.Select(ctx)
	}
	return check
}

// drain takes every buffered signal of c.
func drain(c workflow.ReceiveChannel) {
	for c.ReceiveAsync(nil) {
	}
}

// SequencerQueue is the task queue of the sequencers of the deliveries on
// queue: their workflow tasks and RunSequence activities have a worker of
// their own (worker.New), so sequences waiting for their heads never take a
// slot a delivery's workflow or attempt needs.
func SequencerQueue(queue string) string {
	return queue + "-sequences"
}
