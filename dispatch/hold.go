package dispatch

// A sequence's hold: one RunSequence at a time sends a sequence (see
// store.LeaseSequence), and this process's dispatcher rings its lingering
// runs.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"hookrelay/store"
	"hookrelay/workflows"
)

// holdSequence heartbeats the run and renews its hold on the sequence
// until ctx ends; a hold lost (another run took the sequence) stops the
// run.
func (d *Dispatcher) holdSequence(ctx context.Context, stop context.CancelCauseFunc, in workflows.SequenceRun, holder string, holding *atomic.Bool) {
	t := time.NewTicker(sequenceBeat)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		activity.RecordHeartbeat(ctx)
		if !holding.Load() {
			renewed = time.Now()
			continue
		}
		if time.Since(renewed) > sequenceHold-2*sequenceBeat {
			// Renewals failed: the hold could lapse before the next one
			// lands and another run take the sequence, so this one stops.
			stop(fmt.Errorf("sequence %s/%s: hold not renewed since %s", in.EndpointID, in.OrderingKey, renewed.Format(time.RFC3339)))
			return
		}
		asked := time.Now()
		rctx, cancel := context.WithTimeout(ctx, sequenceBeat)
		ok, err := store.RenewSequence(rctx, d.Pool, in.EndpointID, in.OrderingKey, holder, sequenceHold)
		cancel()
		switch {
		case err == nil && !ok && holding.Load():
			stop(errors.New("sequence " + in.EndpointID + "/" + in.OrderingKey + " taken by another run"))
			return
		case err == nil:
			renewed = asked
		}
	}
}

// bells ring the runs of this process that linger on an empty sequence
// when the dispatcher claims a row of it (see RunSequence).
type bells struct {
	mu sync.Mutex
	by map[string]chan struct{}
}

// ring registers a lingering-to-be run of sequence id.
func (b *bells) ring(id string) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by == nil {
		b.by = map[string]chan struct{}{}
	}
	ch := make(chan struct{}, 1)
	b.by[id] = ch
	return ch
}

// drop forgets ch, the run of sequence id.
func (b *bells) drop(id string, ch chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by[id] == ch {
		delete(b.by, id)
	}
}

// wake rings sequence id's run, if it is in this process.
func (b *bells) wake(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.by[id] <- struct{}{}:
	default:
	}
}
