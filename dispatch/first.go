package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// Bounds of first attempts made straight from the outbox.
const (
	// HoldMax is the longest first wait a sender holds a start row for; a
	// delivery whose first attempt is due later waits on its own
	// DeliveryWorkflow's timer instead.
	HoldMax = 10 * time.Second
	// LeaseSlack is how long past its first attempt's latest end a start
	// row's lease lasts, for recording and the hand-off. After a worker
	// dies, its rows are taken again once their leases lapse.
	LeaseSlack = 10 * time.Second
	// AppShareDefault is how many first attempts of one app a worker makes
	// at once; the app's other due first attempts queue behind them, while
	// other apps' go at once.
	AppShareDefault = 512
	// QueueMax is the longest a due first attempt waits behind its app's
	// share; past it the delivery goes to its own workflow with nothing
	// sent (its deadline still counts), well inside its row's lease.
	QueueMax = 2 * time.Second
	// StartDelayMax is the longest a failed first attempt's retry is
	// waited for as its DeliveryWorkflow's start delay (see startDelay);
	// a later retry waits on the workflow's timer.
	StartDelayMax = 30 * time.Second
	// HeldMaxDefault bounds the start rows one dispatcher holds at once
	// (waiting for their due time or being sent); past it, rounds claim
	// no start rows until some end.
	HeldMaxDefault = 4096
)

// first is one start row a sender holds: its first attempt is made at its
// due time, straight from the outbox, with no workflow.
type first struct {
	row      outbox.Row
	set      delivery.Settings
	deadline time.Time
	due      time.Time
	// workflow: at its due time the delivery's DeliveryWorkflow starts and
	// makes the attempt (ModeWorkflow); otherwise the sender makes it.
	workflow bool
}

// planFirst says when row's first attempt is due; ok is false when its
// delivery goes to its own workflow at once (no first attempt fits before
// the deadline, or the first wait is longer than HoldMax).
func planFirst(row outbox.Row, now time.Time) (f first, ok bool) {
	f = first{row: row, set: row.Settings.WithDefaults()}
	f.deadline = row.CreatedAt.Add(f.set.Deadline)
	// The first wait counts from acceptance, not from the claim: a row that
	// waited in the outbox for its round is not sent any later for it.
	next := delivery.Plan(f.set, row.DeliveryID, 1, nil, row.CreatedAt, f.deadline)
	if next.DeadLetter != "" || next.At.Sub(now) > HoldMax {
		return f, false
	}
	f.due = next.At
	return f, true
}

// tooLate reports whether f's request, leaving at its due time or now,
// whichever is later, could no longer end before its deadline.
func (f first) tooLate(now time.Time) bool {
	return f.set.TooLate(delivery.Later(f.due, now), f.deadline)
}

// leaseUntil is how long f's row, claimed at now, is leased: past its due
// time (or now, for a row claimed after it), its request timeout, recording
// and LeaseSlack.
func (f first) leaseUntil(now time.Time) time.Time {
	return delivery.Later(f.due, now).Add(QueueMax + f.set.RequestTimeout + activities.RecordSlack + LeaseSlack)
}

// sendFirsts makes each first attempt at its own due time, each in its own
// goroutine: a slow receiver holds a goroutine and a socket, and never
// delays another delivery's attempt.
func (d *Dispatcher) sendFirsts(ctx context.Context, fs []first) {
	d.held.Add(int64(len(fs)))
	d.goFirsts(ctx, fs)
}

// goFirsts is sendFirsts for rows whose places in held were reserved.
func (d *Dispatcher) goFirsts(ctx context.Context, fs []first) {
	for _, f := range fs {
		d.firsts.Go(func() {
			defer d.releaseApp(f.row.AppID)
			defer d.held.Add(-1)
			d.sendFirst(ctx, f)
		})
	}
}

