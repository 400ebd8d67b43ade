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
)

// first is one start row a sender holds: its first attempt is made at its
// due time, straight from the outbox, with no workflow.
type first struct {
	row      outbox.Row
	set      delivery.Settings
	deadline time.Time
	due      time.Time
}

// planFirst says when row's first attempt is due; ok is false when its
// delivery goes to its own workflow at once (no first attempt fits before
// the deadline, or the first wait is longer than HoldMax).
func planFirst(row outbox.Row, now time.Time) (f first, ok bool) {
	f = first{row: row, set: row.Settings.WithDefaults()}
	f.deadline = row.CreatedAt.Add(f.set.Deadline)
	next := delivery.Plan(f.set, row.DeliveryID, 1, nil, now, f.deadline)
	if next.DeadLetter != "" || next.Wait > HoldMax {
		return f, false
	}
	f.due = next.At
	return f, true
}

// leaseUntil is how long f's row is leased: past its due time, its request
// timeout, recording and LeaseSlack.
func (f first) leaseUntil() time.Time {
	return f.due.Add(f.set.RequestTimeout + activities.RecordSlack + LeaseSlack)
}

// sendFirsts makes each first attempt at its own due time, each in its own
// goroutine: a slow receiver holds a goroutine and a socket, and never
// delays another delivery's attempt.
func (d *Dispatcher) sendFirsts(ctx context.Context, fs []first) {
	for _, f := range fs {
		d.firsts.Go(func() { d.sendFirst(ctx, f) })
	}
}

// sendFirst waits for f's due time, checks the deadline, makes the attempt
// and either ends the row (success, or the delivery is gone) or hands the
// delivery to its own DeliveryWorkflow with the attempt's outcome.
func (d *Dispatcher) sendFirst(ctx context.Context, f first) {
	if wait := time.Until(f.due); wait > 0 {
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
	if f.set.TooLate(time.Now(), f.deadline) {
		// The delivery's workflow dead-letters it with the reason.
		d.handOff(ctx, f.row, nil)
		return
	}
	req := activities.SendRequest{
		DeliveryID: f.row.DeliveryID, Cycle: 1, Number: 1, Timeout: f.set.RequestTimeout, Settings: f.set, Deadline: f.deadline,
	}
	// The request runs to its own timeout even while the worker stops.
	res, err := activities.SendFirst(context.WithoutCancel(ctx), d.Sender, req, f.row.ID)
	var appErr *temporal.ApplicationError
	switch {
	case err == nil && res.Class == activities.ClassSuccess,
		errors.As(err, &appErr) && appErr.Type() == activities.ErrDeliveryGone:
		if err := outbox.DoneRow(context.WithoutCancel(ctx), d.Pool, f.row.ID); err != nil {
			// The lease lapses; the next claim finds the row stale.
			d.Logger.Warn("first attempt done; its outbox row stays until its lease lapses", "delivery_id", f.row.DeliveryID, "err", err)
		}
		d.firstDone.Add(1)
		return
	}
	o := activities.Outcome(res, err)
	d.handOff(ctx, f.row, &o)
}

// handOff starts row's DeliveryWorkflow, which goes on from the first
// attempt's outcome (nil: it makes its own first attempt), and deletes the
// row. When Temporal does not take it, the row goes back to the outbox:
// the next round hands it off again from its recorded outcome, without a
// second send.
func (d *Dispatcher) handOff(ctx context.Context, row outbox.Row, o *activities.SendOutcome) {
	ctx = context.WithoutCancel(ctx)
	err := d.start(ctx, row, o)
	if err == nil {
		err = outbox.DoneRow(ctx, d.Pool, row.ID)
	}
	if err != nil {
		d.Logger.Warn("first attempt not handed off yet; its row goes back to the outbox", "delivery_id", row.DeliveryID, "err", err)
		d.release(row.ID)
		return
	}
	d.firstHandedOff.Add(1)
}

// release ends row id's lease so the next round takes it.
func (d *Dispatcher) release(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := outbox.Release(ctx, d.Pool, id); err != nil {
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
