package dispatch

// Ordered delivery (docs/contract.md#14-ordered-delivery): the dispatcher
// wakes a sequence's SequencerWorkflow; the sequencer's RunSequence
// activity sends the sequence's heads one at a time, in sequence order,
// reading them from Postgres.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
	"hookrelay/workflows"
)

// Bounds of ordered delivery.
const (
	// SequenceLease is how long an ordered row stays leased to its
	// sequencer after a wake: the dispatcher claims it again (and wakes
	// the sequence again) only past it, so a sequencer terminated by hand
	// is started again.
	SequenceLease = 10 * time.Minute
	// sequenceHold is how long a run holds its sequence (renewed while it
	// runs): a run that stalled past it gives the sequence to the next.
	sequenceHold = 2 * workflows.SequenceHeartbeat
	// sequenceLinger is how long a run lingers on an empty sequence before
	// it lets go and its sequencer ends: a sequence fed an event a second
	// or more keeps one run.
	sequenceLinger = time.Second
	// sequenceBeat is how often a run heartbeats and renews its hold.
	sequenceBeat = workflows.SequenceHeartbeat / 4
)

// RunSequence is the sequencer's activity (workflows.RunSequenceName): it
// sends the first attempts of the sequence's heads one at a time, in
// sequence order, through the same attempt path as every first attempt
// (Sequencer's activities), each at its own due time, until a head fails
// (it goes to its own DeliveryWorkflow and the sequence waits for it), a
// replay is handed to its delivery's workflow, the sequence empties, or
// workflows.SequenceRunBudget passes.
func (d *Dispatcher) RunSequence(ctx context.Context, in workflows.SequenceRun) (workflows.SequenceStep, error) {
	var step workflows.SequenceStep
	if d.Sequencer == nil {
		return step, errors.New("run sequence: the dispatcher has no activities for ordered deliveries")
	}
	info := activity.GetInfo(ctx)
	holder := info.WorkflowExecution.RunID + "/" + info.ActivityID + "/" + strconv.Itoa(int(info.Attempt))
	// holding is set while the run holds the sequence; only then does
	// holdSequence renew the hold, and the run's end let it go.
	var holding atomic.Bool
	defer func() {
		if !holding.Load() {
			return
		}
		if err := store.UnleaseSequence(context.WithoutCancel(ctx), d.Pool, in.EndpointID, in.OrderingKey, holder); err != nil {
			d.logger().Warn("sequence hold not ended; it lapses", "sequencer", info.WorkflowExecution.ID, "err", err)
		}
	}()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go d.holdSequence(ctx, stop, in, holder, &holding)
	end := time.Now().Add(cmp.Or(in.Budget, workflows.SequenceRunBudget))
	// lingered is set once the run waited on an empty sequence.
	lingered := false
	bell := d.bells.ring(workflows.SequencerID(in.EndpointID, in.OrderingKey))
	defer d.bells.drop(workflows.SequencerID(in.EndpointID, in.OrderingKey), bell)
	for {
		if time.Now().After(end) {
			step.More = true
			return step, nil
		}
		if !holding.Load() {
			ok, err := store.LeaseSequence(ctx, d.Pool, in.EndpointID, in.OrderingKey, holder, sequenceHold)
			if err != nil {
				return step, err
			}
			if !ok {
				// No counter row: its endpoint's app was deleted (the
				// deliveries with it). Nothing is left to send.
				if exists, err := store.SequenceExists(ctx, d.Pool, in.EndpointID, in.OrderingKey); err != nil || !exists {
					step.Empty = err == nil
					return step, err
				}
				// A stalled run holds it: look again once its hold lapses.
				step.NextAt = time.Now().Add(sequenceHold)
				return step, nil
			}
			holding.Store(true)
		}
		var h store.Head
		var ok bool
		var err error
		if waiting := in.WaitingOn; waiting != "" {
			// The delivery waited for first: while it is open, nothing
			// else goes.
			in.WaitingOn = ""
			h, ok, err = store.SequenceMember(ctx, d.Pool, waiting)
		}
		if !ok && err == nil {
			h, ok, err = store.SequenceHead(ctx, d.Pool, in.EndpointID, in.OrderingKey)
		}
		if ok {
			lingered = false
		}
		switch {
		case err != nil:
			return step, cmp.Or(context.Cause(ctx), err)
		case !ok && !lingered:
			// Empty: linger, holding the sequence, so a row that comes
			// soon costs no wake and no new run (each a workflow task):
			// this process's dispatcher rings for it; another's row is
			// read by the last look below.
			lingered = true
			t := time.NewTimer(sequenceLinger)
			select {
			case <-ctx.Done():
				t.Stop()
				return step, cmp.Or(context.Cause(ctx), ctx.Err())
			case <-t.C:
			case <-bell:
				t.Stop()
			}
			continue
		case !ok && holding.Load():
			// Let go, then look once more: a row the dispatcher found
			// held (and woke no one for) is read now.
			holding.Store(false)
			if err := store.UnleaseSequence(ctx, d.Pool, in.EndpointID, in.OrderingKey, holder); err != nil {
				holding.Store(true) // the run's end tries again
				return step, err
			}
			if h, ok, err = store.SequenceHead(ctx, d.Pool, in.EndpointID, in.OrderingKey); err != nil || !ok {
				step.Empty = err == nil
				return step, err
			}
			continue
		case !ok:
			step.Empty = true
			return step, nil
		case h.Row == nil:
			// In its own workflow, or a dead letter that blocks.
			if in.Check && h.Status.InFlight() {
				in.Check = false
				if moved, err := d.releaseIfAbandoned(ctx, h.DeliveryID, h.Cycle); err != nil || moved {
					if err != nil {
						return step, err
					}
					continue
				}
			}
			if h.Status == delivery.StatusDeadLettered && holding.Load() {
				// Let go, then look once more: the dead letter's replay,
				// queued while the run held the sequence, woke no one.
				holding.Store(false)
				if err := store.UnleaseSequence(ctx, d.Pool, in.EndpointID, in.OrderingKey, holder); err != nil {
					holding.Store(true) // the run's end tries again
					return step, err
				}
				again, ok, err := store.SequenceHead(ctx, d.Pool, in.EndpointID, in.OrderingKey)
				if err != nil {
					return step, err
				}
				if !ok || again.Row != nil || again.DeliveryID != h.DeliveryID {
					continue
				}
			}
			step.WaitingOn = h.DeliveryID
			step.Blocked = h.Status == delivery.StatusDeadLettered
			return step, nil
		case h.Row.Kind == outbox.KindReplay:
			// Its cycle runs in the delivery's workflow, which tells the
			// sequencer when it ends.
			if err := d.send(ctx, *h.Row); err != nil {
				return step, err
			}
			if err := store.OutboxDone(ctx, d.Pool, []int64{h.Row.ID}); err != nil {
				return step, err
			}
			step.WaitingOn = h.DeliveryID
			return step, nil
		}
		sent, err := d.sendHead(ctx, *h.Row, end, func() (bool, error) {
			return store.HoldsSequence(ctx, d.Pool, in.EndpointID, in.OrderingKey, holder)
		})
		switch {
		case err != nil:
			return step, cmp.Or(context.Cause(ctx), err)
		case sent.waitingOn:
			step.WaitingOn = h.DeliveryID
			return step, nil
		case sent.paused:
			if holding.Load() {
				// Let go, then look once more: a resume that committed
				// while the run held the sequence woke no one.
				holding.Store(false)
				if err := store.UnleaseSequence(ctx, d.Pool, in.EndpointID, in.OrderingKey, holder); err != nil {
					holding.Store(true) // the run's end tries again
					return step, err
				}
				if paused, err := store.EndpointPaused(ctx, d.Pool, in.EndpointID); err != nil || !paused {
					if err != nil {
						return step, err
					}
					continue
				}
			}
			step.Paused = true
			return step, nil
		case !sent.nextAt.IsZero():
			step.NextAt = sent.nextAt
			return step, nil
		case sent.gone:
			continue
		}
		step.Sent++
	}
}

