// Package workflows holds DeliveryWorkflow: one delivery (one event to one
// endpoint) from its first attempt through retries, throttling, the
// deadline, dead letter and replays. Every retry decision is made here;
// activities never retry on their own. Each replay's cycle runs as a new
// run (Continue-As-New), so a delivery's history stays bounded however often
// it is replayed; Postgres keeps every cycle's record.
package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
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
	// QueryState answers the three questions of CONTRACT §6.
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
)

// HistoryBound is the most history events a run gathers while its
// attempts send nothing (its endpoint busy, paused or rate-limited); past
// it, the run continues as new with its progress, so a delivery that waits
// for hours never reaches Temporal's history limit (51,200 events).
const HistoryBound = 2000

// Search attributes the workflow keeps current, so the Temporal UI can list
// deliveries by state, endpoint, event type and app.
var (
	SAState     = temporal.NewSearchAttributeKeyKeyword("HookrelayState")
	SAEndpoint  = temporal.NewSearchAttributeKeyKeyword("HookrelayEndpoint")
	SAEventType = temporal.NewSearchAttributeKeyKeyword("HookrelayEventType")
	SAApp       = temporal.NewSearchAttributeKeyKeyword("HookrelayApp")
)

// SearchAttributes lists the custom search attributes to register, with
// their types.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SAState.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD, SAEndpoint.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAEventType.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD, SAApp.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SADeliveries.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	}
}

// Input starts a DeliveryWorkflow run: one cycle of a delivery. The
// workflow ID is DeliveryID.
type Input struct {
	DeliveryID string
	AppID      string
	EventID    string
	EventType  string
	EndpointID string
	Settings   delivery.Settings
	// Cycle is 1 for a new delivery; each replay runs the next cycle.
	Cycle int
	// AcceptedAt is when the cycle was asked for: the event's acceptance,
	// or the replay's request. The deadline counts from it, so time spent
	// in the outbox counts. Zero means the run's start.
	AcceptedAt time.Time
	// ReplayID is the replay (its outbox row ID) this cycle runs; a replay
	// signal with an ID at or below it has already been run.
	ReplayID int64
	// LocalActivity runs SendSigned as a local activity (fewer server round
	// trips; still recorded in history as a marker).
	LocalActivity bool
	// Resume carries the first attempt a sender or a carrier made: the run
	// judges it and goes on from attempt 2. Nil for a run that makes its own
	// first attempt.
	Resume *Resume `json:",omitempty"`
	// Progress carries a cycle on into a new run (see HistoryBound); nil
	// for a run that starts its cycle.
	Progress *Progress `json:",omitempty"`
}

// Progress is where a cycle stood when its run continued as new: the
// attempt it was waiting to make and what it had recorded.
type Progress struct {
	Attempt     int
	Slot        time.Time
	Attempts    []attempt.SendResult
	LastFailure string
}

// Resume is a first attempt made elsewhere (by a carrier): its result, or
// why its activity did not complete.
type Resume = attempt.SendOutcome

// ReplaySignal asks for a new cycle.
type ReplaySignal struct {
	By string
	// ReplayID identifies the replay (its outbox row ID); 0 in signals sent
	// before replays had IDs, which are always run.
	ReplayID int64
	// Settings are the endpoint's at the replay's request; nil keeps the
	// run's own.
	Settings *delivery.Settings
	// RequestedAt starts the new cycle's deadline; zero means on receipt.
	RequestedAt time.Time
}

// State is the answer of the state query: the current cycle only.
type State struct {
	Status           delivery.Status      `json:"status"`
	Cycle            int                  `json:"cycle"`
	AttemptCount     int                  `json:"attempt_count"`
	NextAttemptAt    *time.Time           `json:"next_attempt_at"`
	LastAttempt      *attempt.SendResult  `json:"last_attempt"`
	DeadLetterReason string               `json:"dead_letter_reason,omitempty"`
	Attempts         []attempt.SendResult `json:"attempts"`
}

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

