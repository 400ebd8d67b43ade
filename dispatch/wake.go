package dispatch

import (
	"context"
	"strconv"
	"sync"
	"time"

	"hookrelay/outbox"
)

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// wakeup holds the earliest time a NOTIFY asked for a round (zero: none):
// rows whose first attempts are due later wait in the outbox, so one round
// claims many.
type wakeup struct {
	mu     sync.Mutex
	at     time.Time
	signal chan struct{}
}

// Wake asks for a round by at. This process's API calls it once an
// ingest's rows committed without a NOTIFY (outbox.Published.Notified):
// the publish counted on the round of an unleased row it saw, and when
// that round had already claimed, its linger's look would be the first to
// find them. Woken, the dispatcher claims them once the round has ended
// and their claim time has come (at once, for a first wait of 0s).
func (d *Dispatcher) Wake(at time.Time) { d.waker().request(at) }

// waker is the dispatcher's wakeup, made on first use (Wake may come
// before Run).
func (d *Dispatcher) waker() *wakeup {
	d.roundsOnce.Do(func() { d.rounds = &wakeup{signal: make(chan struct{}, 1)} })
	return d.rounds
}

// request asks for a round by at.
func (w *wakeup) request(at time.Time) {
	w.mu.Lock()
	earlier := w.at.IsZero() || at.Before(w.at)
	if earlier {
		w.at = at
	}
	w.mu.Unlock()
	if !earlier {
		// The sleeper already wakes by w.at.
		return
	}
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// take clears the request a round is about to serve.
func (w *wakeup) take() {
	w.mu.Lock()
	w.at = time.Time{}
	w.mu.Unlock()
}

func (w *wakeup) next() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// due reports whether a requested round is due now.
func (w *wakeup) due() bool {
	at := w.next()
	return !at.IsZero() && !at.After(time.Now())
}

// sleep waits until until or the earliest requested round, whichever is
// first (never shorter than backoff after a failure); false when ctx ended.
func (w *wakeup) sleep(ctx context.Context, until time.Time, backoff time.Duration) bool {
	for {
		at := until
		if r := w.next(); !r.IsZero() && r.Before(at) {
			at = r
		}
		wait := time.Until(at)
		if wait <= 0 {
			wait = backoff
		}
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-w.signal:
			t.Stop()
			// A new request: wait again, for it if it is earlier.
		case <-t.C:
			return true
		}
	}
}

// listen turns NOTIFYs into requests for a round (by the time a payload
// names, or now); it reconnects after failures.
func (d *Dispatcher) listen(ctx context.Context, w *wakeup) {
	for ctx.Err() == nil {
		err := func() error {
			conn, err := d.Pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "LISTEN "+outbox.Channel); err != nil {
				return err
			}
			for {
				n, err := conn.Conn().WaitForNotification(ctx)
				if err != nil {
					conn.Conn().Close(context.Background()) //nolint:errcheck // discard the listening conn
					return err
				}
				at := time.Now()
				if ms, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
					at = time.UnixMilli(ms)
				}
				w.request(at)
			}
		}()
		if ctx.Err() != nil {
			return
		}
		d.Logger.Debug("outbox listener reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
