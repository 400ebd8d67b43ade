package dispatch

import (
	"context"
	"time"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// hold leaves f's row in the outbox, leased until at (no later than the
// last moment an attempt fits before its deadline): a first attempt held
// back by its endpoint's or its app's share, or by an endpoint that
// stopped answering, is not an attempt and costs no workflow; a failed
// one whose hand-off is held (heldBack, missHold) keeps its recorded
// outcome. The round that takes the row again makes the attempt or hands
// the delivery to its workflow (at once once its deadline has passed).
func (d *Dispatcher) hold(f first, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if last := f.set.LastStart(f.deadline); at.After(last) {
		at = last
	}
	if _, err := d.heldRows.Do(ctx, heldRow{id: f.row.ID, until: at}); err != nil {
		d.Logger.Warn("held start row not leased until its recheck; its lease lapses", "row", f.row.ID, "err", err)
		return
	}
	d.firstHeld.Add(1)
}

// heldRow is a start row held in the outbox until its recheck (see hold).
type heldRow struct {
	id    int64
	until time.Time
}

// holdRows leases a batch of held rows until their rechecks (a
// coalesce.Func).
func (d *Dispatcher) holdRows(ctx context.Context, rows []heldRow) ([]struct{}, []error, error) {
	ids, until := make([]int64, len(rows)), make([]time.Time, len(rows))
	for i, r := range rows {
		ids[i], until[i] = r.id, r.until
	}
	if err := store.HoldOutbox(ctx, d.Pool, ids, until); err != nil {
		return nil, nil, err
	}
	return make([]struct{}, len(rows)), nil, nil
}

// heldBack says until when start row it waits in the outbox, at now,
// because the sender's breaker holds its endpoint (zero: it does not): its
// first attempt not made yet, or made and failed with a retry planned (o,
// or with o nil the outcome recorded on the row), as that retry would be
// held too. It waits until the endpoint's probe, spread
// (delivery.HeldWait), while an attempt still fits before the deadline;
// past that, or with no retry left, its workflow dead-letters it. With
// probe set (a failed first attempt's row that a round hands to its
// workflow when it is not held), a row whose retry is due takes the probe
// past the cool-down (activities.TakeProbe): one such row goes on, and the
// rows after it wait for that probe instead of each starting a workflow.
func (d *Dispatcher) heldBack(it outbox.Row, now time.Time, o *activities.SendOutcome, probe bool) time.Time {
	if it.EndpointID == "" {
		return time.Time{}
	}
	until := activities.HeldUntil(d.Sender, it.EndpointID, it.DeliveryID, now)
	if until.IsZero() && !probe {
		return time.Time{}
	}
	set := it.Settings.WithDefaults()
	last := set.LastStart(it.CreatedAt.Add(set.Deadline))
	if !now.Before(last) {
		return time.Time{}
	}
	if o == nil && it.Outcome != nil {
		var err error
		if o, err = recordedOutcome(it); err != nil {
			return time.Time{}
		}
	}
	if o != nil && (o.Err() != nil || !o.Result.Class.Retried() || o.Result.NextAttemptAt.IsZero()) {
		return time.Time{}
	}
	if probe && o != nil && !o.Result.NextAttemptAt.After(now.Add(set.RequestTimeout)) {
		until = activities.TakeProbe(d.Sender, it.EndpointID, it.DeliveryID, now, set.RequestTimeout)
	}
	if until.IsZero() {
		return time.Time{}
	}
	return delivery.HeldEnd(until, now, last, it.DeliveryID, 1)
}

// MissLead is how long before its retry is due a failed first attempt
// that got no answer is handed to its DeliveryWorkflow (see missHold).
const MissLead = time.Second

// missHold is until when f's row, whose first attempt got no answer
// (outcome o: a timeout, a refused or reset connection), waits in the
// outbox with its recorded outcome before its delivery goes to its
// workflow: MissLead before its retry is due, when that is within
// StartDelayMax (zero: it goes now). Its endpoint may have stopped
// answering: the requests sent to it meanwhile then get no answer either,
// the breaker opens, and the round that takes the row back holds it until
// the probe (heldBack), so an endpoint that went silent costs no workflow
// per delivery. Otherwise that round hands it off, its retry's remaining
// wait the run's start delay, and the retry goes at its time.
func missHold(a *activities.Activities, f first, now time.Time, o *activities.SendOutcome) time.Time {
	if f.row.Ordered() || o.Err() != nil || !o.Result.Class.Retried() || !activities.Unanswered(a, o.Result) {
		return time.Time{}
	}
	at := o.Result.NextAttemptAt.Add(-MissLead)
	if !at.After(now) || o.Result.NextAttemptAt.Sub(now) > StartDelayMax {
		return time.Time{}
	}
	return at
}

// busyRecheck is when f's first attempt, held back by a share in use, is
// tried again.
func busyRecheck(f first) time.Time {
	return time.Now().Add(delivery.Jitter(delivery.BusyRecheck, f.row.DeliveryID, 1))
}
