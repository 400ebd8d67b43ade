// Package workflows holds DeliveryWorkflow: one delivery (one event to one
// endpoint) from its first attempt through retries, throttling, the
// deadline, dead letter and replays. Every retry decision is made here;
// activities never retry on their own.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hookrelay/activities"
	"hookrelay/store"
)

// Names shared with starters and clients.
const (
	// TaskQueue is the task queue of delivery workflows and activities.
	TaskQueue = "hookrelay-deliveries"
	// WorkflowName is the registered name of DeliveryWorkflow.
	WorkflowName = "DeliveryWorkflow"
	// SignalReplay starts a new cycle of a dead-lettered delivery.
	SignalReplay = "replay"
	// SignalCancel ends a delivery as canceled.
	SignalCancel = "cancel"
	// QueryState answers the three questions of CONTRACT §6.
	QueryState = "state"
)

// Statuses of a delivery (CONTRACT §6), as the store keeps them.
const (
	StatusPending      = store.StatusPending
	StatusDelivering   = store.StatusDelivering
	StatusSucceeded    = store.StatusSucceeded
	StatusDeadLettered = store.StatusDeadLettered
	StatusCanceled     = store.StatusCanceled
)

// Search attributes the workflow keeps current, so the Temporal UI can list
// deliveries by state, endpoint, event type and app.
var (
	SAState     = temporal.NewSearchAttributeKeyKeyword("HookrelayState")
	SAEndpoint  = temporal.NewSearchAttributeKeyKeyword("HookrelayEndpoint")
	SAEventType = temporal.NewSearchAttributeKeyKeyword("HookrelayEventType")
	SAApp       = temporal.NewSearchAttributeKeyKeyword("HookrelayApp")
)

// SearchAttributeNames lists the custom search attributes to register.
func SearchAttributeNames() []string {
	return []string{SAState.GetName(), SAEndpoint.GetName(), SAEventType.GetName(), SAApp.GetName()}
}

// Input starts a DeliveryWorkflow. The workflow ID is DeliveryID.
type Input struct {
	DeliveryID string
	AppID      string
	EventID    string
	EventType  string
	EndpointID string
	Settings   Settings
	// Cycle is 1 for a new delivery; a replay that starts a new run after
	// retention passes the next cycle number.
	Cycle int
	// LocalActivity runs SendSigned as a local activity (fewer server round
	// trips; still recorded in history as a marker).
	LocalActivity bool
}

// ReplaySignal asks for a new cycle.
type ReplaySignal struct {
	By string
}

// State is the answer of the state query.
type State struct {
	Status           string                  `json:"status"`
	Cycle            int                     `json:"cycle"`
	AttemptCount     int                     `json:"attempt_count"`
	NextAttemptAt    *time.Time              `json:"next_attempt_at"`
	LastAttempt      *activities.SendResult  `json:"last_attempt"`
	DeadLetterReason string                  `json:"dead_letter_reason,omitempty"`
	Attempts         []activities.SendResult `json:"attempts"`
}

type delivery struct {
	in       Input
	set      Settings
	state    State
	replayCh workflow.ReceiveChannel
	cancelCh workflow.ReceiveChannel
	canceled bool
}

// outcome ends a cycle.
type outcome int

const (
	outSucceeded outcome = iota
	outDeadLettered
	outCanceled
)

