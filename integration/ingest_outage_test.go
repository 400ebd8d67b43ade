package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/app"
)

// readyz is an API process's /readyz answer.
func readyz(t *testing.T, url string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

// TestAPIStartsAndIngestsWithoutTemporal: Temporal is unreachable for 30 s
// while events arrive (10 a second, through the API process that was up and
// one started during the outage). The new process starts, answers /readyz
// 200 "degraded" (a probe keeps it in service: ingest needs only Postgres),
// and both accept every event; once Temporal answers again every event is
// delivered, 0 lost, and /readyz says ok.
func TestAPIStartsAndIngestsWithoutTemporal(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	h.createEndpoint(appID, map[string]any{"url": rc.URL()})

	h.proxy.Close() // Temporal is unreachable from hookrelay from here on.
	outage := time.Now()
	started := time.Now()
	second, err := app.Start(context.Background(), h.cfg, h.logger.With("process", "api-2"), app.RoleAPI, h.opts)
	require.NoError(t, err, "an API process starts while Temporal is unreachable")
	t.Cleanup(second.Close)
	t.Logf("API process started in %s with Temporal unreachable", time.Since(started).Round(time.Millisecond))
	urls := []string{h.url, "http://" + second.APIAddr}
	for _, u := range urls {
		code, body := readyz(t, u)
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.Equal(t, "degraded", body["status"])
		require.Equal(t, "unreachable", body["temporal"])
		require.Equal(t, "ok", body["postgres"])
	}

	var ids []string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; time.Since(outage) < 30*time.Second; i++ {
		<-tick.C
		var ev eventResp
		h.url = urls[i%2]
		code := h.do("POST", "/v1/apps/"+appID+"/events", map[string]any{"type": "order.paid", "data": map[string]any{"i": i}}, &ev)
		h.url = urls[0]
		require.Equal(t, http.StatusAccepted, code, "event %d accepted during the outage", i)
		ids = append(ids, ev.Deliveries[0].ID)
	}
	t.Logf("%d events accepted during a %s outage", len(ids), time.Since(outage).Round(time.Second))

	require.NoError(t, h.proxy.Open())
	for _, id := range ids {
		h.waitDelivery(appID, id, 2*time.Minute, delivery.StatusSucceeded)
	}
	require.Len(t, rc.byID(), len(ids), "every event delivered once Temporal is back, 0 lost")
	require.Eventually(t, func() bool {
		code, body := readyz(t, urls[1])
		return code == http.StatusOK && body["status"] == "ok"
	}, 30*time.Second, 100*time.Millisecond, "ready once Temporal answers")
}
