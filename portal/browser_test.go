package portal_test

import (
	"context"
	"flag"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/browser"
)

// screenshots, when set, is where the browser tests write their screenshots
// (the README's are made with -screenshots ../docs/portal).
var screenshots = flag.String("screenshots", "", "directory the browser tests write page screenshots to")

// shoot saves a screenshot of the whole page as name.png.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.Greater(t, len(png), 1000)
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// stepTimeout bounds one sequence of browser steps.
const stepTimeout = 20 * time.Second

// do runs steps in the browser, failing the test past stepTimeout.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, steps...))
}

// hostile is what a stranger's server answered: markup that would run if
// the portal rendered it as HTML.
const hostile = `<script>window.__pwned = "script"</script><img src=x onerror="window.__pwned = 'img'"><b>bold?</b>`

// dashboard is a provider's own dashboard on another site (localhost,
// while the portal is on 127.0.0.1): a page linking to one portal link and
// a page framing another. Its origin exists before the portal starts, so
// the portal's CSP can name it; the links are set once they are made.
type dashboard struct {
	origin       string
	link, framed string
}

func newDashboard(t *testing.T) *dashboard {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &dashboard{origin: "http://localhost:" + strings.Split(l.Addr().String(), ":")[1]}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Acme dashboard</title><h1>Acme dashboard</h1><a id="open" href="%s">Webhook settings</a>`, html.EscapeString(d.link))
	})
	mux.HandleFunc("/frame", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Acme dashboard</title><h1>Acme dashboard</h1><iframe id="portal" src="%s" width="1200" height="700"></iframe>`, html.EscapeString(d.framed))
	})
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	srv.Start()
	t.Cleanup(srv.Close)
	return d
}