// sendFirst waits for f's due time, checks the deadline, makes the attempt
// and either ends the row (success, or the delivery is gone) or hands the
// delivery to its own DeliveryWorkflow with the attempt's outcome. It wakes
// ClaimLead early: the attempt is claimed before its due time and its
// request leaves at it.
func (d *Dispatcher) sendFirst(ctx context.Context, f first) {
	ctx, span := d.traced(ctx, f.row)
	defer span.End()
	lead := activities.ClaimLead
	if f.workflow {
		lead = 0
	}
	if wait := time.Until(f.due.Add(-lead)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			// Stopping: the row goes back to the outbox for the next worker.
			d.release(f.row.ID)
			return
		case <-t.C:
		}
	}
	if f.tooLate(time.Now()) {
		// The delivery's workflow dead-letters it with the reason.
		d.handOff(ctx, f.row, nil)
		return
	}
	// The app's places: its first attempts in progress on this worker
	// (sender), or its runs between their start and the beginning of their first
	// attempt (workflow).
	lanes := d.lanes
	if f.workflow {
		lanes = d.wlanes
	}
	if !lanes.Enter(ctx, f.row.AppID, f.due.Add(QueueMax)) {
		if ctx.Err() != nil {
			d.release(f.row.ID)
			return
		}
		// Every place of the app's is in use.
		d.hold(f, busyRecheck(f))
		return
	}
	if f.workflow {
		d.startFirst(ctx, f) // its run keeps the place (opened)
		return
	}
	defer d.lanes.Leave(f.row.AppID)
	switch e := d.makeFirst(ctx, d.Sender, f); {
	case e.retry:
		d.release(f.row.ID)
	case e.paused:
		// The pause held the row; released, it waits for the resume,
		// which lets the endpoint's rows go in order of acceptance.
		d.release(f.row.ID)
		d.firstHeld.Add(1)
	case !e.hold.IsZero():
		d.hold(f, e.hold)
	case e.direct:
		d.handOffDirect(ctx, f.row, e.outcome)
	case e.handOff:
		// A failure as its endpoint stopped answering (on this worker):
		// its retry would be held too, so the row waits in the outbox with
		// its recorded outcome, costing no workflow until a probe may go
		// (or its deadline comes). A failure with no answer waits there
		// until shortly before its retry (missHold).
		var at time.Time
		if e.outcome != nil {
			now := time.Now()
			if at = d.heldBack(f.row, now, e.outcome, false); at.IsZero() {
				at = missHold(d.Sender, f, now, e.outcome)
			}
		}
		if at.IsZero() {
			d.handOff(ctx, f.row, e.outcome)
		} else {
			d.hold(f, at)
		}
	case e.deleteRow:
		if _, err := d.doneRows.Do(context.WithoutCancel(ctx), f.row.ID); err != nil {
			// The lease lapses; the next claim finds the row stale.
			d.Logger.Warn("first attempt done; its outbox row stays until its lease lapses", "delivery_id", f.row.DeliveryID, "err", err)
		}
		d.firstDone.Add(1)
	default:
		d.firstDone.Add(1)
	}
}

// firstEnd is what became of a first attempt made from its start row.
type firstEnd struct {
	// handOff: the delivery goes on in its DeliveryWorkflow from outcome
	// (nil: nothing was sent; the workflow decides, a deadline passed).
	handOff bool
	outcome *activities.SendOutcome
	// deleteRow: the delivery ended with nothing sent (canceled, endpoint
	// disabled or deleted, gone) and its row is left to delete. A
	// success's record deleted the row in the same statement.
	deleteRow bool
	// retry: its cancel was not recorded; the row goes back to the outbox.
	retry bool
	// paused: nothing was sent, its endpoint paused since the claim.
	paused bool
	// hold: nothing was sent (the endpoint's share in use, or the endpoint
	// not answering) and the row waits in the outbox until then.
	hold time.Time
	// direct: outcome is on no row (keepUnrecorded): it goes to its
	// workflow at once, never held in the outbox.
	direct bool
}

