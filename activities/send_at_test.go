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
			a := sharedSender(st)
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
	a := sharedSender(st)
	// Due a second away, so the claim's linger (up to ClaimMargin before
	// the earliest due) outlasts any stall between the two calls.
	due := time.Now().Add(time.Second)
	ats := []time.Time{due, due.Add(activities.ClaimLead - activities.ClaimMargin - time.Millisecond)}
	results, errs := make([]activities.SendResult, len(ats)), make([]error, len(ats))
	for i, at := range ats {
		hits.Go(func() {
			req := activities.SendRequest{DeliveryID: fmt.Sprintf("dlv_%d", i), EndpointID: tg.EndpointID, Cycle: 1, Number: 1,
				Timeout: time.Second, At: at}
			results[i], errs[i] = activities.SendFirst(context.Background(), a, req, int64(i+1), at.Add(time.Second))
		})
	}
	hits.Wait()
	for i, res := range results {
		require.NoError(t, errs[i])
		require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
		require.False(t, res.StartedAt.Before(ats[i]), "attempt started %s before its due time", ats[i].Sub(res.StartedAt))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Equal(t, []int{2}, st.batches, "both claims in one statement")
}

// lingerStore is flakyStore keeping until when each claim and record was
// let wait for company (coalesce.LingerOf).
type lingerStore struct {
	*flakyStore
	claimBy, recordBy []time.Time
}

func (s *lingerStore) ClaimTarget(ctx context.Context, id string, now, until time.Time) (store.Target, bool, error) {
	s.claimBy = append(s.claimBy, coalesce.LingerOf(ctx))
	return s.flakyStore.ClaimTarget(ctx, id, now, until)
}

func (s *lingerStore) RecordAttempts(ctx context.Context, as []store.Attempt) ([]error, error) {
	s.recordBy = append(s.recordBy, coalesce.LingerOf(ctx))
	return s.flakyStore.RecordAttempts(ctx, as)
}

// TestClaimAndRecordLingerOnlyWhereNothingWaits: a first attempt named
// with its due time lets its claim wait until ClaimMargin before it; an
// attempt due now does not wait. An unordered attempt's record waits up
// to RecordLinger; an ordered one's, which its key's next message waits
// for, not at all.
func TestClaimAndRecordLingerOnlyWhereNothingWaits(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name     string
		sequence int64
		ahead    time.Duration
	}{{"unordered, due ahead", 0, 200 * time.Millisecond}, {"unordered, due now", 0, 0}, {"ordered, due now", 3, 0}} {
		t.Run(c.name, func(t *testing.T) {
			tg := target(t, 200)
			tg.URL, tg.Sequence = srv.URL, c.sequence
			st := &lingerStore{flakyStore: &flakyStore{target: tg}}
			a := sharedSender(st)
			var at time.Time
			if c.ahead > 0 {
				at = time.Now().Add(c.ahead)
			}
			req := activities.SendRequest{DeliveryID: "dlv_1", EndpointID: tg.EndpointID, Cycle: 1, Number: 1, Timeout: time.Second, At: at}
			before := time.Now()
			res, err := activities.SendFirst(context.Background(), a, req, 1, before.Add(time.Second))
			require.NoError(t, err)
			require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
			require.Len(t, st.claimBy, 1)
			if at.IsZero() {
				require.True(t, st.claimBy[0].IsZero(), "a claim due now lingered until %s", st.claimBy[0])
			} else {
				require.Equal(t, at.Add(-activities.ClaimMargin), st.claimBy[0])
			}
			require.Len(t, st.recordBy, 1)
			if c.sequence > 0 {
				require.True(t, st.recordBy[0].IsZero(), "an ordered record lingered until %s", st.recordBy[0])
				return
			}
			// No later than RecordLinger past the request's end (the
			// record is asked once the answer is in).
			require.False(t, st.recordBy[0].Before(res.StartedAt.Add(activities.RecordLinger)), "record lingers until %s", st.recordBy[0])
			require.False(t, st.recordBy[0].After(time.Now().Add(activities.RecordLinger)), "record lingers until %s", st.recordBy[0])
		})
	}
}

// sharedSender is an Activities on st whose endpoints share 4 places.
func sharedSender(st activities.Store) *activities.Activities {
	return &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
		Shares: &activities.Shares{PerEndpoint: 4, Total: 4}}
}

// TestSendGroupMakesEachAtItsDueTime: a carrier's group whose requests name
// their due times (SendRequest.At) makes each at its own time, never
// before it, each claim covering its request from that time, and records
// each.
func TestSendGroupMakesEachAtItsDueTime(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var arrived []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	tg := target(t, 200)
	tg.URL = srv.URL
	st := &untilStore{flakyStore: &flakyStore{target: tg}}
	a := sharedSender(st)
	now := time.Now()
	ats := []time.Time{now.Add(200 * time.Millisecond), now.Add(500 * time.Millisecond)}
	var reqs []activities.SendRequest
	for i, at := range ats {
		reqs = append(reqs, activities.SendRequest{DeliveryID: fmt.Sprintf("dlv_%d", i), EndpointID: tg.EndpointID, Cycle: 1, Number: 1,
			Timeout: time.Second, At: at})
	}
	outs, err := a.SendGroup(context.Background(), reqs)
	require.NoError(t, err)
	require.Len(t, outs, 2)
	for i, o := range outs {
		require.Empty(t, o.Error, "request %d", i)
		require.Equal(t, activities.ClassSuccess, o.Result.Class, o.Result.Error)
		require.False(t, o.Result.StartedAt.Before(ats[i]), "attempt %d started %s before its due time", i, ats[i].Sub(o.Result.StartedAt))
	}
	require.Len(t, arrived, 2)
	for i, got := range arrived {
		require.False(t, got.Before(ats[i]), "request %d arrived %s before its due time", i, ats[i].Sub(got))
	}
	require.Len(t, st.claims, 2, "each claimed")
	for i, until := range st.claims {
		require.Equal(t, ats[i].Add(time.Second+activities.FlightSlack).Truncate(time.Microsecond), until, "claim %d covers its request from its due time", i)
	}
	require.Len(t, st.records, 2, "each recorded")
}
