package activities

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBreakerOpensOnMissesInARow: only Misses requests in a row with no
// answer open the breaker; any answer between them starts the count again.
func TestBreakerOpensOnMissesInARow(t *testing.T) {
	b := &Breaker{Misses: 3}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	at := t0
	next := func() time.Time { at = at.Add(time.Millisecond); return at }
	miss := func() time.Time {
		sent := next()
		opened, _ := b.observe("ep", false, sent, sent)
		return opened
	}
	require.Zero(t, miss())
	require.Zero(t, miss())
	sent := next()
	_, closed := b.observe("ep", true, sent, sent)
	require.False(t, closed, "a closed breaker is not closed again")
	require.Zero(t, miss())
	require.Zero(t, miss())
	_, ok := b.admit("ep", "dlv", at, time.Second)
	require.True(t, ok, "two misses after an answer opened the breaker")
	opened := miss()
	require.Equal(t, at.Add(BreakerCooldown), opened)
	until, ok := b.admit("ep", "dlv", opened.Add(-time.Millisecond), time.Second)
	require.False(t, ok)
	require.Equal(t, opened, until)
	_, ok = b.admit("other", "dlv", at, time.Second)
	require.True(t, ok, "another endpoint is held")
}

// TestBreakerCountsBySendTime: a burst's timeouts come back together, one
// timeout after they left and after the answers of the requests sent
// between them; they are not a run of misses. Misses sent after the last
// answered request are.
func TestBreakerCountsBySendTime(t *testing.T) {
	b := &Breaker{Misses: 3}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// Sent at 0..9 ms: the odd ones answered at once, the even ones time
	// out at 500 ms.
	for i := 1; i < 10; i += 2 {
		b.observe("ep", true, ms(i), ms(i))
	}
	for i := 0; i < 10; i += 2 {
		opened, _ := b.observe("ep", false, ms(i), ms(500+i))
		require.Zero(t, opened, "a burst's timeouts opened the breaker")
	}
	// Sent after the last answer: a run.
	for i := range 3 {
		opened, _ := b.observe("ep", false, ms(600+i), ms(1100+i))
		require.Equal(t, i == 2, !opened.IsZero(), "miss %d", i)
	}
}

// TestBreakerForgetsIdleCircuits: a closed circuit that heard of nothing
// for forgetAfter is dropped; an open one is kept.
func TestBreakerForgetsIdleCircuits(t *testing.T) {
	b := &Breaker{Misses: 1}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	b.observe("answered", true, t0, t0)
	b.observe("silent", false, t0, t0)
	later := t0.Add(forgetAfter + time.Second)
	b.observe("other", true, later, later)
	require.NotContains(t, b.circuits, "answered")
	require.Contains(t, b.circuits, "silent")
	require.Contains(t, b.circuits, "other")
}

// TestBreakerProbesOneAtATime: past the cool-down one attempt probes;
// while it is out the others are held until its end; a probe with no
// answer opens the breaker for twice as long, up to BreakerCooldownMax; an
// answer closes it for everyone.
func TestBreakerProbesOneAtATime(t *testing.T) {
	b := &Breaker{Misses: 1, Cooldown: time.Minute}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	opened, _ := b.observe("ep", false, t0, t0)
	require.Equal(t, t0.Add(time.Minute), opened)
	// Requests sent before the breaker opened change nothing.
	late, _ := b.observe("ep", false, t0, t0.Add(30*time.Second))
	require.Zero(t, late)
	probe := opened
	_, ok := b.admit("ep", "dlv", probe, 10*time.Second)
	require.True(t, ok, "no probe past the cool-down")
	until, ok := b.admit("ep", "dlv-2", probe.Add(time.Second), 10*time.Second)
	require.False(t, ok, "a second probe while one is out")
	require.Equal(t, probe.Add(10*time.Second), until)
	// The probe's own attempt, checked again after a wait for its
	// endpoint's share, is still the probe.
	_, ok = b.admit("ep", "dlv", probe.Add(2*time.Second), 10*time.Second)
	require.True(t, ok, "the probe held itself")
	// The probe gets no answer: open for twice as long.
	end := probe.Add(10 * time.Second)
	opened, _ = b.observe("ep", false, probe, end)
	require.Equal(t, end.Add(2*time.Minute), opened)
	// Doubling stops at BreakerCooldownMax.
	for range 10 {
		at := opened
		_, ok = b.admit("ep", "dlv", at, time.Second)
		require.True(t, ok)
		opened, _ = b.observe("ep", false, at, at)
	}
	_, ok = b.admit("ep", "dlv", opened.Add(-time.Millisecond), time.Second)
	require.False(t, ok)
	require.Equal(t, BreakerCooldownMax, b.circuits["ep"].cooldown)
	// A probe that never reports (nothing was sent) lapses: another
	// attempt probes after it.
	_, ok = b.admit("ep", "dlv", opened, time.Second)
	require.True(t, ok)
	_, ok = b.admit("ep", "dlv-2", opened.Add(time.Second), time.Second)
	require.True(t, ok, "a lapsed probe kept the breaker half-open forever")
	// An answer closes it.
	_, closed := b.observe("ep", true, opened, opened.Add(time.Second))
	require.True(t, closed)
	for range 3 {
		_, ok = b.admit("ep", "dlv", opened.Add(time.Second), time.Second)
		require.True(t, ok, "a closed breaker held an attempt")
	}
}

