package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/store"
)

// slotStore hands out a slot lead ahead and notes when the flight lease,
// the claim and its release come.
type slotStore struct {
	lockedStore
	lead                   time.Duration
	slot, leased, claimed  time.Time
	claimUntil, releasedAt time.Time
	released               bool
}

func (s *slotStore) ReserveSlot(context.Context, string, int, time.Time) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slot = time.Now().Add(s.lead)
	return s.slot, nil
}

func (s *slotStore) AcquireFlight(context.Context, string, int, time.Duration) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leased = time.Now()
	return "flt_1", true, nil
}

func (s *slotStore) ClaimAttempt(_ context.Context, _ string, until time.Time) (store.Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimed, s.claimUntil = time.Now(), until
	return store.Claimed, nil
}

func (s *slotStore) ReleaseClaim(_ context.Context, _ string, until time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released, s.releasedAt = true, until
	return nil
}

// slotFixture is tgt's store handing out slots lead ahead, and the
// activities sending through it.
func slotFixture(tgt store.Target, lead time.Duration) (*slotStore, *activities.Activities) {
	st := &slotStore{lockedStore: lockedStore{flakyStore: flakyStore{target: tgt}}, lead: lead}
	return st, &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test"}
}

func slotRequest() activities.SendRequest {
	set := delivery.Settings{}.WithDefaults()
	return activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1, Timeout: 5 * time.Second, Settings: set, Deadline: time.Now().Add(time.Hour)}
}

// TestSlotIsWaitedAfterTheClaim: a rate-limited request is claimed before
// its slot and leaves on it; with max_in_flight the slot is waited for
// before the lease, which is not held while waiting.
func TestSlotIsWaitedAfterTheClaim(t *testing.T) {
	t.Parallel()
	tgt := target(t, 200)
	tgt.RateLimit = 10
	st, a := slotFixture(tgt, 800*time.Millisecond)
	res, err := activities.SendFirst(context.Background(), a, slotRequest(), 1, time.Time{})
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class)
	require.True(t, st.claimed.Before(st.slot), "claimed before the slot")
	require.False(t, res.StartedAt.Before(st.slot), "the request leaves on its slot")
	require.False(t, st.claimUntil.Before(st.slot.Add(5*time.Second)), "the claim covers the wait and the request")

	tgt.MaxInFlight = 2
	st, a = slotFixture(tgt, 800*time.Millisecond)
	res, err = activities.SendFirst(context.Background(), a, slotRequest(), 2, time.Time{})
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class)
	require.False(t, st.leased.Before(st.slot), "no max_in_flight lease is held while the slot is waited for")
}

// TestSlotPastTheDeadlineSendsNothing: a slot after the last moment the
// request still fits before the deadline is not waited for.
func TestSlotPastTheDeadlineSendsNothing(t *testing.T) {
	t.Parallel()
	tgt := target(t, 200)
	tgt.RateLimit = 10
	st, a := slotFixture(tgt, 500*time.Millisecond)
	req := slotRequest()
	req.Deadline = time.Now().Add(req.Settings.RequestTimeout + 100*time.Millisecond)
	res, err := activities.SendFirst(context.Background(), a, req, 1, time.Time{})
	require.NoError(t, err)
	require.Equal(t, activities.ClassRateLimited, res.Class)
	require.True(t, st.claimed.IsZero(), "nothing claimed")
	require.Empty(t, st.records, "nothing sent")
}

// TestClaimIsReleasedWhenTheSlotWaitEnds: an attempt whose context ends
// while it waits for its slot, after its claim, gives the claim back so
// the delivery's next attempt need not wait for it to lapse.
func TestClaimIsReleasedWhenTheSlotWaitEnds(t *testing.T) {
	t.Parallel()
	tgt := target(t, 200)
	tgt.RateLimit = 1
	st, a := slotFixture(tgt, 900*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := activities.SendFirst(ctx, a, slotRequest(), 1, time.Time{})
		done <- err
	}()
	require.Eventually(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return !st.claimed.IsZero()
	}, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	st.mu.Lock()
	defer st.mu.Unlock()
	require.True(t, st.released)
	require.Equal(t, st.claimUntil, st.releasedAt, "the claim it made")
	require.Empty(t, st.records, "nothing sent")
}