// makeFirst checks f's deadline (every wait is followed by it), makes its
// first attempt with a and records it, and says what became of it.
func (d *Dispatcher) makeFirst(ctx context.Context, a *activities.Activities, f first) firstEnd {
	if f.tooLate(time.Now()) {
		// The delivery's workflow dead-letters it with the reason.
		return firstEnd{handOff: true}
	}
	req := activities.SendRequest{
		DeliveryID: f.row.DeliveryID, EndpointID: f.row.EndpointID, Cycle: 1, Number: 1, Timeout: f.set.RequestTimeout, Settings: f.set, Deadline: f.deadline,
		At: f.due,
	}
	// The request runs to its own timeout even while the worker stops.
	// A full endpoint share is waited for no longer than a full app lane:
	// the row's lease has room for QueueMax past its due time.
	res, err := activities.SendFirst(context.WithoutCancel(ctx), a, req, f.row.ID, f.due.Add(QueueMax))
	var appErr *temporal.ApplicationError
	if err == nil && res.Class == activities.ClassEndpointDisabled {
		// Nothing sent: the delivery was canceled or its endpoint disabled
		// or deleted. The cancel is recorded here (a disable that found an
		// earlier request of this row on the wire, its sender since dead,
		// left the delivery delivering); a finished delivery keeps its
		// status.
		if _, err := a.MarkDelivery(context.WithoutCancel(ctx), activities.MarkRequest{
			DeliveryID: f.row.DeliveryID, Status: delivery.StatusCanceled, Reason: activities.ReasonCanceled, Cycle: 1,
		}); err != nil {
			d.logger().Warn("cancel not recorded; the row goes back to the outbox", "delivery_id", f.row.DeliveryID, "err", err)
			return firstEnd{retry: true}
		}
	}
	switch {
	case err == nil && res.Unrecorded:
		// Sent, but neither the attempt nor the row's outcome is recorded
		// (the delivery's workflow records the attempt before it goes on).
		return d.keepUnrecorded(ctx, f, activities.Outcome(res, nil))
	case err == nil && res.Class == activities.ClassSuccess:
		return firstEnd{}
	case err == nil && res.Class == activities.ClassEndpointPaused:
		return firstEnd{paused: true}
	case err == nil && res.Class == activities.ClassEndpointBusy:
		now := time.Now()
		if res.HeldUntil.After(now) {
			return firstEnd{hold: delivery.HeldEnd(res.HeldUntil, now, f.set.LastStart(f.deadline), f.row.DeliveryID, 1)}
		}
		return firstEnd{hold: busyRecheck(f)}
	case err == nil && res.Class == activities.ClassEndpointDisabled,
		errors.As(err, &appErr) && appErr.Type() == activities.ErrDeliveryGone:
		return firstEnd{deleteRow: true}
	}
	o := activities.Outcome(res, err)
	return firstEnd{handOff: true, outcome: &o}
}

// keepUnrecorded ends a first attempt that was sent but whose record (and
// so its row's outcome) Postgres refused: the outcome is written on the
// row when Postgres now takes it, and the row then goes as any failed
// first attempt's (held or handed off, never sent again); else it must go
// to its workflow at once (direct), the only other place it is kept.
func (d *Dispatcher) keepUnrecorded(ctx context.Context, f first, o activities.SendOutcome) firstEnd {
	raw, err := json.Marshal(o)
	if err == nil {
		err = store.KeepOutcome(context.WithoutCancel(ctx), d.Pool, f.row.ID, raw)
	}
	if err != nil {
		d.logger().Warn("unrecorded first attempt's outcome not kept on its row; its workflow gets it now", "delivery_id", f.row.DeliveryID, "err", err)
		return firstEnd{handOff: true, outcome: &o, direct: true}
	}
	return firstEnd{handOff: true, outcome: &o}
}