// DeliveryWorkflow drives one delivery. See CONTRACT §4–§6.
func DeliveryWorkflow(ctx workflow.Context, in Input) (State, error) {
	r := &run{
		in:       in,
		set:      in.Settings.WithDefaults(),
		replayID: in.ReplayID,
		state:    State{Status: delivery.StatusPending, Cycle: max(in.Cycle, 1), Attempts: []attempt.SendResult{}},
		replayCh: workflow.GetSignalChannel(ctx, SignalReplay),
		cancelCh: workflow.GetSignalChannel(ctx, SignalCancel),
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
			sig = r.pendingReplay()
		case outGone:
			r.setStatus(ctx, delivery.StatusCanceled)
			return r.state, nil
		case outDeadLettered:
			status, err := r.mark(ctx, delivery.StatusDeadLettered, r.state.DeadLetterReason)
			if err != nil || status == "" {
				return r.state, err
			}
			if status != delivery.StatusDeadLettered {
				// Canceled while the last attempt ran; its cancel is queued.
				r.setStatus(ctx, status)
				return r.state, nil
			}
			r.setStatus(ctx, delivery.StatusDeadLettered)
			if sig, stopRetention, err = r.awaitReplay(ctx); err != nil || sig == nil {
				return r.state, err
			}
		case outSucceeded:
			r.setStatus(ctx, delivery.StatusSucceeded)
			sig = r.pendingReplay()
		case outCanceled:
			if err := r.cancel(ctx); err != nil {
				return r.state, err
			}
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
	in.Resume = nil // a carrier's first attempt belongs to the first cycle only
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

// runCycle makes up to len(Schedule) attempts within the deadline, counted
// from the cycle's acceptance; a carrier's first attempt (Input.Resume)
// counts as attempt 1.
func (r *run) runCycle(ctx workflow.Context) outcome {
	deadline := r.acceptedAt.Add(r.set.Deadline)
	var throttle *time.Duration // a 429's Retry-After replaces the next wait
	number := 1
	// hold is set when the previous try sent nothing (the endpoint was
	// paused, or its rate limit gave a later slot): the same attempt is made
	// again without waiting its scheduled wait; slot is a rate-limit slot
	// already reserved for it.
	hold := false
	var slot time.Time
	if p := r.in.Progress; p != nil && r.state.Cycle == max(r.in.Cycle, 1) {
		number, slot, hold, r.lastFailure = p.Attempt, p.Slot, true, p.LastFailure
		r.state.Attempts = append(r.state.Attempts, p.Attempts...)
		if n := len(r.state.Attempts); n > 0 {
			r.state.AttemptCount, r.state.LastAttempt = n, &r.state.Attempts[n-1]
		}
	} else if res := r.in.Resume; res != nil && r.state.Cycle == max(r.in.Cycle, 1) {
		switch res.Result.Class {
		case delivery.ClassEndpointPaused, delivery.ClassEndpointBusy:
			// The carrier sent nothing: start over from attempt 1.
		case delivery.ClassRateLimited:
			slot, hold = res.Result.SlotAt, true
			if wait := slot.Add(-attempt.SlotLead).Sub(workflow.Now(ctx)); wait > 0 {
				r.state.NextAttemptAt = &slot
				if r.sleep(ctx, wait) {
					return outCanceled
				}
			}
		default:
			out, done, hint := r.apply(ctx, res.Result, res.Err())
			if done {
				return out
			}
			throttle, number = hint, 2
		}
	}
	for ; ; number++ {
		if !hold {
			next := delivery.Plan(r.set, r.in.DeliveryID, number, throttle, workflow.Now(ctx), deadline)
			throttle = nil
			if next.DeadLetter != "" {
				if number > len(r.set.Schedule) && r.lastFailure != "" {
					return r.deadLetter(next.DeadLetter + "; last: " + r.lastFailure)
				}
				return r.deadLetter(next.DeadLetter)
			}
			if next.Wait > 0 {
				r.state.NextAttemptAt = &next.At
				if r.sleep(ctx, next.Wait) {
					return outCanceled
				}
			}
		}
		hold = false
		r.state.NextAttemptAt = nil
		// Timers fire late when workers were down: check again.
		if r.set.TooLate(workflow.Now(ctx), deadline) {
			return r.deadLetter(fmt.Sprintf("deadline of %s passed while attempt %d waited (%d attempts made)", r.set.Deadline, number, r.state.AttemptCount))
		}
		if r.state.Status != delivery.StatusDelivering {
			r.setStatus(ctx, delivery.StatusDelivering)
		}
		res, err := r.send(ctx, number, deadline, slot)
		slot = time.Time{}
		if err == nil && (res.Class == delivery.ClassEndpointPaused || res.Class == delivery.ClassRateLimited || res.Class == delivery.ClassEndpointBusy) {
			// Nothing was sent: the same attempt again, at its rate-limit
			// slot or once the endpoint may have resumed.
			at, wake := workflow.Now(ctx).Add(delivery.PausedRecheck), delivery.PausedRecheck
			switch res.Class {
			case delivery.ClassRateLimited:
				// Wake a little before the slot; the activity waits the rest.
				at, slot = res.SlotAt, res.SlotAt
				wake = res.SlotAt.Add(-attempt.SlotLead).Sub(workflow.Now(ctx))
			case delivery.ClassEndpointBusy:
				wake = delivery.Jitter(delivery.BusyRecheck, r.in.DeliveryID, number)
				at = workflow.Now(ctx).Add(wake)
			}
			if wait := wake; wait > 0 {
				r.state.NextAttemptAt = &at
				if r.sleep(ctx, wait) {
					return outCanceled
				}
			}
			hold = true
			if r.pastBound(ctx) {
				r.progress = &Progress{Attempt: number, Slot: slot, Attempts: r.state.Attempts, LastFailure: r.lastFailure}
				return outContinued
			}
			number--
			continue
		}
		out, done, hint := r.apply(ctx, res, err)
		if done {
			return out
		}
		throttle = hint
	}
}

// verdict is what one attempt means for its cycle.
type verdict struct {
	// final is set when the cycle ends with out.
	final bool
	out   outcome
	// reason is a dead letter's.
	reason string
	// throttle is a 429's Retry-After for the next wait.
	throttle *time.Duration
	// failure is why an attempt that does not end the cycle failed.
	failure string
}

// judge classifies one attempt: its result, or err when its activity did
// not complete. DeliveryWorkflow and CarrierWorkflow both judge with it.
func judge(res attempt.SendResult, err error) verdict {
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			switch appErr.Type() {
			case attempt.ErrDeliveryGone:
				return verdict{final: true, out: outGone}
			case attempt.ErrNoSigningKey:
				return verdict{final: true, out: outDeadLettered, reason: appErr.Message()}
			}
		}
		// The worker died or Postgres was unreachable: the schedule goes
		// on, but nothing recorded was sent, so it is no attempt.
		return verdict{failure: "attempt did not complete: " + err.Error()}
	}
	switch res.Class {
	case delivery.ClassEndpointDisabled:
		return verdict{final: true, out: outCanceled}
	case delivery.ClassSuccess:
		return verdict{final: true, out: outSucceeded}
	case delivery.ClassPermanent, delivery.ClassGone:
		if res.StatusCode == 410 {
			return verdict{final: true, out: outDeadLettered, reason: "receiver answered 410 Gone; the endpoint was disabled"}
		}
		return verdict{final: true, out: outDeadLettered,
			reason: fmt.Sprintf("permanent failure on attempt %d (%s); check the endpoint's configuration", res.Number, res.Error)}
	case delivery.ClassThrottled:
		if res.HasRetryAfter {
			h := res.RetryAfter
			return verdict{throttle: &h, failure: res.Error}
		}
	}
	return verdict{failure: res.Error}
}