// TestBreakerOff: Misses 0 (and a nil Breaker) never hold anything.
func TestBreakerOff(t *testing.T) {
	now := time.Now()
	for _, b := range []*Breaker{nil, {}} {
		for range 10 {
			b.observe("ep", false, now, now)
		}
		_, ok := b.admit("ep", "dlv", now, time.Second)
		require.True(t, ok)
	}
}

// TestAnswer: what counts as the endpoint's answer, and what says nothing
// of it.
func TestAnswer(t *testing.T) {
	for _, c := range []struct {
		res              SendResult
		answered, counts bool
	}{
		{SendResult{StatusCode: 200, Class: ClassSuccess}, true, true},
		{SendResult{StatusCode: 503, Class: ClassRetryable}, true, true},
		{SendResult{StatusCode: 200, Class: ClassRetryable, Error: "timeout: response body not complete"}, true, true},
		{SendResult{Class: ClassRetryable, Error: "timeout: no complete response within the request timeout"}, false, true},
		{SendResult{Class: ClassRetryable, Error: "connection refused"}, false, true},
		{SendResult{Class: ClassPermanent, Error: "blocked address"}, false, false},
		{SendResult{Class: ClassProxy, Error: "egress proxy unreachable"}, false, false},
	} {
		answered, counts := answer(c.res)
		require.Equal(t, c.answered, answered, "%+v", c.res)
		require.Equal(t, c.counts, counts, "%+v", c.res)
	}
}

// TestHeldWakesOnACloseAfterAnOpenItRacedWith: the breaker opens between
// held's watch (which found it closed: no channel) and its admit (which
// finds it open), then an answer to a request sent before it opened closes
// it. The waiting attempt must go at once, as any attempt waiting on an
// open breaker does; instead it sleeps to its bound (or the cool-down's
// end) and is held, nothing sent.
func TestHeldWakesOnACloseAfterAnOpenItRacedWith(t *testing.T) {
	t.Parallel()
	b := &Breaker{Misses: 1, Cooldown: time.Hour}
	sent := time.Now()
	var calls atomic.Int32
	a := &Activities{Breaker: b}
	a.Now = func() time.Time {
		now := time.Now()
		switch calls.Add(1) {
		case 1:
			// held has asked watch already (closed: nil); its admit comes
			// next, with this time. A request opens the breaker now.
			b.observe("ep", false, now, now)
		case 2:
			// After admit found it open: a request sent earlier (before
			// the one that opened it, after the last answer) is answered:
			// the endpoint is there.
			b.observe("ep", true, sent, now)
		}
		return now
	}
	// The wait is bounded far off (the cool-down is an hour); ctx bounds
	// the test: an attempt not woken by the close is held when it ends.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := SendRequest{DeliveryID: "dlv_1", EndpointID: "ep", Number: 1, Timeout: time.Second}
	res, held := a.held(ctx, req, "ep", true, time.Now().Add(time.Hour))
	require.False(t, held, "an attempt waiting on the breaker slept through its close: %s", res.Error)
}

// TestHeldWaitersUnderChurn: many attempts wait on a breaker that opens
// and closes under them; none deadlocks, none outlives its bound, and the
// worker's stop ends every wait (run with -race).
func TestHeldWaitersUnderChurn(t *testing.T) {
	t.Parallel()
	b := &Breaker{Misses: 1, Cooldown: 5 * time.Millisecond}
	a := &Activities{Breaker: b}
	var wg sync.WaitGroup
	stopChurn := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopChurn:
				return
			default:
			}
			now := time.Now()
			b.observe("ep", i%3 == 0, now, now)
			_ = HeldUntil(a, "ep", "dlv_0", now)
		}
	})
	for i := range 64 {
		wg.Go(func() {
			req := SendRequest{DeliveryID: fmt.Sprintf("dlv_%d", i), EndpointID: "ep", Number: 1, Timeout: time.Second}
			for range 50 {
				a.held(context.Background(), req, "ep", true, time.Now().Add(20*time.Millisecond))
			}
		})
	}
	// Waiters parked with a far bound end at the worker's stop.
	parked := make(chan bool, 8)
	for i := range 8 {
		go func() {
			req := SendRequest{DeliveryID: fmt.Sprintf("parked_%d", i), EndpointID: "other", Number: 1, Timeout: time.Hour}
			_, held := a.held(context.Background(), req, "other", true, time.Now().Add(time.Hour))
			parked <- held
		}()
	}
	now := time.Now()
	b.observe("other", false, now, now) // opens "other" for 5 ms, then a probe ...
	wg.Wait()
	close(stopChurn)
	churn.Wait()
	a.Open.Drain(context.Background())
	for i := range 8 {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatalf("parked waiter %d of 8 did not end at the worker's stop", i+1)
		}
	}
	// The breaker still works after the churn: "ep" answers, so it is open
	// to no one.
	now = time.Now()
	b.observe("ep", true, now, now)
	require.True(t, HeldUntil(a, "ep", "dlv_after", now).IsZero(), "an endpoint that answered is not held")
}