// DeliveryWorkflow drives one delivery. See CONTRACT §4–§6.
func DeliveryWorkflow(ctx workflow.Context, in Input) (State, error) {
	d := &delivery{
		in:       in,
		set:      in.Settings.WithDefaults(),
		state:    State{Status: StatusPending, Cycle: max(in.Cycle, 1), Attempts: []activities.SendResult{}},
		replayCh: workflow.GetSignalChannel(ctx, SignalReplay),
		cancelCh: workflow.GetSignalChannel(ctx, SignalCancel),
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (State, error) { return d.state, nil }); err != nil {
		return d.state, fmt.Errorf("register state query: %w", err)
	}
	// A run started by a replay (SignalWithStart) carries that signal; the
	// input's cycle already accounts for it.
	for d.replayCh.ReceiveAsync(nil) {
	}
	if in.Cycle > 1 {
		if err := d.mark(ctx, StatusDelivering, ""); err != nil {
			return d.state, err
		}
	}
	for {
		out := d.runCycle(ctx)
		if out == outDeadLettered {
			if err := d.mark(ctx, StatusDeadLettered, d.state.DeadLetterReason); err != nil {
				return d.state, err
			}
			d.setStatus(ctx, StatusDeadLettered)
			replayed, err := d.awaitReplay(ctx)
			if err != nil || !replayed {
				return d.state, err
			}
			continue
		}
		if out == outSucceeded {
			d.setStatus(ctx, StatusSucceeded)
		} else if err := d.cancel(ctx); err != nil {
			return d.state, err
		}
		// A replay of a delivery that just finished can reach the run
		// before it completes; it must start a cycle, not be dropped.
		if !d.replayCh.ReceiveAsync(nil) {
			return d.state, nil
		}
		d.canceled = false
		if err := d.newCycle(ctx); err != nil {
			return d.state, err
		}
	}
}

// runCycle makes up to len(Schedule) attempts within the deadline.
func (d *delivery) runCycle(ctx workflow.Context) outcome {
	deadline := workflow.Now(ctx).Add(d.set.Deadline)
	var hint *time.Duration // a 429's Retry-After replaces the next wait
	n := len(d.set.Schedule)
	for attempt := 1; attempt <= n; attempt++ {
		scheduled := d.set.Schedule[attempt-1]
		wait := Jitter(scheduled, d.in.DeliveryID, attempt)
		if hint != nil {
			scheduled, wait, hint = *hint, *hint, nil
		}
		now := workflow.Now(ctx)
		// The latest moment an attempt may start and still finish in time.
		// An attempt whose scheduled start is later is never started;
		// jitter alone never moves an attempt past it.
		latest := deadline.Add(-d.set.RequestTimeout).Sub(now)
		if scheduled > latest {
			return d.deadLetter(fmt.Sprintf("deadline of %s: attempt %d could not finish in time (%d attempts made)", d.set.Deadline, attempt, attempt-1))
		}
		wait = min(wait, latest)
		if wait > 0 {
			at := now.Add(wait)
			d.state.NextAttemptAt = &at
			if d.sleep(ctx, wait) {
				return outCanceled
			}
		}
		d.state.NextAttemptAt = nil
		if d.state.Status != StatusDelivering {
			d.setStatus(ctx, StatusDelivering)
		}
		res := d.send(ctx, attempt)
		d.state.Attempts = append(d.state.Attempts, res)
		d.state.AttemptCount = len(d.state.Attempts)
		d.state.LastAttempt = &d.state.Attempts[len(d.state.Attempts)-1]
		if d.drainCancel() {
			return outCanceled
		}
		switch res.Class {
		case activities.ClassSuccess:
			return outSucceeded
		case activities.ClassEndpointDisabled:
			d.canceled = true
			return outCanceled
		case activities.ClassGone:
			return d.deadLetter("receiver answered 410 Gone; the endpoint was disabled")
		case activities.ClassPermanent:
			return d.deadLetter(fmt.Sprintf("permanent failure on attempt %d (%s); check the endpoint's configuration", attempt, res.Error))
		case activities.ClassThrottled:
			if res.HasRetryAfter && attempt < n {
				left := deadline.Add(-d.set.RequestTimeout).Sub(workflow.Now(ctx))
				if res.RetryAfter > left {
					return d.deadLetter(fmt.Sprintf("429 Retry-After %s is beyond the deadline (%s left)", res.RetryAfter, left.Round(time.Second)))
				}
				h := max(res.RetryAfter, time.Second)
				hint = &h
			}
		}
	}
	return d.deadLetter(fmt.Sprintf("all %d attempts failed; last: %s", n, d.state.LastAttempt.Error))
}

func (d *delivery) deadLetter(reason string) outcome {
	d.state.DeadLetterReason = reason
	d.state.NextAttemptAt = nil
	return outDeadLettered
}

