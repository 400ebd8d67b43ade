package activities_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
)

// TestBreakerHoldsAnEndpointThatStoppedAnswering: once Misses requests in
// a row to an endpoint got no answer, its attempts send nothing and record
// nothing (ClassEndpointBusy, with when the endpoint is tried again); a
// sender's first attempt does not wait for it, a workflow's waits in the
// worker and then probes; a probe with no answer holds the endpoint again,
// one that gets an answer lets every attempt out.
func TestBreakerHoldsAnEndpointThatStoppedAnswering(t *testing.T) {
	t.Parallel()
	r := newSilentRig(t, &activities.Breaker{Misses: 2, Cooldown: 200 * time.Millisecond})
	a, st, silent, hits := r.a, r.st, &r.silent, &r.hits
	ctx := context.Background()
	req := activities.SendRequest{DeliveryID: "dlv_1", EndpointID: st.target.EndpointID, Cycle: 1, Number: 1, Timeout: 50 * time.Millisecond}
	for range 2 {
		res, err := a.SendSigned(ctx, req)
		require.NoError(t, err)
		require.Equal(t, activities.ClassRetryable, res.Class, res.Error)
	}
	held := func(res activities.SendResult, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, activities.ClassEndpointBusy, res.Class)
		require.False(t, res.HeldUntil.IsZero(), "a held attempt does not say until when")
		require.Contains(t, res.Error, "stopped answering")
	}
	held(a.SendSigned(ctx, req))
	held(activities.SendFirst(ctx, a, req, 7, time.Now().Add(time.Hour)))
	require.EqualValues(t, 2, hits.Load(), "a held attempt was sent")
	require.Len(t, st.records, 2, "a held attempt was recorded")
	// A workflow's attempt waits for the cool-down and probes: no answer.
	res, err := activities.SendWaiting(ctx, a, req, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, activities.ClassRetryable, res.Class, res.Error)
	require.EqualValues(t, 3, hits.Load())
	held(a.SendSigned(ctx, req))
	// The endpoint answers again: the next probe closes the breaker.
	silent.Store(false)
	res, err = activities.SendWaiting(ctx, a, req, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
	for range 3 {
		res, err = a.SendSigned(ctx, req)
		require.NoError(t, err)
		require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
	}
	require.EqualValues(t, 7, hits.Load())
	require.Len(t, st.records, 7)
}

// TestBreakerWaitEndsWhenTheWorkerStops: a workflow's attempt waiting for
// an open breaker sends nothing once the worker stops.
func TestBreakerWaitEndsWhenTheWorkerStops(t *testing.T) {
	t.Parallel()
	srv := silentServer(t, func(http.ResponseWriter) bool { return false })
	st := &flakyStore{target: target(t, 200)}
	st.target.URL = srv.URL
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
		Breaker: &activities.Breaker{Misses: 1, Cooldown: time.Hour}}
	ctx := context.Background()
	req := activities.SendRequest{DeliveryID: "dlv_1", EndpointID: st.target.EndpointID, Cycle: 1, Number: 1, Timeout: 50 * time.Millisecond}
	res, err := a.SendSigned(ctx, req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassRetryable, res.Class)
	done := make(chan activities.SendResult, 1)
	go func() {
		res, _ := activities.SendWaiting(ctx, a, req, time.Now().Add(2*time.Hour))
		done <- res
	}()
	stopped, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	a.Open.Drain(stopped)
	select {
	case res := <-done:
		require.Equal(t, activities.ClassEndpointBusy, res.Class)
	case <-stopped.Done():
		t.Fatal("the wait for an open breaker outlived the worker's stop")
	}
	require.Len(t, st.records, 1)
}

// silentRig is an Activities with a breaker and a receiver that never
// answers while silent is set (it starts set); hits counts its requests.
type silentRig struct {
	a      *activities.Activities
	st     *flakyStore
	silent atomic.Bool
	hits   atomic.Int32
}