// headSent is what sendHead did with a head's start row.
type headSent struct {
	// waitingOn: the delivery went to its own workflow.
	waitingOn bool
	// nextAt: nothing sent; the head is due then (later than the run
	// waits, or it was held back).
	nextAt time.Time
	// paused: nothing sent; its endpoint is paused.
	paused bool
	// gone: nothing sent; the row was deleted (its delivery replayed).
	gone bool
}

// sendHead makes the first attempt of row's delivery at its due time
// (waiting for it when it comes before end) and ends it or hands it off. A
// row whose attempt was recorded before its run died is handed off from
// that record, never sent again. holds is asked just before the request,
// on the database's clock: a run that lost its hold while it waited (a
// frozen worker) sends nothing.
func (d *Dispatcher) sendHead(ctx context.Context, row outbox.Row, end time.Time, holds func() (bool, error)) (headSent, error) {
	now := time.Now()
	handOff := func(o *activities.SendOutcome) (headSent, error) {
		if err := d.start(ctx, row, o, time.Time{}); err != nil {
			return headSent{}, err
		}
		return headSent{waitingOn: true}, store.OutboxDone(ctx, d.Pool, []int64{row.ID})
	}
	if row.Outcome != nil {
		return handOff(nil) // start reads the recorded outcome
	}
	f := first{row: row, set: row.Settings.WithDefaults()}
	f.deadline = row.CreatedAt.Add(f.set.Deadline)
	// The first wait counts from acceptance, as every delivery's does.
	next := delivery.Plan(f.set, row.DeliveryID, 1, nil, row.CreatedAt, f.deadline)
	if next.DeadLetter != "" {
		return handOff(nil) // its workflow dead-letters it with the reason
	}
	// A head due later than SequenceWaitInRun (or past the run's end) is
	// waited for between runs, on a timer: the run holds a slot only for
	// short waits.
	if next.At.After(end) || next.At.After(now.Add(workflows.SequenceWaitInRun)) {
		return headSent{nextAt: next.At}, nil
	}
	f.due = next.At
	if wait := f.due.Sub(now); wait > 0 {
		if !sleepCtx(ctx, wait) {
			return headSent{}, ctx.Err()
		}
		// A replay of the head (canceled meanwhile by a disable, then
		// enabled) deleted this row and queued its own cycle: this row
		// sends nothing. (A head due at once was read just now.)
		if queued, err := store.OutboxRowQueued(ctx, d.Pool, row.ID); err != nil || !queued {
			return headSent{gone: err == nil}, err
		}
	}
	if ok, err := holds(); err != nil || !ok {
		if err == nil {
			err = errors.New("sequence of " + row.DeliveryID + " no longer held by this run")
		}
		return headSent{}, err
	}
	// The attempt continues the trace its event was published in, as a
	// sender's first attempt does.
	tctx, span := d.traced(ctx, row)
	e := d.makeFirst(tctx, d.Sequencer, f)
	span.End()
	switch {
	case e.retry:
		return headSent{}, errors.New("cancel of " + row.DeliveryID + " not recorded")
	case !e.hold.IsZero():
		// Nothing sent (the endpoint's share in use, or the endpoint not
		// answering): the sequence tries its head again then.
		return headSent{nextAt: e.hold}, nil
	case e.paused:
		// Nothing sent: the sequence waits for the endpoint's resume, which
		// wakes it.
		return headSent{paused: true}, nil
	case e.direct:
		// Its outcome is on no row: its workflow gets it now.
		if err := d.startDirect(ctx, row, e.outcome); err != nil {
			return headSent{}, err
		}
		return headSent{waitingOn: true}, store.OutboxDone(ctx, d.Pool, []int64{row.ID})
	case e.handOff:
		return handOff(e.outcome)
	case e.deleteRow:
		return headSent{}, store.OutboxDone(ctx, d.Pool, []int64{row.ID})
	}
	return headSent{}, nil
}

