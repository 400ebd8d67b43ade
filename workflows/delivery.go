// Package workflows holds DeliveryWorkflow: one delivery (one event to one
// endpoint) from its first attempt through retries, throttling, the
// deadline, dead letter and replays. Every retry decision is made here;
// activities never retry on their own. Each replay's cycle runs as a new
// run (Continue-As-New), so a delivery's history stays bounded however often
// it is replayed; Postgres keeps every cycle's record.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// Names shared with starters and clients.
const (
	// TaskQueue is the task queue of delivery workflows and attempt.
	TaskQueue = "hookrelay-deliveries"
	// WorkflowName is the registered name of DeliveryWorkflow.
	WorkflowName = "DeliveryWorkflow"
	// SignalReplay starts a new cycle of a finished delivery.
	SignalReplay = "replay"
	// SignalCancel ends a delivery as canceled.
	SignalCancel = "cancel"
	// QueryState answers the three questions (docs/contract.md#7-the-three-questions).
	QueryState = "state"
)

// Bounds of the MarkDelivery activity: retried while Postgres is
// unreachable, never longer than MarkTimeout in all.
const (
	MarkTimeout         = 24 * time.Hour
	MarkAttemptTimeout  = 30 * time.Second
	MarkMaximumInterval = time.Minute
	// RecordSlack is the room an attempt's activity has, beyond the request
	// timeout, to load its target and record its result.
	RecordSlack = attempt.RecordSlack
)

// Change IDs of workflow.GetVersion: each names a change of the command
// sequence that recorded histories must keep replaying through.
const (
	// versionSuccessWins: a 2xx that arrives with a cancel ends succeeded
	// (before: canceled).
	versionSuccessWins = "success-wins-over-cancel"
	// versionContinueAsNew: a replay's cycle runs as a new run (before: in
	// the same run).
	versionContinueAsNew = "cycle-continue-as-new"
	// versionAsyncSend: every attempt is a regular activity, which the
	// worker completes asynchronously, so an open request holds no task
	// slot (before: a local activity when Input.LocalActivity was set).
	versionAsyncSend = "send-async"
	// versionBoundedHolds: a run whose waits sent nothing (endpoint busy,
	// paused or rate-limited) continues as new past HistoryBound events
	// (before: it grew until Temporal terminated it).
	versionBoundedHolds = "bounded-holds"
	// versionPlannedRetry: a sender's failed first attempt handed to the
	// run with the time its record planned for attempt 2 is retried then,
	// the plan's deadline check already made (before: the run planned the
	// wait again from its own start, and slept on a timer).
	versionPlannedRetry = "planned-retry"
	// versionRecordLate: an attempt sent but not recorded by its activity
	// (attempt.SendResult.Unrecorded) is recorded by the run before it is
	// judged (before: no such result existed; the activity failed).
	versionRecordLate = "record-late"
)

// Versions of versionPlannedRetry.
const (
	// plannedRetry: the run waits for the time the record planned.
	plannedRetry workflow.Version = 1
	// plannedRetryStateKept: as plannedRetry, and the run keeps the
	// HookrelayState (delivering) its start set, where it used to upsert it
	// again before attempt 2.
	plannedRetryStateKept workflow.Version = 2
)

// HistoryBound is the most history events a run gathers while its
// attempts send nothing (its endpoint busy, paused or rate-limited); past
// it, the run continues as new with its progress, so a delivery that waits
// for hours never reaches Temporal's history limit (51,200 events).
const HistoryBound = 2000

type run struct {
	in         Input
	set        delivery.Settings
	acceptedAt time.Time
	replayID   int64
	state      State
	replayCh   workflow.ReceiveChannel
	cancelCh   workflow.ReceiveChannel
	canceled   bool
	// lastFailure is why the latest attempt (or activity) failed.
	lastFailure string
	// progress is the cycle's state when it continues in a new run.
	progress *Progress
	// queued are fresh replays that arrived before the run's first task.
	queued []ReplaySignal
	// lastLine is the latest attempt's result line (see showDetails).
	lastLine string
	// sequenceFreed is set once the run told its sequencer its cycle
	// ended (see freeSequence).
	sequenceFreed bool
}

// outcome ends a cycle.
type outcome int

