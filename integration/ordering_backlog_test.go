package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
)

// TestBlockedKeyIsRefusedAloneNotItsApp: with --max-backlog 10, a key
// blocked behind a dead letter takes events until its own backlog passes
// 10, then its events are refused (429, naming ordering_key), while the
// app's other keys and its unordered events are accepted and delivered:
// the rows waiting behind the blocked head are not the app's backlog.
func TestBlockedKeyIsRefusedAloneNotItsApp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(hc *harnessConfig) { hc.maxBacklog = 10 })
	o := &orderedReceiver{fails: map[orderedData]int{{Key: "stuck", I: 1}: 1}}
	o.rc = newReceiver(t, o.respond)
	appID := h.createApp()
	h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "fifo_on_dead_letter": "block", "retry_schedule": []string{"0s"},
		"event_types": []string{"ledger.entry"}})
	head := h.sendKeyed(appID, "stuck", 1).Deliveries[0].ID
	h.waitDelivery(appID, head, 20*time.Second, delivery.StatusDeadLettered)

	post := func(key string, i int) (int, problemBody) {
		var p problemBody
		body := map[string]any{"type": "ledger.entry", "data": orderedData{Key: key, I: i}, "ordering_key": key}
		return h.do("POST", "/v1/apps/"+appID+"/events", body, &p), p
	}
	accepted := 1
	for i := 2; i <= 20; i++ {
		code, p := post("stuck", i)
		if code == http.StatusTooManyRequests {
			require.Equal(t, []string{"ordering_key"}, p.Fields, p.Detail)
			break
		}
		require.Equal(t, http.StatusAccepted, code, p.Detail)
		accepted++
	}
	require.Equal(t, 11, accepted, "the key takes events until its backlog passes the bound")

	// Past the app's bound, counting the blocked key's rows: the app's
	// other keys and unordered events still go.
	for i := 1; i <= 3; i++ {
		code, p := post("other", i)
		require.Equal(t, http.StatusAccepted, code, p.Detail)
	}
	h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "event_types": []string{"plain.sent"}})
	id := h.send(appID, "plain.sent", map[string]any{}).Deliveries[0].ID
	h.waitDelivery(appID, id, 20*time.Second, delivery.StatusSucceeded)
	require.Eventually(t, func() bool { return len(o.receipts("other")) == 3 }, 20*time.Second, 50*time.Millisecond, "the other key was delivered")
	code, _ := post("stuck", 99)
	require.Equal(t, http.StatusTooManyRequests, code, "the blocked key is still refused")
}

// problemBody is the part of a problem+json answer the tests read.
type problemBody struct {
	Detail string
	Fields []string
}
