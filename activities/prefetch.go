package activities

import (
	"context"
	"sync"
	"time"

	"hookrelay/store"
)

// PrefetchFresh is how long a prefetched target may wait for its attempt;
// past it the attempt loads its own, so what it sends (the endpoint's state,
// its keys) is never older than this.
const PrefetchFresh = time.Second

// PrefetchTimeout bounds a carrier's PrefetchTargets.
const PrefetchTimeout = 5 * time.Second

// prefetched holds the targets a carrier loaded together, each taken once
// by its delivery's SendSigned in this worker process. It is only an
// optimisation: an attempt that finds nothing (another process, a retried
// task, a stale entry) loads its own target.
type prefetched struct {
	mu sync.Mutex
	m  map[string]prefetchedTarget
}

type prefetchedTarget struct {
	t  store.Target
	at time.Time
}

// put adds ts, loaded at now, dropping entries no longer fresh.
func (p *prefetched) put(ts []store.Target, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]prefetchedTarget{}
	}
	for id, e := range p.m {
		if now.Sub(e.at) > PrefetchFresh {
			delete(p.m, id)
		}
	}
	for _, t := range ts {
		p.m[t.DeliveryID] = prefetchedTarget{t: t, at: now}
	}
}

// take removes and returns the target of id when it is fresh at now.
func (p *prefetched) take(id string, now time.Time) (store.Target, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[id]
	if !ok {
		return store.Target{}, false
	}
	delete(p.m, id)
	return e.t, now.Sub(e.at) <= PrefetchFresh
}

// PrefetchTargets loads the targets of a carrier's deliveries in one
// statement for their first attempts, which take them from this process
// instead of each loading its own. It returns how many it loaded; an error
// only costs the optimisation.
func (a *Activities) PrefetchTargets(ctx context.Context, deliveryIDs []string) (int, error) {
	now := a.now()
	ts, err := a.Store.LoadTargets(ctx, deliveryIDs, now)
	if err != nil {
		return 0, err
	}
	a.targets.put(ts, now)
	return len(ts), nil
}

// loadTarget is the delivery's prefetched target, else its own load.
func (a *Activities) loadTarget(ctx context.Context, id string, now time.Time) (store.Target, error) {
	if t, ok := a.targets.take(id, now); ok {
		return t, nil
	}
	return a.Store.LoadTarget(ctx, id, now)
}
