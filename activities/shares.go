package activities

import (
	"cmp"
	"sync"
)

// Defaults of Shares.
const (
	// EndpointShareDefault is how many requests one endpoint may have open
	// from one worker at once.
	EndpointShareDefault = 256
	// SendCapacityDefault is how many requests one worker holds open at
	// once, over all endpoints. An open request costs a goroutine and a
	// socket, not a Temporal task slot.
	SendCapacityDefault = 8192
)

// Shares bounds a worker's open requests per endpoint and in all, so one
// endpoint that answers slowly (or never, until the request timeout)
// cannot take the capacity every other endpoint's requests need. An attempt
// that finds its endpoint's share (or the worker) full sends nothing: it is
// not an attempt, and its delivery keeps its deadline (ClassEndpointBusy).
// max_in_flight remains the cluster-wide bound an endpoint's owner sets.
type Shares struct {
	// PerEndpoint is one endpoint's share. Defaults to EndpointShareDefault.
	PerEndpoint int
	// Total is the worker's capacity. Defaults to SendCapacityDefault.
	Total int

	mu    sync.Mutex
	open  map[string]int
	total int
}

// acquire takes one request of endpointID's share; release gives it back.
// ok is false when the share or the worker is full.
func (s *Shares) acquire(endpointID string) (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[string]int{}
	}
	if s.open[endpointID] >= cmp.Or(s.PerEndpoint, EndpointShareDefault) || s.total >= cmp.Or(s.Total, SendCapacityDefault) {
		return nil, false
	}
	s.open[endpointID]++
	s.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.open[endpointID]--; s.open[endpointID] == 0 {
				delete(s.open, endpointID)
			}
		})
	}, true
}

// Open reports the requests open now, in all and to endpointID.
func (s *Shares) Open(endpointID string) (total, endpoint int) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, s.open[endpointID]
}
