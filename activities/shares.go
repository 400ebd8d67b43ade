package activities

import (
	"cmp"
	"context"
	"sync"
	"time"

	"hookrelay/internal/slots"
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
// that finds its endpoint's share full waits in the worker for a place,
// handed to it when one frees (a goroutine, not a Temporal task, and
// attempts of one endpoint in the order they asked), up to a bound
// (attempt.ShareWaitMax for a workflow's attempt); one
// that finds none in time, or finds the worker full, sends nothing: it is
// not an attempt, and its delivery keeps its deadline (ClassEndpointBusy).
// max_in_flight remains the cluster-wide bound an endpoint's owner sets.
type Shares struct {
	// PerEndpoint is one endpoint's share. Defaults to EndpointShareDefault.
	PerEndpoint int
	// Total is the worker's capacity. Defaults to SendCapacityDefault.
	Total int

	once     sync.Once
	endpoint *slots.Keyed
	mu       sync.Mutex
	total    int
}

// acquire takes one request of endpointID's share, waiting for a place
// until ctx or stop (the worker stops) ends or until passes; release
// gives it back. waited is true when it waited for a place; ok is false
// when no place came, or the worker is full.
func (s *Shares) acquire(ctx, stop context.Context, endpointID string, until time.Time) (release func(), waited, ok bool) {
	if s == nil {
		return func() {}, false, true
	}
	// A place free now is taken without waiting (there is no waiter then:
	// places are handed to waiters, never freed past them).
	if !s.places().Enter(ctx, endpointID, time.Time{}) {
		if !time.Now().Before(until) {
			return nil, false, false
		}
		wctx, release := untilStop(ctx, stop)
		defer release()
		if !s.places().Enter(wctx, endpointID, until) {
			return nil, true, false
		}
		waited = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total >= cmp.Or(s.Total, SendCapacityDefault) {
		s.endpoint.Leave(endpointID)
		return nil, waited, false
	}
	s.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.total--
			s.mu.Unlock()
			s.endpoint.Leave(endpointID)
		})
	}, waited, true
}

// places are the endpoints' shares, made on first use.
func (s *Shares) places() *slots.Keyed {
	s.once.Do(func() { s.endpoint = slots.New(cmp.Or(s.PerEndpoint, EndpointShareDefault)) })
	return s.endpoint
}