// TestPortalInBrowser drives the portal in headless Chromium, over TLS
// with the production cookie (Secure; SameSite=None; Partitioned):
//   - a link on another site opens it (a top-level cross-site navigation
//     whose redirect must carry the new cookie), and so does an iframe of
//     another site;
//   - the delivery log, a dead letter's detail with its last status code
//     and its hostile response excerpt shown as text (no script ran);
//   - "Resend this", endpoint create (secret shown once), edit with an
//     invalid value, send test event, rotate, range replay with its count,
//     the catalog and the stats chart;
//
// and screenshots every page.
func TestPortalInBrowser(t *testing.T) {
	ctx := browser.New(t)
	d := newDashboard(t)
	dash := d.origin
	e := newEnv(t, envConfig{tls: true, frameAncestors: []string{dash}})

	// The operator's catalog, which every app sees.
	require.Equal(t, http.StatusCreated, e.call("POST", "/v1/event-types", map[string]any{"name": "invoice.paid", "description": "An invoice was paid in full.",
		"schema": map[string]any{"type": "object", "required": []string{"invoice_id", "amount"},
			"properties": map[string]any{"invoice_id": map[string]any{"type": "string"}, "amount": map[string]any{"type": "integer"}}}}, nil))
	require.Equal(t, http.StatusCreated, e.call("POST", "/v1/event-types", map[string]any{"name": "invoice.voided", "description": "An invoice was voided before payment."}, nil))
	orders := e.endpoint("https://orders.acme.test/webhooks", "invoice.paid")
	ledger := e.endpoint("https://ledger.acme.test/hooks")
	var dead string
	for i := range 6 {
		dl := e.publish("invoice.paid", map[string]any{"invoice_id": fmt.Sprintf("in_%03d", i), "amount": 1200 + i})
		e.attempt(dl[ledger], 1, 200, delivery.ClassSuccess, "ok")
		if i == 5 {
			dead = dl[orders]
			e.attempt(dead, 1, 502, delivery.ClassRetryable, "Bad Gateway")
			e.attempt(dead, 2, 500, delivery.ClassRetryable, hostile)
			e.finish(dead, delivery.StatusDeadLettered, "retry schedule exhausted")
		} else {
			e.attempt(dl[orders], 1, 200, delivery.ClassSuccess, `{"received":true}`)
		}
	}
	full := map[string]any{"capabilities": []string{"resend", "manage_endpoints", "rotate_secret"}}
	d.link, d.framed = e.link(full), e.link(map[string]any{})

	// A link on the provider's site, followed top-level.
	do(t, ctx,
		chromedp.Navigate(dash+"/"),
		chromedp.Click(chromedp.CSS("#open")),
		chromedp.WaitVisible(chromedp.CSS("#deliveries")),
	)
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Equal(t, e.srv.URL+"/portal/deliveries", loc)
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#deliveries tr[data-delivery]").length`))
	require.NoError(t, err)
	require.Equal(t, 12, rows)
	shoot(t, ctx, "delivery-log")

	// The dead letter: the three questions, the last code and the hostile
	// excerpt as text.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`tr[data-delivery="`+dead+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#questions")),
	)
	state, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#state")))
	require.NoError(t, err)
	require.Equal(t, "dead_lettered", state)
	why, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#why")))
	require.NoError(t, err)
	require.Contains(t, why, "HTTP 500")
	code, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#attempts tbody tr:first-child td.code")))
	require.NoError(t, err)
	require.Equal(t, "500", code)
	excerpt, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#attempts tbody tr:first-child pre.excerpt")))
	require.NoError(t, err)
	require.Equal(t, hostile, excerpt, "shown as text, character for character")
	pwned, err := chromedp.Run(ctx, chromedp.Evaluate[string](`String(window.__pwned)`))
	require.NoError(t, err)
	require.Equal(t, "undefined", pwned, "no script from the response ran")
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main img, main b").length`))
	require.NoError(t, err)
	require.Zero(t, imgs, "no element from the response was made")
	payload, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#payload")))
	require.NoError(t, err)
	require.Contains(t, payload, `"invoice_id": "in_005"`)
	shoot(t, ctx, "delivery-detail")

	do(t, ctx,
		chromedp.Click(chromedp.CSS("#resend")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	state, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#state")))
	require.NoError(t, err)
	require.Equal(t, "pending", state, "queued for its resend")
	replays, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#replays")))
	require.NoError(t, err)
	require.Contains(t, replays, "portal session")

	// Endpoints: the list, a new one (secret once), an invalid edit.
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/endpoints"),
		chromedp.WaitVisible(chromedp.CSS("#endpoints")),
	)
	shoot(t, ctx, "endpoints")
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#new-endpoint")),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-form")),
		chromedp.SendKeys(chromedp.CSS(`input[name="url"]`), "https://crm.acme.test/in"),
		chromedp.SendKeys(chromedp.CSS(`input[name="description"]`), "CRM sync"),
		chromedp.Click(chromedp.CSS(`input[value="invoice.voided"]`)),
	)
	shoot(t, ctx, "endpoint-new")
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#secret")),
	)
	secret, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#secret")))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	shoot(t, ctx, "endpoint-secret")
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#done")),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-form")),
	)
	again, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
	require.NoError(t, err)
	require.NotContains(t, again, secret, "the secret is shown once")
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS(`input[name="retry_schedule"]`), "1s, soon"),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#error")))
	require.NoError(t, err)
	require.Contains(t, msg, "retry_schedule")

	// The dead letter's endpoint: test event, range replay count.
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/endpoints/"+orders),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-form")),
	)
	shoot(t, ctx, "endpoint")
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#send-test")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	var tests int
	require.NoError(t, e.st.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM deliveries d JOIN events ev ON ev.app_id = d.app_id AND ev.id = d.event_id WHERE ev.type = 'webhook.test' AND d.endpoint_id = $1`, orders).Scan(&tests))
	require.Equal(t, 1, tests, "a test event for this endpoint only, whatever its filter")
	e.finish(dead, delivery.StatusDeadLettered, "retry schedule exhausted again")
	_, err = e.st.Pool().Exec(context.Background(), `DELETE FROM outbox`)
	require.NoError(t, err)
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#count-replay")),
		chromedp.WaitVisible(chromedp.CSS("#count")),
	)
	count, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#count")))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(count, "1 dead-lettered delivery"), count)
	shoot(t, ctx, "replay-range")
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#confirm-replay")),
		chromedp.WaitVisible(chromedp.CSS("#deliveries")),
	)

	// Framed by the provider's dashboard on another site: the framed link
	// opens a session whose cookie the frame then sends.
	do(t, ctx, chromedp.Navigate(dash+"/frame"), chromedp.WaitVisible(chromedp.CSS("#portal")))
	frames, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS("#portal")))
	require.NoError(t, err)
	var heading string
	require.Eventually(t, func() bool {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		frames, err = chromedp.Run(tctx, chromedp.Nodes(chromedp.CSS("#portal")))
		if err != nil {
			return false
		}
		heading, err = chromedp.Run(tctx, chromedp.Text(chromedp.CSS("h1"), chromedp.FromNode(frames[0])))
		return err == nil && heading == "Delivery log"
	}, 20*time.Second, 200*time.Millisecond, "the framed portal shows %q", heading)
	shoot(t, ctx, "framed")

	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/event-types"),
		chromedp.WaitVisible(chromedp.CSS(`[data-type="invoice.paid"]`)),
		chromedp.Click(chromedp.CSS(`[data-type="invoice.paid"] summary`)),
	)
	shoot(t, ctx, "event-types")
	// Spread over the day (created_at only: the log's order is by ID), so
	// the chart has bars in several hours.
	_, err = e.st.Pool().Exec(context.Background(), `UPDATE deliveries SET created_at = created_at - (abs(hashtext(id)) % 20) * interval '1 hour'
		WHERE id <> $1 AND status = 'succeeded'`, dead)
	require.NoError(t, err)
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/stats"),
		chromedp.WaitVisible(chromedp.CSS("#chart")),
	)
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#chart rect").length`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, bars, 2, "this hour's succeeded and in-flight segments")
	shoot(t, ctx, "stats")

}