const (
	outSucceeded outcome = iota
	outDeadLettered
	outCanceled
	// outGone: the delivery's row is gone (app deleted); nothing to record.
	outGone
	// outContinued: the cycle goes on in a new run (see HistoryBound).
	outContinued
)

// DeliveryWorkflow drives one delivery. See docs/contract.md, sections 4–7.
func DeliveryWorkflow(ctx workflow.Context, in Input) (State, error) {
	r := &run{
		in:       in,
		set:      in.Settings.WithDefaults(),
		replayID: in.ReplayID,
		state:    State{Status: delivery.StatusPending, Cycle: max(in.Cycle, 1), Attempts: []attempt.SendResult{}},
		replayCh: workflow.GetSignalChannel(ctx, SignalReplay),
		cancelCh: workflow.GetSignalChannel(ctx, SignalCancel),
	}
	if !in.FirstDue.IsZero() && in.Progress == nil && in.Resume == nil {
		// Started at its first attempt's due time, with HookrelayState
		// delivering (see Input.FirstDue).
		r.state.Status = delivery.StatusDelivering
	}
	r.acceptedAt = in.AcceptedAt
	if r.acceptedAt.IsZero() {
		r.acceptedAt = workflow.Now(ctx)
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (State, error) { return r.state, nil }); err != nil {
		return r.state, fmt.Errorf("register state query: %w", err)
	}
	// A run started by a replay (SignalWithStart) carries that signal; the
	// input already accounts for it. A newer replay buffered before the
	// first task is kept for when this cycle ends.
	var buffered ReplaySignal
	for r.replayCh.ReceiveAsync(&buffered) {
		if buffered.ReplayID > r.replayID {
			r.queued = append(r.queued, buffered)
		}
	}
	// A cycle carried on from an earlier run (Progress) has started already.
	if in.Cycle > 1 && in.Progress == nil {
		if gone, err := r.startCycle(ctx); gone || err != nil {
			return r.state, err
		}
	}
	for {
		var sig *ReplaySignal
		stopRetention := func() {}
		switch r.runCycle(ctx) {
		case outContinued:
			if !r.drainCancel() {
				return r.state, workflow.NewContinueAsNewError(ctx, WorkflowName, r.continued())
			}
			if err := r.cancel(ctx); err != nil {
				return r.state, err
			}
			r.freeSequence(ctx, delivery.StatusCanceled)
			sig = r.pendingReplay()
		case outGone:
			r.setStatus(ctx, delivery.StatusCanceled)
			r.freeSequence(ctx, delivery.StatusCanceled)
			return r.state, nil
		case outDeadLettered:
			status, err := r.mark(ctx, delivery.StatusDeadLettered, r.state.DeadLetterReason)
			if err != nil {
				return r.state, err
			}
			if status == "" {
				// Gone.
				r.freeSequence(ctx, delivery.StatusCanceled)
				return r.state, nil
			}
			if status != delivery.StatusDeadLettered {
				// Canceled while the last attempt ran; its cancel is queued.
				r.setStatus(ctx, status)
				r.freeSequence(ctx, status)
				return r.state, nil
			}
			r.setStatus(ctx, delivery.StatusDeadLettered)
			// Its sequencer moves on (fifo_on_dead_letter skip) or holds
			// the sequence (block) while the dead letter waits for a
			// replay.
			r.freeSequence(ctx, delivery.StatusDeadLettered)
			if sig, stopRetention, err = r.awaitReplay(ctx); err != nil || sig == nil {
				return r.state, err
			}
		case outSucceeded:
			r.setStatus(ctx, delivery.StatusSucceeded)
			r.freeSequence(ctx, delivery.StatusSucceeded)
			sig = r.pendingReplay()
		case outCanceled:
			if err := r.cancel(ctx); err != nil {
				return r.state, err
			}
			r.freeSequence(ctx, delivery.StatusCanceled)
			sig = r.pendingReplay()
		}
		// A replay that reached the run as it finished must start a cycle,
		// not be dropped.
		if sig == nil {
			return r.state, nil
		}
		if workflow.GetVersion(ctx, versionContinueAsNew, workflow.DefaultVersion, 1) == 1 {
			return r.state, workflow.NewContinueAsNewError(ctx, WorkflowName, r.next(ctx, *sig))
		}
		// Runs recorded before cycles continued as new: the next cycle in
		// this run, in the command order those histories hold.
		r.canceled = false
		r.state.Cycle++
		r.acceptedAt = workflow.Now(ctx)
		gone, err := r.startCycle(ctx)
		stopRetention()
		if gone || err != nil {
			return r.state, err
		}
	}
}