// apply folds one attempt into the run: done reports that the cycle ended
// with out; otherwise throttle is the next wait's Retry-After hint.
func (r *run) apply(ctx workflow.Context, res attempt.SendResult, err error) (out outcome, done bool, throttle *time.Duration) {
	v := judge(res, err)
	if err != nil {
		if v.final {
			return r.end(v), true, nil
		}
		r.lastFailure = v.failure
		return outCanceled, r.drainCancel(), nil
	}
	if res.Class == delivery.ClassEndpointDisabled {
		// Nothing was sent: not an attempt.
		r.canceled = true
		return outCanceled, true, nil
	}
	r.state.Attempts = append(r.state.Attempts, res)
	r.state.AttemptCount = len(r.state.Attempts)
	r.state.LastAttempt = &r.state.Attempts[len(r.state.Attempts)-1]
	r.lastFailure = res.Error
	if r.drainCancel() {
		// A 2xx received during a cancel wins.
		if v.out == outSucceeded && v.final &&
			workflow.GetVersion(ctx, versionSuccessWins, workflow.DefaultVersion, 1) == 1 {
			return outSucceeded, true, nil
		}
		return outCanceled, true, nil
	}
	if v.final {
		return r.end(v), true, nil
	}
	return 0, false, v.throttle
}

// end is the outcome of a final verdict.
func (r *run) end(v verdict) outcome {
	if v.out == outDeadLettered {
		return r.deadLetter(v.reason)
	}
	return v.out
}

func (r *run) deadLetter(reason string) outcome {
	r.state.DeadLetterReason = reason
	r.state.NextAttemptAt = nil
	return outDeadLettered
}

