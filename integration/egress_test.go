package integration

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/config"
	"hookrelay/delivery"
	"hookrelay/internal/egress/egresstest"
	"hookrelay/store"
)

// TestEgressProxy: with --egress-proxy, deliveries arrive through a real
// CONNECT proxy (with its credentials from the configuration, never
// logged); once the proxy refuses connections, attempts are recorded with
// the proxy_error class, counted, retried on the schedule, and however
// many of the endpoint's deliveries dead-letter that way (more than the
// auto-disable minimum, over longer than the auto-disable window) the
// endpoint is neither failing nor disabled, while an endpoint of the same
// deployment that the operator sends "direct" and that answers 500 is
// disabled with the same thresholds. Outside dev mode, a loopback or
// metadata target is refused before the CONNECT: the proxy hears of none.
func TestEgressProxy(t *testing.T) {
	const user, password = "relay", "proxy-review-password"
	px, err := egresstest.Start(egresstest.Options{User: user, Password: password})
	require.NoError(t, err)
	t.Cleanup(px.Close)
	const autoDisableAfter = time.Second
	h := newHarness(t, func(c *harnessConfig) {
		c.configure = func(cfg *config.Config) {
			cfg.EgressProxy, cfg.EgressProxyUser, cfg.EgressProxyPassword = px.URL(), user, password
			cfg.FailingAfter, cfg.AutoDisableAfter = 2, autoDisableAfter
		}
	})
	ctx := context.Background()
	appID := h.createApp()
	rc := newReceiver(t, nil)
	// No pooled tunnel outlives the proxy: each attempt dials anew.
	rc.srv.Config.SetKeepAlivesEnabled(false)
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s"}})
	rc.setSecrets(ep.Secret)

	// Deliveries arrive through the proxy, signed as ever.
	for i := range 3 {
		ev := h.send(appID, "order.paid", map[string]any{"i": i})
		h.waitDelivery(appID, ev.Deliveries[0].ID, 30*time.Second, delivery.StatusSucceeded)
	}
	require.Len(t, rc.receipts(), 3)
	for _, r := range rc.receipts() {
		require.True(t, r.StdValid, "signature verified by the receiver")
	}
	require.NotEmpty(t, px.Connects(), "through the proxy")
	for _, c := range px.Connects() {
		require.Equal(t, rc.srv.Listener.Addr().String(), c, "CONNECT to the checked address")
	}

	// The proxy goes away: every attempt is the proxy's fault, recorded
	// as such, and the endpoint's streak does not move.
	px.Close()
	const proxyDead = 12 // > store.AutoDisableMinDefault
	require.Greater(t, proxyDead, store.AutoDisableMinDefault)
	sendAll := func(n int) []string {
		var ids []string
		for i := range n {
			ev := h.send(appID, "order.paid", map[string]any{"i": i})
			for _, d := range ev.Deliveries {
				if d.EndpointID == ep.ID {
					ids = append(ids, d.ID)
				}
			}
		}
		return ids
	}
	firstProxyFailure := time.Now()
	ids := sendAll(proxyDead)
	for _, id := range ids {
		d := h.waitDelivery(appID, id, 30*time.Second, delivery.StatusDeadLettered)
		require.Equal(t, string(delivery.ClassProxy), d.LastAttempt.Class, d.LastAttempt.Error)
		require.Nil(t, d.LastAttempt.StatusCode)
		require.Contains(t, d.LastAttempt.Error, "egress proxy "+px.URL())
		require.Contains(t, d.LastAttempt.Error, "connection refused")
		require.NotContains(t, d.LastAttempt.Error, password)
	}
	require.Len(t, rc.receipts(), 3, "nothing reached the receiver")

	// The control: an endpoint the operator sends direct (the proxy is
	// down, so this also shows the override bypasses it) that answers 500
	// is made failing and disabled by the same thresholds.
	bad := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	direct := h.createEndpoint(appID, map[string]any{"url": bad.URL(), "retry_schedule": []string{"0s"}, "egress_proxy": "direct"})
	directDisabled := func() bool {
		var e struct {
			Disabled bool `json:"disabled"`
		}
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/endpoints/"+direct.ID, nil, &e))
		return e.Disabled
	}
	// One dead letter each round (each waited for) until it is disabled:
	// at least the minimum of them, over longer than the window.
	for round := 0; !directDisabled(); round++ {
		require.Less(t, round, 100, "the endpoint's own failures disable it")
		for _, d := range h.send(appID, "order.paid", map[string]any{}).Deliveries {
			h.waitDelivery(appID, d.ID, 30*time.Second, delivery.StatusDeadLettered, delivery.StatusCanceled)
		}
	}
	require.GreaterOrEqual(t, len(bad.receipts()), store.AutoDisableMinDefault, "the direct endpoint reached its receiver while the proxy was down")
	t.Logf("%d proxy_error dead letters left the endpoint alone; the direct endpoint was disabled after %d of its own 500s", proxyDead, len(bad.receipts()))

	// More proxy dead letters after the window: still nothing.
	require.Greater(t, time.Since(firstProxyFailure), autoDisableAfter)
	for _, id := range sendAll(2) {
		h.waitDelivery(appID, id, 30*time.Second, delivery.StatusDeadLettered)
	}
	var failures, proxyAttempts int
	var failing, disabled bool
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT consecutive_failures, failing, disabled FROM endpoints WHERE id = $1`, ep.ID).Scan(&failures, &failing, &disabled))
	require.Equal(t, []any{0, false, false}, []any{failures, failing, disabled}, "proxy failures say nothing about the endpoint")
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM attempts a JOIN deliveries d ON d.id = a.delivery_id
		WHERE d.endpoint_id = $1 AND a.class = $2`, ep.ID, delivery.ClassProxy).Scan(&proxyAttempts))
	require.GreaterOrEqual(t, proxyAttempts, proxyDead+2)
	t.Logf("%d proxy_error attempts over %s; consecutive_failures %d", proxyAttempts, time.Since(firstProxyFailure).Round(time.Millisecond), failures)
	require.Equal(t, float64(proxyAttempts), scrape(t, "http://"+h.worker.MetricsAddr+"/metrics")("hookrelay_attempts_total", "class", string(delivery.ClassProxy)))

	// The proxy's credentials never reach a log line.
	logs := h.logs.String()
	require.Contains(t, logs, "proxy_error", "the attempts were logged")
	require.NotContains(t, logs, password)
	require.NotContains(t, logs, base64.StdEncoding.EncodeToString([]byte(user+":"+password)))

	// Outside dev mode, a loopback or metadata target is refused before
	// the CONNECT.
	{
		px, err := egresstest.Start(egresstest.Options{})
		require.NoError(t, err)
		t.Cleanup(px.Close)
		// The second deployment takes the same task queue.
		h.stopWorker()
		h := newHarness(t, func(c *harnessConfig) {
			c.production = true
			c.configure = func(cfg *config.Config) { cfg.EgressProxy = px.URL() }
		})
		appID := h.createApp()
		ln, accepted := countingListener(t)
		// The API refuses these literals at creation; a name that
		// resolves to one passes it, so the dial-time check is what
		// stands: the endpoints are written as such a name would be.
		want := map[string]string{}
		for url, reason := range map[string]string{
			"https://" + ln.Addr().String() + "/hook":   "not allowed (loopback)",
			"https://169.254.169.254/latest/meta-data/": "not allowed (link-local)",
		} {
			e, _, err := h.store.CreateEndpoint(ctx, store.Endpoint{AppID: appID, URL: url, Environment: "live", EventTypes: []string{},
				Headers: map[string]string{}, RetrySchedule: []time.Duration{0}, Deadline: time.Hour, RequestTimeout: time.Second})
			require.NoError(t, err)
			want[e.ID] = reason
		}
		ev := h.send(appID, "order.paid", map[string]any{})
		require.Len(t, ev.Deliveries, 2)
		for _, d := range ev.Deliveries {
			got := h.waitDelivery(appID, d.ID, 30*time.Second, delivery.StatusDeadLettered)
			require.Equal(t, string(delivery.ClassPermanent), got.LastAttempt.Class)
			require.Contains(t, got.LastAttempt.Error, want[d.EndpointID])
			require.True(t, strings.HasPrefix(*got.DeadLetterReason, "permanent failure"), *got.DeadLetterReason)
		}
		require.Empty(t, px.Connects(), "the proxy heard of neither target")
		require.Zero(t, accepted.Load(), "nothing reached the loopback target")
	}
}
