package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/outbox"
)

// On the real stack, an endpoint with a filter receives exactly the events
// its filter accepts, whether they came through the API or through
// outbox.Publish in a producer's own transaction; an endpoint without one
// receives them all; the filter test names the same events fan-out sent.
func TestFilteredEndpointReceivesOnlyMatchingEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ok := func(int, http.ResponseWriter, *http.Request) {}
	big, all := newReceiver(t, ok), newReceiver(t, ok)
	appID := h.createApp()
	const expr = "data.amount >= 5000 && data.currency == 'usd'"
	filtered := h.createEndpoint(appID, map[string]any{"url": big.URL(), "filter": expr})
	h.createEndpoint(appID, map[string]any{"url": all.URL()})

	payloads := []map[string]any{
		{"amount": 9900, "currency": "usd"}, {"amount": 120, "currency": "usd"}, {"amount": 7000, "currency": "eur"},
		{"currency": "usd"}, {"amount": 5000, "currency": "usd"}, {"amount": "5000", "currency": "usd"},
	}
	want := map[string]bool{} // event ID → the filter accepts it
	for i, data := range payloads {
		ev := h.send(appID, "invoice.paid", data)
		want[ev.ID] = i == 0 || i == 4
	}
	// The producer's business row and its events commit together; the
	// filter runs inside that transaction.
	ctx := context.Background()
	_, err := h.store.Pool().Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, amount int)`)
	require.NoError(t, err)
	for i, amount := range []int{6000, 10} {
		tx, err := h.store.Pool().Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO orders VALUES ($1, $2)`, fmt.Sprint("ord_", i), amount)
		require.NoError(t, err)
		pub, err := outbox.Publish(ctx, tx, appID, outbox.Event{Type: "invoice.paid", Data: json.RawMessage(fmt.Sprintf(`{"amount": %d, "currency": "usd"}`, amount))})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		want[pub.ID] = amount >= 5000
	}

	// Every event reaches the unfiltered endpoint; by then the filtered
	// one's deliveries were sent too (each event's deliveries start
	// together).
	require.Eventually(t, func() bool { return len(all.byID()) == len(want) }, 30*time.Second, 50*time.Millisecond)
	matching := 0
	for _, m := range want {
		if m {
			matching++
		}
	}
	require.Eventually(t, func() bool { return len(big.byID()) >= matching }, 30*time.Second, 50*time.Millisecond)
	got := map[string]bool{}
	for _, r := range big.receipts() {
		var env struct{ ID string }
		require.NoError(t, json.Unmarshal(r.Body, &env))
		got[env.ID] = true
	}
	for id, m := range want {
		require.Equal(t, m, got[id], "event %s", id)
	}
	var n int
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE endpoint_id = $1`, filtered.ID).Scan(&n))
	require.Equal(t, matching, n, "an event the filter rejects makes no delivery at all")

	// Each skipped event says so in its read, with the error when the
	// filter failed on it.
	for id, m := range want {
		var ev outbox.Published
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/events/"+id, nil, &ev))
		if m {
			require.Empty(t, ev.FilteredOut, id)
			continue
		}
		require.Len(t, ev.FilteredOut, 1, id)
		require.Equal(t, filtered.ID, ev.FilteredOut[0].EndpointID)
	}

	var ft api.FilterTest
	require.Equal(t, http.StatusOK, h.do("POST", "/v1/apps/"+appID+"/endpoints/"+filtered.ID+"/filter-test", map[string]any{}, &ft))
	require.Equal(t, len(want), ft.Evaluated)
	require.Equal(t, 2, ft.Errored, "no amount; amount a string")
	for _, e := range ft.Events {
		require.Equal(t, got[e.ID], e.Verdict == api.VerdictMatched, "%s: %s %s", e.ID, e.Verdict, e.Error)
	}
}