// TestOpenEndpointsListsOpenBreakers: an endpoint is listed from the miss
// that opens its breaker until an answer closes it, through its failed
// probes, each with until when a new delivery's attempt is held: the end
// of the cool-down, zero once a probe may go, the end of the probe out; a
// breaker that is off lists nothing.
func TestOpenEndpointsListsOpenBreakers(t *testing.T) {
	a := &Activities{Breaker: &Breaker{Misses: 2}}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	open := func(now time.Time) ([]string, []time.Time) { return OpenEndpoints(a, now) }
	a.Breaker.observe("ep", false, ms(1), ms(1))
	a.Breaker.observe("other", false, ms(1), ms(1))
	ids, until := open(ms(1))
	require.Nil(t, ids, "one miss opens nothing")
	require.Nil(t, until)
	a.Breaker.observe("ep", false, ms(2), ms(2))
	probe := ms(2).Add(BreakerCooldown)
	ids, until = open(ms(3))
	require.Equal(t, []string{"ep"}, ids)
	require.Equal(t, []time.Time{probe}, until, "held until the cool-down ends")
	ids, until = open(probe)
	require.Equal(t, []string{"ep"}, ids)
	require.Equal(t, []time.Time{{}}, until, "a probe may go")
	probeEnd := TakeProbe(a, "ep", "dlv_probe", probe, time.Second)
	require.True(t, probeEnd.IsZero(), "the asking delivery is the probe")
	_, until = open(probe.Add(time.Millisecond))
	require.Len(t, until, 1)
	require.True(t, until[0].After(probe.Add(time.Second)), "held until the probe's end: %v", until[0])
	a.Breaker.observe("ep", false, probe, probe.Add(time.Second))
	ids, until = open(probe.Add(time.Second))
	require.Equal(t, []string{"ep"}, ids, "a failed probe keeps it open")
	require.True(t, until[0].After(probe.Add(time.Second)), "a failed probe begins another cool-down")
	a.Breaker.observe("ep", true, probe.Add(2*time.Second), probe.Add(2*time.Second))
	ids, until = open(probe.Add(2 * time.Second))
	require.Nil(t, ids, "an answer closes it")
	require.Nil(t, until)
	ids, _ = OpenEndpoints(&Activities{Breaker: &Breaker{}}, probe)
	require.Nil(t, ids)
	ids, _ = OpenEndpoints(&Activities{}, probe)
	require.Nil(t, ids)
}

// TestTakeProbeLetsOneProbeOut: past the cool-down, TakeProbe lets one
// delivery out, which is then the probe; every other delivery it or
// HeldUntil is asked about waits for that probe, so a round holding many
// failed rows of a silent endpoint hands one of them on, not all.
// HeldUntil alone reserves nothing.
func TestTakeProbeLetsOneProbeOut(t *testing.T) {
	t.Parallel()
	a := &Activities{Breaker: &Breaker{Misses: 1, Cooldown: time.Second}}
	now := time.Now()
	opened, _ := a.Breaker.observe("ep", false, now, now)
	require.False(t, opened.IsZero())
	require.Equal(t, opened, TakeProbe(a, "ep", "dlv_1", now, time.Second), "let out during the cool-down")
	past := opened.Add(time.Millisecond)
	require.Zero(t, HeldUntil(a, "ep", "dlv_2", past), "HeldUntil reserved the probe")
	require.Zero(t, TakeProbe(a, "ep", "dlv_1", past, time.Second), "no probe let out past the cool-down")
	require.Zero(t, TakeProbe(a, "ep", "dlv_1", past, time.Second), "the probe's own delivery held")
	probeEnd := past.Add(time.Second + FlightSlack + RecordSlack)
	require.Equal(t, probeEnd, TakeProbe(a, "ep", "dlv_2", past, time.Second), "a second delivery let out beside the probe")
	require.Equal(t, probeEnd, HeldUntil(a, "ep", "dlv_2", past), "HeldUntil does not see the probe")
	require.Zero(t, TakeProbe(a, "ep", "dlv_2", probeEnd, time.Second), "no new probe once the first one's time is up")
}