// send runs SendSigned with Temporal retries off. A regular activity may not
// start after the latest moment it could still finish before the deadline.
func (r *run) send(ctx workflow.Context, number int, deadline, slot time.Time) (attempt.SendResult, error) {
	req := sendRequest(r.in, r.set, r.state.Cycle, number, deadline)
	req.Slot = slot
	noRetry := &temporal.RetryPolicy{MaximumAttempts: 1}
	timeout := r.set.RequestTimeout + RecordSlack
	var fut workflow.Future
	if r.in.LocalActivity && workflow.GetVersion(ctx, versionAsyncSend, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: timeout, RetryPolicy: noRetry,
		})
		fut = workflow.ExecuteLocalActivity(lctx, attempt.ActivitySend, req)
	} else {
		toStart := max(deadline.Add(-r.set.RequestTimeout).Sub(workflow.Now(ctx)), time.Second)
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: timeout, ScheduleToStartTimeout: toStart, RetryPolicy: noRetry,
		})
		fut = workflow.ExecuteActivity(actx, attempt.ActivitySend, req)
	}
	var res attempt.SendResult
	err := fut.Get(ctx, &res)
	return res, err
}

// sendRequest is attempt n of a cycle that must end by deadline.
func sendRequest(in Input, set delivery.Settings, cycle, n int, deadline time.Time) attempt.SendRequest {
	return attempt.SendRequest{
		DeliveryID: in.DeliveryID, Cycle: cycle, Number: n, Timeout: set.RequestTimeout, Settings: set, Deadline: deadline,
	}
}

// sleep waits d or until a cancel signal; it reports true when canceled.
func (r *run) sleep(ctx workflow.Context, wait time.Duration) bool {
	tctx, stop := workflow.WithCancel(ctx)
	defer stop()
	timer := workflow.NewTimer(tctx, wait)
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

// awaitReplay parks the dead letter until a fresh replay (returned), a
// cancel or the retention timer (nil). The caller stops the retention timer
// with stop once the replay's cycle is recorded.
func (r *run) awaitReplay(ctx workflow.Context) (sig *ReplaySignal, stop func(), err error) {
	if len(r.queued) > 0 {
		return r.pendingReplay(), func() {}, nil
	}
	tctx, stop := workflow.WithCancel(ctx)
	retention := workflow.NewTimer(tctx, r.set.Retention)
	expired := false
	for sig == nil && !expired && !r.canceled {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(retention, func(workflow.Future) { expired = true })
		sel.AddReceive(r.replayCh, func(c workflow.ReceiveChannel, _ bool) {
			var got ReplaySignal
			c.Receive(ctx, &got)
			if r.fresh(got) {
				sig = &got
			}
		})
		sel.AddReceive(r.cancelCh, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			r.canceled = true
		})
		sel.Select(ctx)
	}
	switch {
	case sig != nil:
		return sig, stop, nil
	case r.canceled:
		// The run ends; the row stays dead_lettered, since a cancel never
		// touches a dead letter.
		err = r.cancel(ctx)
		stop()
		return nil, stop, err
	default:
		// Retention passed; a replay after this starts a new run.
		stop()
		return r.pendingReplay(), stop, nil
	}
}

func (r *run) cancel(ctx workflow.Context) error {
	r.state.NextAttemptAt = nil
	r.setStatus(ctx, delivery.StatusCanceled)
	status, err := r.mark(ctx, delivery.StatusCanceled, "canceled: endpoint disabled or deleted")
	if err == nil && status != "" && status != delivery.StatusCanceled {
		// A 2xx or a dead letter came first; the row keeps it.
		r.setStatus(ctx, status)
	}
	return err
}

// mark records a workflow-decided state in Postgres and answers the status
// the row holds; "" when the row is gone (its app was deleted), which ends
// the run without error.
func (r *run) mark(ctx workflow.Context, status delivery.Status, reason string) (delivery.Status, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    MarkAttemptTimeout,
		ScheduleToCloseTimeout: MarkTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: MarkMaximumInterval,
			NonRetryableErrorTypes: []string{attempt.ErrDeliveryGone},
		},
	})
	req := attempt.MarkRequest{
		DeliveryID: r.in.DeliveryID, Status: status, Reason: reason, Cycle: r.state.Cycle, ReplayID: r.replayID,
	}
	if status == delivery.StatusDeadLettered && r.state.LastAttempt != nil {
		req.LastClass = r.state.LastAttempt.Class
	}
	var res attempt.MarkResult
	err := workflow.ExecuteActivity(actx, attempt.ActivityMark, req).Get(ctx, &res)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == attempt.ErrDeliveryGone {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("record %s: %w", status, err)
	}
	if res.Status == "" {
		// Histories recorded before MarkDelivery answered a status.
		res.Status = status
	}
	return res.Status, nil
}

// setStatus changes the status and the State search attribute.
func (r *run) setStatus(ctx workflow.Context, status delivery.Status) {
	r.state.Status = status
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAState.ValueSet(string(status)))
}
