package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
)

// stalledStore hands out slots from leads, one per reservation (the last
// one again when they run out), and keeps them.
type stalledStore struct {
	lockedStore
	leads    []time.Duration
	reserved []time.Time
}

func (s *stalledStore) ReserveSlot(context.Context, string, int, time.Time) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lead := s.leads[min(len(s.reserved), len(s.leads)-1)]
	slot := time.Now().Add(lead)
	s.reserved = append(s.reserved, slot)
	return slot, nil
}

// TestRequestWokenLateForItsSlotTakesAnother: a rate-limited request whose
// slot had long passed when its worker got to it (a stalled worker; here
// a slot handed out 200 ms in the past) takes the endpoint's next slot and
// leaves no earlier than that, instead of leaving at once next to the
// requests of the slots after its own.
func TestRequestWokenLateForItsSlotTakesAnother(t *testing.T) {
	t.Parallel()
	arrived := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { arrived <- time.Now() }))
	t.Cleanup(srv.Close)
	tg := target(t, 200)
	tg.URL, tg.RateLimit = srv.URL, 50
	st := &stalledStore{lockedStore: lockedStore{flakyStore: flakyStore{target: tg}},
		leads: []time.Duration{-200 * time.Millisecond, 100 * time.Millisecond}}
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test"}
	res, err := a.SendSigned(context.Background(), activities.SendRequest{DeliveryID: "dlv_1", EndpointID: tg.EndpointID,
		Cycle: 1, Number: 1, Timeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
	got := <-arrived
	st.mu.Lock()
	defer st.mu.Unlock()
	require.GreaterOrEqual(t, len(st.reserved), 2, "a request woken late takes another slot")
	last := st.reserved[len(st.reserved)-1]
	require.False(t, got.Before(last), "left %s before its last slot", last.Sub(got))
}