func newSilentRig(t *testing.T, b *activities.Breaker) *silentRig {
	r := &silentRig{}
	r.silent.Store(true)
	srv := silentServer(t, func(w http.ResponseWriter) bool {
		r.hits.Add(1)
		if r.silent.Load() {
			return false
		}
		w.WriteHeader(http.StatusNoContent)
		return true
	})
	r.st = &flakyStore{target: target(t, 200)}
	r.st.target.URL = srv.URL
	r.a = &activities.Activities{Store: r.st, HTTP: activities.NewHTTPClient(false), UserAgent: "test", Breaker: b}
	return r
}

// silentServer is a receiver that answers when answer says it did, and
// otherwise until the client gives up (or the test ends).
func silentServer(t *testing.T, answer func(http.ResponseWriter) bool) *httptest.Server {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body read, the server notices the client hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		if answer(w) {
			return
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	return srv
}

// TestBreakerHoldsAnAttemptThatWaitedForItsShare: an attempt that waited
// for a place in its endpoint's share checks the breaker again once it
// has one: the requests it waited for may have opened it.
func TestBreakerHoldsAnAttemptThatWaitedForItsShare(t *testing.T) {
	t.Parallel()
	r := newSilentRig(t, &activities.Breaker{Misses: 1, Cooldown: time.Hour})
	r.a.Shares = &activities.Shares{PerEndpoint: 1}
	a, st, hits := r.a, r.st, &r.hits
	ctx := context.Background()
	ep := st.target.EndpointID
	first := make(chan activities.SendResult, 1)
	go func() {
		res, _ := a.SendSigned(ctx, activities.SendRequest{DeliveryID: "dlv_1", EndpointID: ep, Cycle: 1, Number: 1, Timeout: 300 * time.Millisecond})
		first <- res
	}()
	require.Eventually(t, func() bool { return hits.Load() == 1 }, 10*time.Second, time.Millisecond)
	second := make(chan activities.SendResult, 1)
	go func() {
		res, _ := activities.SendWaiting(ctx, a, activities.SendRequest{DeliveryID: "dlv_2", EndpointID: ep, Cycle: 1, Number: 1, Timeout: 300 * time.Millisecond}, time.Now().Add(time.Minute))
		second <- res
	}()
	require.Eventually(t, func() bool { return activities.ShareWaiting(a.Shares, ep) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, activities.ClassRetryable, (<-first).Class)
	res := <-second
	require.Equal(t, activities.ClassEndpointBusy, res.Class, res.Error)
	require.False(t, res.HeldUntil.IsZero())
	require.EqualValues(t, 1, hits.Load(), "an attempt that waited for its share was sent to an endpoint the breaker had opened on")
	require.Len(t, st.records, 1)
}

// TestBreakerWakesWaitersWhenAProbeGetsAnAnswer: workflows' attempts
// waiting on an open breaker go as soon as a probe gets an answer, not at
// the end of the probe's time.
func TestBreakerWakesWaitersWhenAProbeGetsAnAnswer(t *testing.T) {
	t.Parallel()
	r := newSilentRig(t, &activities.Breaker{Misses: 1, Cooldown: 300 * time.Millisecond})
	a, silent, hits := r.a, &r.silent, &r.hits
	ctx := context.Background()
	ep := r.st.target.EndpointID
	res, err := a.SendSigned(ctx, activities.SendRequest{DeliveryID: "dlv_0", EndpointID: ep, Cycle: 1, Number: 1, Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, activities.ClassRetryable, res.Class)
	silent.Store(false)
	// A probe's time is its request timeout and more: an hour here, so a
	// waiter that is not woken by the probe's answer gives up at its own
	// bound, 30 s on, with nothing sent.
	results := make(chan activities.SendResult, 3)
	for i := range 3 {
		go func() {
			req := activities.SendRequest{DeliveryID: fmt.Sprintf("dlv_%d", i+1), EndpointID: ep, Cycle: 1, Number: 1, Timeout: time.Hour}
			res, _ := activities.SendWaiting(ctx, a, req, time.Now().Add(30*time.Second))
			results <- res
		}()
	}
	for range 3 {
		res := <-results
		require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
	}
	require.EqualValues(t, 4, hits.Load())
}
