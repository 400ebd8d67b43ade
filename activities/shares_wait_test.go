package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/store"
)

// orderStore is lockedStore that logs the rate-limit slots and
// max_in_flight leases taken and given back, in order, and whose target
// can change between loads.
type orderStore struct {
	lockedStore
	log []string
}

func (o *orderStore) LoadTarget(ctx context.Context, id string, now time.Time) (store.Target, error) {
	return o.lockedStore.LoadTarget(ctx, id, now)
}

func (o *orderStore) ReserveSlot(context.Context, string, int, time.Time) (time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, "slot")
	return time.Now(), nil
}

func (o *orderStore) AcquireFlight(context.Context, string, int, time.Duration) (string, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, "lease")
	return "flt_1", true, nil
}

func (o *orderStore) ReleaseFlight(context.Context, string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, "release")
	return nil
}

func (o *orderStore) setTarget(f func(*store.Target)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(&o.target)
}

// shareFixture is an endpoint with one place per worker, held by a first
// attempt whose request waits for hold to close.
type shareFixture struct {
	a       *activities.Activities
	st      *orderStore
	req     activities.SendRequest
	hold    chan struct{}
	once    sync.Once
	arrived chan struct{}
	first   chan activities.SendResult
}

func newShareFixture(t *testing.T, tgt func(*store.Target)) *shareFixture {
	f := &shareFixture{hold: make(chan struct{}), arrived: make(chan struct{}, 4), first: make(chan activities.SendResult, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		f.arrived <- struct{}{}
		<-f.hold
	}))
	t.Cleanup(srv.Close)
	// A failed test does not leave the held request (and srv.Close) hanging.
	t.Cleanup(f.release)
	target := target(t, 200)
	target.URL = srv.URL
	if tgt != nil {
		tgt(&target)
	}
	f.st = &orderStore{lockedStore: lockedStore{flakyStore: flakyStore{target: target}}}
	f.a = &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
		Shares: &activities.Shares{PerEndpoint: 1}}
	set := delivery.Settings{}.WithDefaults()
	f.req = activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1, Timeout: 5 * time.Second, Settings: set, Deadline: time.Now().Add(time.Hour)}
	go func() {
		res, err := activities.SendFirst(context.Background(), f.a, f.req, 1, time.Time{})
		if err != nil {
			res.Error = err.Error()
		}
		f.first <- res
	}()
	<-f.arrived
	return f
}

// release lets the held request answer.
func (f *shareFixture) release() { f.once.Do(func() { close(f.hold) }) }

// waiter starts an attempt that waits for the endpoint's place, and
// returns once it waits.
func (f *shareFixture) waiter(t *testing.T) chan activities.SendResult {
	out := make(chan activities.SendResult, 1)
	go func() {
		res, err := activities.SendFirst(context.Background(), f.a, f.req, 2, time.Now().Add(time.Hour))
		if err != nil {
			res.Error = err.Error()
		}
		out <- res
	}()
	require.Eventually(t, func() bool { return activities.ShareWaiting(f.a.Shares, "ep_1") == 1 }, 5*time.Second, time.Millisecond)
	return out
}

// result is what ch answers, failing (not hanging) when it does not.
func result(t *testing.T, ch chan activities.SendResult, what string) activities.SendResult {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer", what)
		return activities.SendResult{}
	}
}

// TestShareWaitHoldsNoLeaseNorSlot: an attempt waiting for its endpoint's
// share holds no max_in_flight lease (its TTL is the request's, not the
// wait's: it would lapse, letting other workers past max_in_flight, and
// it blocks them meanwhile) and has reserved no rate-limit slot (the slot
// would pass during the wait and the request go out bunched with later
// ones). Each is taken once the place is.
func TestShareWaitHoldsNoLeaseNorSlot(t *testing.T) {
	t.Parallel()
	f := newShareFixture(t, func(tg *store.Target) { tg.RateLimit, tg.MaxInFlight = 1000, 10 })
	second := f.waiter(t)
	f.release()
	require.Equal(t, activities.ClassSuccess, result(t, f.first, "first").Class)
	require.Equal(t, activities.ClassSuccess, result(t, second, "second").Class)
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	require.Equal(t, []string{"slot", "lease", "release", "slot", "lease", "release"}, f.st.log,
		"the waiting attempt took its slot and lease only once handed its place")
}

// TestPauseDuringShareWaitSendsNothing: an endpoint paused (or disabled, or
// its keys rotated) while an attempt waited for its share is seen by that
// attempt: the target is read again after a wait.
func TestPauseDuringShareWaitSendsNothing(t *testing.T) {
	t.Parallel()
	f := newShareFixture(t, nil)
	second := f.waiter(t)
	f.st.setTarget(func(tg *store.Target) { tg.Paused = true })
	f.release()
	require.Equal(t, activities.ClassSuccess, result(t, f.first, "first").Class)
	require.Equal(t, activities.ClassEndpointPaused, result(t, second, "second").Class, "paused while it waited: nothing sent")
	require.Empty(t, f.arrived, "one request only")
}

// TestShareWaitEndsWhenTheWorkerStops: a stopping worker (Open.Drain) ends
// the waits for a share at once, with nothing sent (busy): they do not
// hold the drain, nor start requests while the worker stops.
func TestShareWaitEndsWhenTheWorkerStops(t *testing.T) {
	t.Parallel()
	f := newShareFixture(t, nil)
	second := f.waiter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.a.Open.Drain(ctx)
	require.Equal(t, activities.ClassEndpointBusy, result(t, second, "waiter after stop").Class)
	f.release()
	require.Equal(t, activities.ClassSuccess, result(t, f.first, "first").Class)
	require.Empty(t, f.arrived, "the waiter sent nothing")
}
