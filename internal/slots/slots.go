// Package slots holds Keyed: a bounded number of places per key, taken in
// the order they were asked for. A caller that finds its key's places in
// use waits for one to be handed to it (woken, not polling) until a time
// it chooses.
package slots

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Keyed bounds the places in use per key to Per. Its zero value is not
// usable; make one with New.
type Keyed struct {
	per  int
	mu   sync.Mutex
	open map[string]int
	wait map[string][]chan struct{}
}

// New makes a Keyed of per places per key (at least 1).
func New(per int) *Keyed {
	return &Keyed{per: max(per, 1), open: map[string]int{}, wait: map[string][]chan struct{}{}}
}

// Enter takes one of key's places, waiting for one until ctx ends or until
// passes (a zero or past until does not wait); ok is false when none came.
// Every place taken is given back with Leave.
func (k *Keyed) Enter(ctx context.Context, key string, until time.Time) (ok bool) {
	k.mu.Lock()
	if k.open[key] < k.per {
		k.open[key]++
		k.mu.Unlock()
		return true
	}
	wait := time.Until(until)
	if wait <= 0 {
		k.mu.Unlock()
		return false
	}
	ch := make(chan struct{})
	k.wait[key] = append(k.wait[key], ch)
	k.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if i := slices.Index(k.wait[key], ch); i >= 0 {
		k.wait[key] = slices.Delete(k.wait[key], i, i+1)
		return false
	}
	return true // handed a place just as the wait ended
}

// Leave hands key's place to its oldest waiter, or frees it.
func (k *Keyed) Leave(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if q := k.wait[key]; len(q) > 0 {
		close(q[0])
		k.wait[key] = q[1:]
		return
	}
	if k.open[key]--; k.open[key] <= 0 {
		delete(k.open, key)
		delete(k.wait, key)
	}
}

// Waiting is how many callers wait for one of key's places now.
func (k *Keyed) Waiting(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.wait[key])
}

// Open is the places of key in use now.
func (k *Keyed) Open(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.open[key]
}