// releaseIfAbandoned ends delivery id, still in flight, as a dead letter
// when its workflow ended without recording its end (it failed, was
// terminated or canceled by hand, timed out, or is gone), and reports
// whether it did, so the sequence is read again: a skip sequence moves on,
// a block sequence holds until the dead letter is replayed or released,
// as for any dead letter. A running or paused workflow (paused by hand in
// the Temporal UI) still owns its delivery: nothing changes.
func (d *Dispatcher) releaseIfAbandoned(ctx context.Context, id string, cycle int) (bool, error) {
	desc, err := d.Client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	status := enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		return false, fmt.Errorf("describe %s: %w", id, err)
	default:
		status = desc.GetWorkflowExecutionInfo().GetStatus()
		switch status {
		case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED,
			enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		default:
			return false, nil
		}
	}
	reason := fmt.Sprintf("its workflow ended (%s) without recording an outcome; replay it to send it again", workflowState(status))
	m, err := d.Sequencer.MarkDelivery(ctx, activities.MarkRequest{DeliveryID: id, Status: delivery.StatusDeadLettered, Reason: reason, Cycle: max(cycle, 1)})
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrDeliveryGone {
			return true, nil
		}
		return false, err
	}
	if m.Status == delivery.StatusDeadLettered {
		d.logger().Warn("delivery's workflow ended without an outcome; dead-lettered", "delivery_id", id, "workflow_status", status.String())
	}
	return true, nil
}

// workflowState names a workflow's status in a dead letter's reason.
func workflowState(s enumspb.WorkflowExecutionStatus) string {
	if s == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return "not found"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}