// send runs SendSigned with Temporal retries off. An activity failure (the
// worker died, Postgres was unreachable) is a retryable attempt.
func (d *delivery) send(ctx workflow.Context, attempt int) activities.SendResult {
	var a *activities.Activities
	req := activities.SendRequest{DeliveryID: d.in.DeliveryID, Cycle: d.state.Cycle, Number: attempt, Timeout: d.set.RequestTimeout}
	noRetry := &temporal.RetryPolicy{MaximumAttempts: 1}
	// Room to record the attempt after the request itself timed out.
	timeout := d.set.RequestTimeout + 5*time.Second
	var fut workflow.Future
	if d.in.LocalActivity {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: timeout, RetryPolicy: noRetry,
		})
		fut = workflow.ExecuteLocalActivity(lctx, a.SendSigned, req)
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: timeout, RetryPolicy: noRetry,
		})
		fut = workflow.ExecuteActivity(actx, a.SendSigned, req)
	}
	var res activities.SendResult
	if err := fut.Get(ctx, &res); err != nil {
		return activities.SendResult{
			Number: attempt, StartedAt: workflow.Now(ctx), Class: activities.ClassRetryable,
			Error: "attempt did not complete: " + err.Error(),
		}
	}
	return res
}

// sleep waits d or until a cancel signal; it reports true when canceled.
func (d *delivery) sleep(ctx workflow.Context, wait time.Duration) bool {
	tctx, stop := workflow.WithCancel(ctx)
	defer stop()
	timer := workflow.NewTimer(tctx, wait)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.AddReceive(d.cancelCh, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		d.canceled = true
	})
	sel.Select(ctx)
	return d.canceled
}

func (d *delivery) drainCancel() bool {
	if d.cancelCh.ReceiveAsync(nil) {
		d.canceled = true
	}
	return d.canceled
}

// awaitReplay parks the dead letter until a replay (true), a cancel or the
// retention timer (false).
func (d *delivery) awaitReplay(ctx workflow.Context) (bool, error) {
	tctx, stop := workflow.WithCancel(ctx)
	defer stop()
	retention := workflow.NewTimer(tctx, d.set.Retention)
	replayed := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(retention, func(workflow.Future) {})
	sel.AddReceive(d.replayCh, func(c workflow.ReceiveChannel, _ bool) {
		var sig ReplaySignal
		c.Receive(ctx, &sig)
		replayed = true
	})
	sel.AddReceive(d.cancelCh, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		d.canceled = true
	})
	sel.Select(ctx)
	switch {
	case d.canceled:
		return false, d.cancel(ctx)
	case !replayed && !d.replayCh.ReceiveAsync(nil):
		// Retention passed; a replay after this starts a new run.
		return false, nil
	}
	return true, d.newCycle(ctx)
}

// newCycle starts a replay: a fresh schedule and deadline, same event.
func (d *delivery) newCycle(ctx workflow.Context) error {
	d.state.Cycle++
	d.state.DeadLetterReason = ""
	d.state.Status = StatusPending
	return d.mark(ctx, StatusDelivering, "")
}

func (d *delivery) cancel(ctx workflow.Context) error {
	d.state.NextAttemptAt = nil
	d.setStatus(ctx, StatusCanceled)
	return d.mark(ctx, StatusCanceled, "canceled: endpoint disabled or deleted")
}

// mark records a workflow-decided state in Postgres. It is idempotent, so
// it retries until Postgres answers.
func (d *delivery) mark(ctx workflow.Context, status, reason string) error {
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	err := workflow.ExecuteActivity(actx, a.MarkDelivery, activities.MarkRequest{
		DeliveryID: d.in.DeliveryID, Status: status, Reason: reason, Cycle: d.state.Cycle,
	}).Get(ctx, nil)
	if err != nil {
		return fmt.Errorf("record %s: %w", status, err)
	}
	return nil
}

// setStatus changes the status and the State search attribute.
func (d *delivery) setStatus(ctx workflow.Context, status string) {
	d.state.Status = status
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAState.ValueSet(status))
}