// next is the input of the run that carries sig's cycle.
func (r *run) next(ctx workflow.Context, sig ReplaySignal) Input {
	in := r.in
	in.Cycle = r.state.Cycle + 1
	in.ReplayID = sig.ReplayID
	in.Resume = nil                                 // a carrier's first attempt belongs to the first cycle only
	in.FirstDue, in.FirstLocal = time.Time{}, false // so does the dispatcher's due-time start
	in.Sequencer = sig.Sequencer                    // a replay's cycle tells the sequencer that sent it
	in.AcceptedAt = sig.RequestedAt
	if in.AcceptedAt.IsZero() {
		in.AcceptedAt = workflow.Now(ctx)
	}
	if sig.Settings != nil {
		in.Settings = *sig.Settings
	}
	return in
}

// continued is the input of the run that carries the current cycle on.
func (r *run) continued() Input {
	in := r.in
	in.Cycle, in.ReplayID, in.AcceptedAt = r.state.Cycle, r.replayID, r.acceptedAt
	in.Resume, in.Progress = nil, r.progress
	in.FirstDue, in.FirstLocal = time.Time{}, false
	return in
}

// pastBound reports whether the run's history passed HistoryBound, so a
// wait that sends nothing continues in a new run.
func (r *run) pastBound(ctx workflow.Context) bool {
	return workflow.GetInfo(ctx).GetCurrentHistoryLength() > HistoryBound &&
		workflow.GetVersion(ctx, versionBoundedHolds, workflow.DefaultVersion, 1) == 1
}

// fresh reports whether sig asks for a replay this run has not run yet.
func (r *run) fresh(sig ReplaySignal) bool {
	return sig.ReplayID == 0 || sig.ReplayID > r.replayID
}

// pendingReplay takes a fresh replay signal that is already buffered.
func (r *run) pendingReplay() *ReplaySignal {
	if len(r.queued) > 0 {
		sig := r.queued[0]
		r.queued = r.queued[1:]
		return &sig
	}
	var sig ReplaySignal
	for r.replayCh.ReceiveAsync(&sig) {
		if r.fresh(sig) {
			return &sig
		}
	}
	return nil
}

// startCycle records a replayed cycle as delivering; gone reports that the
// delivery's row no longer exists.
func (r *run) startCycle(ctx workflow.Context) (gone bool, err error) {
	r.state.DeadLetterReason = ""
	r.state.Status = delivery.StatusPending
	status, err := r.mark(ctx, delivery.StatusDelivering, "")
	return status == "" && err == nil, err
}

// sleep waits d or until a cancel signal; it reports true when canceled.
// summary names the timer in the Temporal UI.
func (r *run) sleep(ctx workflow.Context, wait time.Duration, summary string) bool {
	tctx, stop := workflow.WithCancel(ctx)
	defer stop()
	timer := workflow.NewTimerWithOptions(tctx, wait, workflow.TimerOptions{Summary: summary})
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.AddReceive(r.cancelCh, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		r.canceled = true
	})
	sel.Select(ctx)
	return r.canceled
}

func (r *run) drainCancel() bool {
	if r.cancelCh.ReceiveAsync(nil) {
		r.canceled = true
	}
	return r.canceled
}

// freeSequence tells the run's sequencer, once, that the delivery's cycle
// ended with status, so the sequencer reads its sequence again (the next
// delivery goes, or a blocking dead letter holds it). A run without a
// sequencer (every unordered delivery, every history recorded before
// ordering) sends nothing: its commands are unchanged.
func (r *run) freeSequence(ctx workflow.Context, status delivery.Status) {
	if r.in.Sequencer == "" || r.sequenceFreed {
		return
	}
	r.sequenceFreed = true
	err := workflow.SignalExternalWorkflow(ctx, r.in.Sequencer, "", SignalEnded, Ended{DeliveryID: r.in.DeliveryID, Status: status}).Get(ctx, nil)
	if err != nil {
		// The sequencer is gone (terminated by hand): nothing waits on it.
		workflow.GetLogger(ctx).Warn("sequencer not told of the delivery's end", "sequencer", r.in.Sequencer, "error", err)
	}
}
