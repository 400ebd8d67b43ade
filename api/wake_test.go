package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// askedRounds records the rounds ingest asks its process's dispatcher for.
type askedRounds struct {
	mu sync.Mutex
	at []time.Time
}

func (a *askedRounds) Wake(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, at)
}

func (a *askedRounds) asked() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at...)
}

// TestIngestWakesItsDispatcherWhenNoNotifyDid: an event whose publish
// woke the dispatchers (NOTIFY) asks its process's dispatcher for nothing
// more; one that counted on an earlier waiting row asks it for a round by
// its own row's claim time, once committed, and so does a test event; a
// repeat, and an event whose only endpoint is paused, ask for nothing.
func TestIngestWakesItsDispatcherWhenNoNotifyDid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, key := tenant(t, "wake")
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "http://127.0.0.1:9/w", Environment: "live", EventTypes: []string{},
		Headers: map[string]string{}, RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	rounds := &askedRounds{}
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true, Dispatcher: rounds}).Handler()
	ingest := func(body map[string]any) string {
		rec := send(t, h, key, "POST", "/v1/apps/"+app.ID+"/events", body)
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, rec.Code, rec.Body.String())
		var out struct{ ID string }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		return out.ID
	}
	claimBy := func(eventID string) time.Time {
		var at time.Time
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT o.claim_by FROM outbox o JOIN deliveries d ON d.id = o.delivery_id WHERE d.event_id = $1`, eventID).Scan(&at))
		return at
	}

	ingest(event("order.paid", 1))
	require.Empty(t, rounds.asked(), "its NOTIFY woke the dispatchers")

	second := ingest(event("order.paid", 2))
	asked := rounds.asked()
	require.Len(t, asked, 1, "the first event's row waited unleased: no NOTIFY, so a round is asked for")
	require.True(t, asked[0].Equal(claimBy(second)), "asked by %s, the row's claim time %s", asked[0], claimBy(second))

	ingest(map[string]any{"id": second, "type": "order.paid", "data": map[string]any{"i": 2}})
	require.Len(t, rounds.asked(), 1, "a repeat wrote no row")

	// A test event ("send test event", API and portal) asks as an ingest
	// does.
	rec := send(t, h, key, "POST", "/v1/apps/"+app.ID+"/endpoints/"+ep.ID+"/test", nil)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	require.Len(t, rounds.asked(), 2, "the test event's row counted on the waiting ones: a round is asked for")

	_, err = st.Pool().Exec(ctx, `UPDATE endpoints SET paused = true WHERE id = $1`, ep.ID)
	require.NoError(t, err)
	ingest(event("order.paid", 3))
	require.Len(t, rounds.asked(), 2, "a held row is claimed by no round")
}

// takingSender is a dispatcher whose sender takes ingested rows (api.Taker);
// it records what it was given.
type takingSender struct {
	askedRounds
	off   bool
	taken []outbox.Leased
}

func (s *takingSender) Handoff(string) (outbox.Handoff, bool) {
	return outbox.Handoff{Lease: 10 * time.Second}, !s.off
}

func (s *takingSender) Take(rows []outbox.Leased) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken = append(s.taken, rows...)
}

// TestIngestHandsRowsDueAtOnceToItsSender: an ingest whose process's
// dispatcher takes rows leases the rows due at once to it and gives them
// to it once committed, asking for no round; with the hand-off off (the
// sender at its bound, stopped) the rows go to the rounds as before.
func TestIngestHandsRowsDueAtOnceToItsSender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, key := tenant(t, "handoff")
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "http://127.0.0.1:9/w", Environment: "live", EventTypes: []string{},
		Headers: map[string]string{}, RetrySchedule: []time.Duration{0, time.Second}, Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	sender := &takingSender{}
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true, Dispatcher: sender}).Handler()
	leased := func(deliveryID string) bool {
		var until *time.Time
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT leased_until FROM outbox WHERE delivery_id = $1`, deliveryID).Scan(&until))
		return until != nil
	}
	ingest := func(i int) string {
		rec := send(t, h, key, "POST", "/v1/apps/"+app.ID+"/events", event("order.paid", i))
		require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
		var out struct{ Deliveries []struct{ ID string } }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		require.Len(t, out.Deliveries, 1)
		return out.Deliveries[0].ID
	}
	for i := range 2 {
		id := ingest(i)
		require.True(t, leased(id))
		require.Len(t, sender.taken, i+1)
		require.Equal(t, id, sender.taken[i].DeliveryID)
		require.Equal(t, ep.ID, sender.taken[i].EndpointID)
	}
	require.Empty(t, sender.asked(), "no round asked for rows the sender holds")

	sender.off = true
	id := ingest(3)
	require.False(t, leased(id), "with the hand-off off the row is left to the rounds")
	require.Len(t, sender.taken, 2)
}
