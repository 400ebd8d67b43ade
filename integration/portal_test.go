package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/browser"
)

// TestPortalResendInBrowser is the first seed's console on the real stack
// (API and worker processes, Temporal, Postgres), in dev mode (plain http,
// SameSite=Lax cookie): the provider's page on another site links to a
// portal link; the subscriber sees the delivery log, opens the dead letter,
// reads its last status code and the receiver's hostile body as text (no
// script ran), fixes the receiver, presses "Resend this" and sees a new
// attempt with the same event ID succeed.
func TestPortalResendInBrowser(t *testing.T) {
	h := newHarness(t)
	ctx := browser.New(t)
	var fixed atomic.Bool
	var mu sync.Mutex
	var seen []string // the event ID of every request received
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &env)
		mu.Lock()
		seen = append(seen, env.ID+"|"+r.Header.Get("webhook-id"))
		mu.Unlock()
		if fixed.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">route not deployed`)
	}))
	defer recv.Close()
	app := h.createApp()
	ep := h.createEndpoint(app, map[string]any{"url": recv.URL + "/hooks"})
	ev := h.send(app, "payment.succeeded", map[string]any{"amount": 4200})
	dlv := ev.Deliveries[0].ID
	h.waitDelivery(app, dlv, 20*time.Second, delivery.StatusDeadLettered)

	var link struct{ URL string }
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/apps/"+app+"/portal-links", map[string]any{"capabilities": []string{"resend"}, "endpoint_ids": []string{ep.ID}}, &link))
	require.True(t, strings.HasPrefix(link.URL, h.url+"/portal/open?token="), link.URL)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><a id="open" href="%s">Webhooks</a>`, link.URL)
	}))
	site.Listener = l
	site.Start()
	defer site.Close()

	step := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, chromedp.Do(sctx, steps...))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return s
	}
	// localhost is another site than the API's 127.0.0.1.
	step(chromedp.Navigate("http://localhost:"+strings.Split(l.Addr().String(), ":")[1]+"/"),
		chromedp.Click(chromedp.CSS("#open")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-delivery="`+dlv+`"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-delivery="`+dlv+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#questions")))
	require.Equal(t, "dead_lettered", text("#state"))
	require.Equal(t, "404", text("#attempts tbody tr:first-child td.code"))
	require.Equal(t, `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">route not deployed`,
		text("#attempts tbody tr:first-child pre.excerpt"))
	pwned, err := chromedp.Run(ctx, chromedp.Evaluate[string](`String(window.__pwned)`))
	require.NoError(t, err)
	require.Equal(t, "undefined", pwned)

	fixed.Store(true)
	step(chromedp.Click(chromedp.CSS("#resend")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	h.waitDelivery(app, dlv, 20*time.Second, delivery.StatusSucceeded)
	step(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#attempts tr[data-class="success"]`)))
	require.Equal(t, "succeeded", text("#state"))
	require.Equal(t, "200", text("#attempts tbody tr:first-child td.code"))
	require.Contains(t, text("#replays"), "portal session")
	require.Equal(t, ev.ID, text("#event-id"))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2)
	require.Equal(t, seen[0], seen[1], "the resend carries the same event and webhook ID")
	require.True(t, strings.HasPrefix(seen[0], ev.ID+"|"), seen[0])
}
