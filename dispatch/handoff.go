package dispatch

import (
	"cmp"
	"context"
	"slices"
	"time"

	"hookrelay/activities"
	"hookrelay/outbox"
)

// handoffDue bounds how long after its acceptance the first attempt of a
// row leased by its publish is due: such a row's earliest first wait is
// at most outbox.ClaimGuard, so its latest, with jitter, is below twice
// that. The rest of the bound is the time from the commit to Take.
const handoffDue = 2 * outbox.ClaimGuard

// handoffLease is how long past its request timeout a row leased by its
// publish stays leased, counted from the publish: as a round's lease
// (first.leaseUntil), from a due time at most handoffDue away.
const handoffLease = handoffDue + QueueMax + activities.RecordSlack + LeaseSlack

// Handoff says whether an ingest of app in this process may lease its new
// start rows to this dispatcher's Sender (outbox.Handoff) and pass them to
// Take once committed: the first attempts then go out with no round,
// NOTIFY or claim between the commit and the request. ok is false when the
// Sender is off (none, carriers in use), the dispatcher is not running,
// the Sender holds HeldMax rows, or app's first attempts already queue for
// its share (AppShare): the rows go to the rounds then, which claim every
// app's rows in turn, so a flooding app's ingests do not take the places
// that free up before another app's rows get theirs.
func (d *Dispatcher) Handoff(app string) (h outbox.Handoff, ok bool) {
	if d.current() == ModeCarrier {
		return h, false
	}
	d.runMu.RLock()
	defer d.runMu.RUnlock()
	if d.runCtx == nil || d.held.Load() >= d.heldMax() || d.lanes.Waiting(app) > 0 {
		return h, false
	}
	skip, until := activities.OpenEndpoints(d.Sender, time.Now())
	return outbox.Handoff{Lease: handoffLease, Skip: skip, Until: until}, true
}

// Take makes the first attempts of rows, leased to this dispatcher by a
// publish in its process that committed (see Handoff), as a round makes
// those it claimed: each at its own due time, in its own goroutine. A row
// it cannot take (the dispatcher stopped, its lease too short for its
// plan, the sender's HeldMax places taken) goes back to the outbox for the
// rounds before Take returns; one whose endpoint the breaker now holds
// waits there until its probe. Rows the publish held until their
// endpoint's probe (Held) are only counted (see Held).
func (d *Dispatcher) Take(rows []outbox.Leased) {
	held := func(r outbox.Leased) bool { return r.Held }
	if slices.ContainsFunc(rows, held) {
		n := len(rows)
		rows = slices.DeleteFunc(slices.Clone(rows), held)
		d.firstHeld.Add(int64(n - len(rows)))
	}
	if len(rows) == 0 {
		return
	}
	d.runMu.RLock()
	ctx := d.runCtx
	t := d.sort(rows, ctx != nil, time.Now())
	if len(t.send) > 0 {
		// Under runMu: Run waits for first attempts only once no more can
		// be added. Concurrent ingests share HeldMax's places.
		k := d.reserve(len(t.send))
		for _, f := range t.send[k:] {
			d.releaseApp(f.row.AppID)
			t.back = append(t.back, f.row.ID)
		}
		d.goFirsts(ctx, t.send[:k])
		d.Metrics.Handoffs(k)
		d.taken.Add(int64(k))
	}
	// Held rows (sorted only while running) are held under runMu, while
	// Run's heldRows still takes them.
	for i, f := range t.held {
		d.hold(f, t.heldAt[i])
	}
	d.runMu.RUnlock()
	for _, id := range t.back {
		d.release(id)
	}
}

// reserve takes up to n of the sender's HeldMax places (see held) and
// returns how many it took.
func (d *Dispatcher) reserve(n int) int {
	for {
		cur := d.held.Load()
		k := min(int64(n), d.heldMax()-cur)
		if k <= 0 {
			return 0
		}
		if d.held.CompareAndSwap(cur, cur+k) {
			return int(k)
		}
	}
}

// taken is what Take does with the rows it is given.
type taken struct {
	// send are sent; back (IDs) go back to the rounds; held wait in the
	// outbox until heldAt.
	send, held []first
	back       []int64
	heldAt     []time.Time
}

// sort sorts rows given to Take at now, running or not.
func (d *Dispatcher) sort(rows []outbox.Leased, running bool, now time.Time) taken {
	var t taken
	mode := d.current()
	for _, r := range rows {
		f, ok := planFirst(r.Row, now)
		if !running || !ok || f.leaseUntil(now).After(r.Until) || mode == ModeCarrier {
			t.back = append(t.back, r.ID)
			continue
		}
		f.workflow = mode == ModeWorkflow
		if at := d.heldBack(r.Row, now, nil, false); !f.workflow && !at.IsZero() {
			t.held, t.heldAt = append(t.held, f), append(t.heldAt, at)
			continue
		}
		if !d.holdApp(r.AppID) {
			t.back = append(t.back, r.ID)
			continue
		}
		t.send = append(t.send, f)
	}
	return t
}

// holdApp takes one of app's AppHeldMax places for a start row the
// dispatcher is about to hold; false when app holds them all.
func (d *Dispatcher) holdApp(app string) bool {
	d.appMu.Lock()
	defer d.appMu.Unlock()
	limit := d.AppHeldMax
	if limit <= 0 {
		limit = max(int(d.heldMax())/AppHeldShare, 1)
	}
	if d.appHeld[app] >= limit {
		return false
	}
	if d.appHeld == nil {
		d.appHeld = map[string]int{}
	}
	d.appHeld[app]++
	return true
}

// releaseApp gives back one of app's places (see holdApp).
func (d *Dispatcher) releaseApp(app string) {
	d.appMu.Lock()
	defer d.appMu.Unlock()
	if d.appHeld[app]--; d.appHeld[app] <= 0 {
		delete(d.appHeld, app)
	}
}

// heldMax is HeldMax with its default.
func (d *Dispatcher) heldMax() int64 { return int64(cmp.Or(d.HeldMax, HeldMaxDefault)) }

// running marks the dispatcher running on ctx (Take's first attempts run
// on it) until the returned func is called.
func (d *Dispatcher) running(ctx context.Context) (stop func()) {
	d.runMu.Lock()
	d.runCtx = ctx
	d.runMu.Unlock()
	return func() {
		d.runMu.Lock()
		d.runCtx = nil
		d.runMu.Unlock()
	}
}
