package dispatch

import (
	"context"
	"time"

	"hookrelay/activities"
	"hookrelay/store"
)

// startFirst starts f's DeliveryWorkflow now, at its first attempt's due
// time (Input.FirstDue), and deletes its row; the run makes the attempt at
// once. It holds one of its app's places (wlanes), kept by the run until
// its first task has run and begun the attempt (opened). When Temporal
// does not take it, the row waits in the outbox and a later round starts
// it.
func (d *Dispatcher) startFirst(ctx context.Context, f first) {
	ctx = context.WithoutCancel(ctx)
	held, err := d.heldRowsNow.Do(ctx, f.row.ID)
	if held || err != nil {
		d.wlanes.Leave(f.row.AppID) // no run: its app's place goes back
	}
	if err == nil && held {
		// Its endpoint was paused (or the delivery canceled) since the
		// claim: the row waits in the outbox, held, and the resume lets
		// it go with the others in order of acceptance.
		d.release(f.row.ID)
		d.firstHeld.Add(1)
		return
	}
	if err != nil {
		d.Logger.Warn("start row not read before its start; the row goes back to the outbox", "delivery_id", f.row.DeliveryID, "err", err)
		d.release(f.row.ID)
		return
	}
	opened := d.opened(f)
	err = d.start(ctx, f.row, nil, f.due)
	if err != nil {
		opened()
	}
	if err == nil {
		_, err = d.doneRows.Do(ctx, f.row.ID)
	}
	if err != nil {
		// Temporal is unreachable (or Postgres): the row waits in the
		// outbox a little, leased, and the next round after that tries
		// again; its deadline still counts from acceptance.
		d.Logger.Warn("delivery workflow not started yet; its row waits in the outbox", "delivery_id", f.row.DeliveryID, "err", err, "retry_in", StartRetry)
		d.hold(f, time.Now().Add(StartRetry))
	}
}

// openFirst is the app place of a run started in ModeWorkflow, until its
// first attempt begins (FirstBegun) or the place lapses.
type openFirst struct {
	app   string
	lapse *time.Timer
}

// WorkflowAppShareDefault is WorkflowAppShare's default: small enough that
// another app's run waits behind one app's first tasks for a fraction of a
// second on a small machine (docs/benchmarks.md, the noisy neighbour).
const WorkflowAppShareDefault = 32

// opened records the app place f's run holds (taken by sendFirst) from its
// start until its first task ran: given back by FirstBegun when the
// attempt begins (however long its receiver then takes: a slow receiver
// holds no place), or once the attempt could no longer be running (its run
// went to another worker, or its worker died). The returned func gives it
// back at once (the run did not start).
func (d *Dispatcher) opened(f first) (giveBack func()) {
	id, app := f.row.DeliveryID, f.row.AppID
	d.openMu.Lock()
	defer d.openMu.Unlock()
	if d.open == nil {
		d.open = map[string]*openFirst{}
	}
	if old, ok := d.open[id]; ok {
		// Started again (its row's delete failed after the first start):
		// one run, one place.
		old.lapse.Stop()
		d.wlanes.Leave(old.app)
	}
	o := &openFirst{app: app}
	d.open[id] = o
	o.lapse = time.AfterFunc(f.set.RequestTimeout+activities.RecordSlack+LeaseSlack, func() { d.FirstBegun(id) })
	return func() { d.FirstBegun(id) }
}

// FirstBegun gives back the app place of delivery id's run, started by
// this dispatcher in ModeWorkflow, once its first attempt began
// (activities.Activities.FirstBegun). Unknown IDs are ignored.
func (d *Dispatcher) FirstBegun(id string) {
	d.openMu.Lock()
	o, ok := d.open[id]
	delete(d.open, id)
	d.openMu.Unlock()
	if !ok {
		return
	}
	o.lapse.Stop()
	d.wlanes.Leave(o.app)
}

// StartRetry is how long a start row whose workflow could not be started
// waits in the outbox before a round takes it again.
const StartRetry = time.Second

// heldNow reads which of a batch of start rows are held or gone (a
// coalesce.Func; see store.OutboxHeld).
func (d *Dispatcher) heldNow(ctx context.Context, ids []int64) ([]bool, []error, error) {
	held, err := store.OutboxHeld(ctx, d.Pool, ids)
	if err != nil {
		return nil, nil, err
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		out[i] = held[id]
	}
	return out, nil, nil
}
