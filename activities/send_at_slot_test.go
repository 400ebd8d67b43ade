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

// limiterStore serves one target per delivery (its URL path is the
// delivery's ID) and reserves rate-limit slots as store.ReserveSlot does:
// the next slot is GREATEST(next_slot, now(), from), and next_slot moves
// one step past it.
type limiterStore struct {
	lockedStore
	slotMu sync.Mutex
	next   time.Time
	// reserved receives each slot handed out.
	reserved chan time.Time
}

func (s *limiterStore) targetOf(id string) store.Target {
	t := s.flakyStore.target
	t.DeliveryID, t.URL = id, t.URL+"/"+id
	return t
}

func (s *limiterStore) LoadTarget(ctx context.Context, id string, now time.Time) (store.Target, error) {
	_, err := s.lockedStore.LoadTarget(ctx, id, now)
	return s.targetOf(id), err
}

func (s *limiterStore) ClaimTarget(ctx context.Context, id string, now, until time.Time) (store.Target, bool, error) {
	_, ok, err := s.lockedStore.ClaimTarget(ctx, id, now, until)
	return s.targetOf(id), ok, err
}

func (s *limiterStore) ReserveSlot(_ context.Context, _ string, rate int, from time.Time) (time.Time, error) {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	slot := delivery.Later(time.Now(), from)
	if s.next.After(slot) {
		slot = s.next
	}
	s.next = slot.Add(store.SlotStep(rate))
	s.reserved <- slot
	return slot, nil
}

// TestFirstAttemptAheadOfItsDueTimeKeepsItsRateLimitSlot: a first attempt
// made ahead of its due time (SendRequest.At) to a rate-limited endpoint
// is counted on a slot no earlier than the time its request leaves, so
// the endpoint's next slot is a full step after that request. Otherwise
// another attempt reserving the next slot (here a workflow's, made after
// the first attempt reserved its own) is sent before it, and the two
// requests come closer together than the rate limit allows.
func TestFirstAttemptAheadOfItsDueTimeKeepsItsRateLimitSlot(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	tg := target(t, 200)
	tg.URL, tg.RateLimit = srv.URL, 5 // a slot every 202 ms
	st := &limiterStore{lockedStore: lockedStore{flakyStore: flakyStore{target: tg}}, reserved: make(chan time.Time, 2)}
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test"}

	at := time.Now().Add(300 * time.Millisecond)
	first := activities.SendRequest{DeliveryID: "dlv_first", EndpointID: tg.EndpointID, Cycle: 1, Number: 1,
		Timeout: time.Second, At: at}
	firstDone := make(chan error, 1)
	go func() {
		res, err := activities.SendFirst(context.Background(), a, first, 7, at.Add(time.Second))
		if err == nil && res.Class != activities.ClassSuccess {
			err = &classError{res}
		}
		firstDone <- err
	}()
	firstSlot := <-st.reserved

	// Another delivery's attempt to the same endpoint, made once the
	// first attempt holds its slot: it takes the next one.
	retry := activities.SendRequest{DeliveryID: "dlv_retry", EndpointID: tg.EndpointID, Cycle: 1, Number: 2, Timeout: time.Second}
	res, err := a.SendSigned(context.Background(), retry)
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
	require.NoError(t, <-firstDone)

	require.False(t, firstSlot.Before(at), "the first attempt was counted on a slot %s before its request left", at.Sub(firstSlot))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"/dlv_first", "/dlv_retry"}, order,
		"the attempt that reserved the later slot was sent first")
}

type classError struct{ res activities.SendResult }

func (e *classError) Error() string { return string(e.res.Class) + ": " + e.res.Error }
