package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/internal/coalesce"
	"hookrelay/store"
)

// untilStore is flakyStore keeping how long each claim (with the target,
// or alone) was made until.
type untilStore struct {
	*flakyStore
	mu     sync.Mutex
	claims []time.Time
	// leasedAt is when a max_in_flight lease was last taken.
	leasedAt time.Time
}

func (s *untilStore) ClaimTarget(ctx context.Context, id string, now, until time.Time) (t store.Target, ok bool, err error) {
	t, ok, err = s.flakyStore.ClaimTarget(ctx, id, now, until)
	if ok {
		s.keep(until)
	}
	return t, ok, err
}

func (s *untilStore) ClaimAttempt(ctx context.Context, id string, until time.Time) (store.Claim, error) {
	s.keep(until)
	return s.flakyStore.ClaimAttempt(ctx, id, until)
}

func (s *untilStore) AcquireFlight(ctx context.Context, endpointID string, max int, ttl time.Duration) (string, bool, error) {
	s.mu.Lock()
	s.leasedAt = time.Now()
	s.mu.Unlock()
	return s.flakyStore.AcquireFlight(ctx, endpointID, max, ttl)
}

func (s *untilStore) keep(until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = append(s.claims, until)
}

// TestFirstAttemptClaimedAheadLeavesAtItsDueTime: a sender's first attempt
// named with its due time (SendRequest.At) and made before it is claimed
// at once, its claim covering the request from its due time, and its
// request never leaves before that time, claimed with its target or alone
// (a rate-limited endpoint, or one with max_in_flight, whose lease is
// taken ahead too).
func TestFirstAttemptClaimedAheadLeavesAtItsDueTime(t *testing.T) {
	t.Parallel()
	for _, limit := range []string{"with its target", "alone, rate-limited", "alone, max_in_flight"} {
		t.Run(limit, func(t *testing.T) {
			t.Parallel()
			arrived := make(chan time.Time, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				arrived <- time.Now()
			}))
			t.Cleanup(srv.Close)
			tg := target(t, 200)
			tg.URL = srv.URL
			switch limit {
			case "alone, rate-limited":
				tg.RateLimit = 100
			case "alone, max_in_flight":
				tg.MaxInFlight = 1
			}
			st := &untilStore{flakyStore: &flakyStore{target: tg}}
			a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
				Shares: &activities.Shares{PerEndpoint: 4, Total: 4}}
			at := time.Now().Add(300 * time.Millisecond)
			req := activities.SendRequest{DeliveryID: "dlv_1", EndpointID: tg.EndpointID, Cycle: 1, Number: 1,
				Timeout: time.Second, At: at}

			res, err := activities.SendFirst(context.Background(), a, req, 7, at.Add(time.Second))
			require.NoError(t, err)
			require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
			got := <-arrived
			require.False(t, got.Before(at), "request arrived %s before its due time", at.Sub(got))
			require.False(t, res.StartedAt.Before(at), "attempt started %s before its due time", at.Sub(res.StartedAt))
			require.Equal(t, []time.Time{at.Add(time.Second + activities.FlightSlack).Truncate(time.Microsecond)}, st.claims,
				"one claim, covering the request from its due time")
			if tg.MaxInFlight > 0 {
				require.True(t, st.leasedAt.Before(at), "lease taken %s after the due time", st.leasedAt.Sub(at))
			}
		})
	}
}

// batchedStore is flakyStore whose ClaimTarget goes through a Coalescer,
// as store.Batched's does, keeping the size of each batch it ran.
type batchedStore struct {
	*flakyStore
	claims  *coalesce.Coalescer[string, bool]
	mu      sync.Mutex
	batches []int
}

func (s *batchedStore) ClaimTarget(ctx context.Context, id string, now, _ time.Time) (store.Target, bool, error) {
	t, err := s.LoadTarget(ctx, id, now)
	if err != nil {
		return t, false, err
	}
	ok, err := s.claims.Do(ctx, id)
	return t, ok, err
}

// TestFirstAttemptsDueCloseTogetherShareOneClaim: first attempts whose due
// times are less than ClaimLead-ClaimMargin apart, asked to be claimed
// ahead of them, are claimed in one statement (the claim lingers for them),
// and each request still leaves at its own due time.
func TestFirstAttemptsDueCloseTogetherShareOneClaim(t *testing.T) {
	t.Parallel()
	var hits sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	tg := target(t, 200)
	tg.URL = srv.URL
	st := &batchedStore{flakyStore: &flakyStore{target: tg}}
	st.claims = coalesce.New(func(_ context.Context, ids []string) ([]bool, []error, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.batches = append(st.batches, len(ids))
		claimed := make([]bool, len(ids))
		for i := range claimed {
			claimed[i] = true
		}
		return claimed, nil, nil
	})
	t.Cleanup(st.claims.Close)
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
		Shares: &activities.Shares{PerEndpoint: 4, Total: 4}}
	// Due a second away, so the claim's linger (up to ClaimMargin before
	// the earliest due) outlasts any stall between the two calls.
	due := time.Now().Add(time.Second)
	for i, at := range []time.Time{due, due.Add(activities.ClaimLead - activities.ClaimMargin - time.Millisecond)} {
		hits.Go(func() {
			req := activities.SendRequest{DeliveryID: fmt.Sprintf("dlv_%d", i), EndpointID: tg.EndpointID, Cycle: 1, Number: 1,
				Timeout: time.Second, At: at}
			res, err := activities.SendFirst(context.Background(), a, req, int64(i+1), at.Add(time.Second))
			require.NoError(t, err)
			require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
			require.False(t, res.StartedAt.Before(at), "attempt started %s before its due time", at.Sub(res.StartedAt))
		})
	}
	hits.Wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Equal(t, []int{2}, st.batches, "both claims in one statement")
}