// startDirect starts row's DeliveryWorkflow from o, an outcome no row
// holds (keepUnrecorded), trying again while Temporal refuses (tryAgain):
// put back, the row would be sent again.
func (d *Dispatcher) startDirect(ctx context.Context, row outbox.Row, o *activities.SendOutcome) error {
	return tryAgain(ctx, func() error { return d.start(ctx, row, o, time.Time{}) })
}

// tryAgain runs fn until it succeeds, at most directTries times, waiting
// activities.RecordRetryWait after the first failure and twice as long
// after each next one (at most 5 s); it answers fn's last error.
func tryAgain(ctx context.Context, fn func() error) error {
	wait := activities.RecordRetryWait
	var err error
	for try := 1; ; try++ {
		if err = fn(); err == nil || try == directTries || !sleepCtx(ctx, wait) {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// directTries bounds tryAgain's tries (about 20 s in all).
const directTries = 7

// handOff starts row's DeliveryWorkflow, which goes on from the first
// attempt's outcome (nil: it makes its own first attempt), and deletes the
// row. When Temporal does not take it, the row goes back to the outbox:
// the next round hands it off again from its recorded outcome, without a
// second send.
func (d *Dispatcher) handOff(ctx context.Context, row outbox.Row, o *activities.SendOutcome) {
	ctx = context.WithoutCancel(ctx)
	err := d.start(ctx, row, o, time.Time{})
	if err == nil {
		_, err = d.doneRows.Do(ctx, row.ID)
	}
	if err != nil {
		d.Logger.Warn("first attempt not handed off yet; its row goes back to the outbox", "delivery_id", row.DeliveryID, "err", err)
		d.release(row.ID)
		return
	}
	d.firstHandedOff.Add(1)
}

// handOffDirect is handOff for an outcome no row holds: its start is tried
// again while Temporal refuses, and the row is put back only when that
// failed (the one case left where it is sent again: Postgres and Temporal
// both refusing for the whole of startDirect's tries).
func (d *Dispatcher) handOffDirect(ctx context.Context, row outbox.Row, o *activities.SendOutcome) {
	ctx = context.WithoutCancel(ctx)
	if err := d.startDirect(ctx, row, o); err != nil {
		d.Logger.Error("unrecorded first attempt not handed off; its row goes back to the outbox and is sent again", "delivery_id", row.DeliveryID, "err", err)
		d.release(row.ID)
		return
	}
	if err := tryAgain(ctx, func() error { _, err := d.doneRows.Do(ctx, row.ID); return err }); err != nil {
		// Its workflow holds the outcome, but the row, claimed again once
		// its lease lapses, would be sent again.
		d.Logger.Error("unrecorded first attempt handed off, but its outbox row stays; it may be sent again", "delivery_id", row.DeliveryID, "err", err)
	}
	d.firstHandedOff.Add(1)
}

// release ends row id's lease so the next round takes it.
func (d *Dispatcher) release(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := store.ReleaseOutbox(ctx, d.Pool, id); err != nil {
		d.Logger.Warn("outbox row not released; its lease lapses", "row", id, "err", err)
	}
}

// recordedOutcome is the first attempt recorded on a start row, nil when
// none was.
func recordedOutcome(row outbox.Row) (*activities.SendOutcome, error) {
	if row.Outcome == nil {
		return nil, nil
	}
	var o activities.SendOutcome
	if err := json.Unmarshal(row.Outcome, &o); err != nil {
		return nil, fmt.Errorf("outcome of outbox row %d: %w", row.ID, err)
	}
	return &o, nil
}

// deleteRows deletes a batch of start rows whose first attempts ended (a
// coalesce.Func).
func (d *Dispatcher) deleteRows(ctx context.Context, ids []int64) ([]struct{}, []error, error) {
	if err := store.OutboxDone(ctx, d.Pool, ids); err != nil {
		return nil, nil, err
	}
	return make([]struct{}, len(ids)), nil, nil
}
