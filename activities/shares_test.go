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

// lockedStore is flakyStore for attempts made at once.
type lockedStore struct {
	mu sync.Mutex
	flakyStore
}

func (l *lockedStore) LoadTarget(ctx context.Context, id string, now time.Time) (store.Target, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flakyStore.LoadTarget(ctx, id, now)
}

func (l *lockedStore) ClaimTarget(ctx context.Context, id string, now, until time.Time) (store.Target, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flakyStore.ClaimTarget(ctx, id, now, until)
}

func (l *lockedStore) RecordAttempts(ctx context.Context, as []store.Attempt) ([]error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flakyStore.RecordAttempts(ctx, as)
}

// TestFullShareIsWaitedFor: an attempt that finds its endpoint's share in
// use waits in the worker and is sent once a place frees, its request
// starting then; one whose wait ends first sends nothing (busy) and
// records nothing.
func TestFullShareIsWaitedFor(t *testing.T) {
	t.Parallel()
	hold, arrived := make(chan struct{}), make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		arrived <- struct{}{}
		<-hold
	}))
	t.Cleanup(srv.Close)
	tgt := target(t, 200)
	tgt.URL = srv.URL
	st := &lockedStore{flakyStore: flakyStore{target: tgt}}
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
		Shares: &activities.Shares{PerEndpoint: 1}}
	set := delivery.Settings{}.WithDefaults()
	req := activities.SendRequest{DeliveryID: "dlv_1", EndpointID: tgt.EndpointID, Cycle: 1, Number: 1, Timeout: 5 * time.Second, Settings: set,
		Deadline: time.Now().Add(time.Hour)}

	first := make(chan activities.SendResult, 1)
	go func() {
		res, err := activities.SendFirst(context.Background(), a, req, 1, time.Time{})
		require.NoError(t, err)
		first <- res
	}()
	// The first request holds the endpoint's one place.
	<-arrived
	res, err := activities.SendFirst(context.Background(), a, req, 2, time.Time{})
	require.NoError(t, err)
	require.Equal(t, activities.ClassEndpointBusy, res.Class, "no wait asked")

	second := make(chan activities.SendResult, 1)
	go func() {
		res, err := activities.SendFirst(context.Background(), a, req, 3, time.Now().Add(time.Minute))
		require.NoError(t, err)
		second <- res
	}()
	res, err = activities.SendFirst(context.Background(), a, req, 4, time.Now().Add(50*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, activities.ClassEndpointBusy, res.Class, "its wait ended before a place freed")

	freed := time.Now()
	close(hold)
	require.Equal(t, activities.ClassSuccess, (<-first).Class)
	got := <-second
	require.Equal(t, activities.ClassSuccess, got.Class, "handed the place the first request freed")
	require.False(t, got.StartedAt.Before(freed), "its request starts after its wait, not before")
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Len(t, st.records, 2, "the busy tries sent and recorded nothing")
	// The first was claimed with its target; the tries that found the
	// place in use claimed nothing while they waited (their deliveries
	// stay pending), and the one handed the place claimed on its own.
	require.Zero(t, st.released.Load())
	require.EqualValues(t, 1, st.claimsAlone.Load())
}
