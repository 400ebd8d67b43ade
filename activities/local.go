package activities

import (
	"cmp"
	"sync"
	"time"
)

// Defaults of LocalFirsts.
const (
	// LocalFirstsPerEndpoint is how many local first attempts one endpoint
	// may have open in a worker at once.
	LocalFirstsPerEndpoint = 4
	// LocalFirstsTotal is how many local first attempts a worker has open
	// at once, over all endpoints: well under its workflow task slots, so
	// the slots a slow receiver holds never stop another workflow's task.
	LocalFirstsTotal = 32
	// LocalSlowAfter is how long an answer may take before its endpoint's
	// first attempts stop being local for LocalSlowFor.
	LocalSlowAfter = 500 * time.Millisecond
	// LocalSlowFor is how long an endpoint that answered slowly (or not at
	// all) gets regular, asynchronous first attempts.
	LocalSlowFor = time.Minute
)

// LocalFirsts decides which new deliveries make their first attempt as a
// local activity in their workflow's first task (workflows.Input.FirstLocal):
// the cheapest shape Temporal allows, one workflow task for a delivery that
// succeeds at once. A local activity holds a workflow task slot for the
// length of its request, so only endpoints that answered fast lately get
// one, and few at a time; every other first attempt is a regular activity
// that the worker completes asynchronously, holding no slot while it waits.
// A place is given back when its attempt ends in this worker, or lapses at
// the time its reservation named (its run went to another worker).
type LocalFirsts struct {
	// PerEndpoint defaults to LocalFirstsPerEndpoint, Total to
	// LocalFirstsTotal; a negative Total turns local first attempts off.
	PerEndpoint, Total int

	mu         sync.Mutex
	open       map[string]localPlace // by delivery ID
	byEndpoint map[string]int
	slow       map[string]time.Time // endpoint → slow until
}

type localPlace struct {
	endpoint string
	until    time.Time
}

// Reserve takes a place for delivery's local first attempt to endpoint at
// now, held until until at the latest; false: its first attempt is a
// regular activity.
func (l *LocalFirsts) Reserve(endpoint, delivery string, now, until time.Time) bool {
	if l == nil || l.Total < 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open, l.byEndpoint, l.slow = map[string]localPlace{}, map[string]int{}, map[string]time.Time{}
	}
	if s, ok := l.slow[endpoint]; ok {
		if now.Before(s) {
			return false
		}
		delete(l.slow, endpoint)
	}
	if len(l.open) >= cmp.Or(l.Total, LocalFirstsTotal) || l.byEndpoint[endpoint] >= cmp.Or(l.PerEndpoint, LocalFirstsPerEndpoint) {
		l.lapse(now)
	}
	if len(l.open) >= cmp.Or(l.Total, LocalFirstsTotal) || l.byEndpoint[endpoint] >= cmp.Or(l.PerEndpoint, LocalFirstsPerEndpoint) {
		return false
	}
	if _, ok := l.open[delivery]; ok {
		return true
	}
	l.open[delivery] = localPlace{endpoint: endpoint, until: until}
	l.byEndpoint[endpoint]++
	return true
}

// Cancel gives back delivery's place when its run did not start.
func (l *LocalFirsts) Cancel(delivery string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free(delivery)
}

// settle gives back the place of req's delivery, if it held one, once
// req ended at now with res, and notes how fast its endpoint answered: an
// attempt that sent nothing (res.StartedAt zero, or a held class) says
// nothing of it.
func (l *LocalFirsts) settle(req SendRequest, res SendResult, now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free(req.DeliveryID)
	if res.StartedAt.IsZero() || res.Class.Held() || res.Class == ClassEndpointDisabled {
		return
	}
	if l.slow == nil {
		l.open, l.byEndpoint, l.slow = map[string]localPlace{}, map[string]int{}, map[string]time.Time{}
	}
	if res.StatusCode == 0 || time.Duration(res.DurationMS)*time.Millisecond > LocalSlowAfter {
		if len(l.slow) >= localSlowMax {
			for e, until := range l.slow {
				if !now.Before(until) {
					delete(l.slow, e)
				}
			}
		}
		if len(l.slow) < localSlowMax {
			l.slow[req.EndpointID] = now.Add(LocalSlowFor)
		}
		return
	}
	delete(l.slow, req.EndpointID)
}

// localSlowMax bounds the endpoints LocalFirsts remembers as slow; past it,
// a slow endpoint is not remembered (its first attempts stay local, within
// PerEndpoint and Total).
const localSlowMax = 10000

func (l *LocalFirsts) free(delivery string) {
	p, ok := l.open[delivery]
	if !ok {
		return
	}
	delete(l.open, delivery)
	if l.byEndpoint[p.endpoint]--; l.byEndpoint[p.endpoint] <= 0 {
		delete(l.byEndpoint, p.endpoint)
	}
}

// lapse frees the places whose time passed.
func (l *LocalFirsts) lapse(now time.Time) {
	for id, p := range l.open {
		if !now.Before(p.until) {
			l.free(id)
		}
	}
}
