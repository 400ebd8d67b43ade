package portal_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"hookrelay/internal/browser"
)

// text is the text of the element sel selects, failing the test past
// stepTimeout.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}

// eval evaluates a JavaScript expression in the page, failing the test
// past stepTimeout.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

// nothingRan checks that no markup from a filter or an event became a
// script or an element of the page.
func nothingRan(t *testing.T, ctx context.Context) {
	t.Helper()
	require.Equal(t, "undefined", eval[string](t, ctx, `String(window.__pwned)`), "no script ran")
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll("main script, main img, main b").length`), "no element was made")
}

// TestFiltersInBrowser drives payload filters in headless Chromium:
//   - a bad filter on the create form shows CEL's error (line and column)
//     next to the field, keeps what was typed and saves nothing;
//   - "Test against recent events" counts the verdicts on the events
//     published before, per row too, and saves nothing;
//   - the endpoint is created with its filter, which the list shows;
//   - an event the filter skips shows "filtered out" on its page, reached
//     from a delivery of another endpoint and by its ID, with the filter's
//     error when it failed;
//   - a filter, a CEL error and an evaluation error holding markup are
//     shown as text; clearing the field removes the filter.
func TestFiltersInBrowser(t *testing.T) {
	ctx := browser.New(t)
	e := newEnv(t, envConfig{})
	bg := context.Background()
	ledger := e.endpoint("https://ledger.acme.test/hooks")
	big1, _ := e.event("invoice.paid", map[string]any{"amount": 9000, "currency": "usd"})
	big2, _ := e.event("invoice.paid", map[string]any{"amount": 12000, "currency": "usd"})
	small, _ := e.event("invoice.paid", map[string]any{"amount": 100, "currency": "usd"})
	noCurrency, _ := e.event("invoice.paid", map[string]any{"amount": 7000})
	voided, _ := e.event("invoice.voided", map[string]any{"amount": 9000, "currency": "usd"})
	link := e.link(map[string]any{"capabilities": []string{"manage_endpoints"}})
	endpoints := func() int {
		var n int
		require.NoError(t, e.st.Pool().QueryRow(bg, `SELECT count(*) FROM endpoints WHERE app_id = $1 AND deleted_at IS NULL`, e.app.ID).Scan(&n))
		return n
	}
	const good = `data.amount >= 5000 && data.currency == 'usd'`

	// A filter that does not compile: its error next to the field.
	do(t, ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#deliveries")),
		chromedp.Navigate(e.srv.URL+"/portal/endpoints/new"),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-form")),
		chromedp.SendKeys(chromedp.CSS(`input[name="url"]`), "https://crm.acme.test/in"),
		chromedp.Click(chromedp.CSS(`input[value="invoice.paid"]`)),
		chromedp.SetValue(chromedp.CSS("#filter"), "data.amount >="),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#filter-error")),
	)
	msg := text(t, ctx, "#filter-error")
	require.Contains(t, msg, "filter: ERROR: <input>:1:15: Syntax error", "CEL's message with line and column")
	require.Contains(t, msg, "| data.amount >=")
	require.Equal(t, "true", eval[string](t, ctx, `document.querySelector("#filter").getAttribute("aria-invalid")`))
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll("#error").length`), "shown at the field only")
	require.Equal(t, "data.amount >=", eval[string](t, ctx, `document.querySelector("#filter").value`), "kept as typed")
	require.Equal(t, "https://crm.acme.test/in", eval[string](t, ctx, `document.querySelector('input[name="url"]').value`))
	require.True(t, eval[bool](t, ctx, `document.querySelector('input[value="invoice.paid"]').checked`))
	require.Equal(t, 1, endpoints(), "nothing saved")

	// The preview: the verdicts on the five events published before.
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#filter"), good),
		chromedp.Click(chromedp.CSS("#test-filter")),
		chromedp.WaitVisible(chromedp.CSS("#filter-preview")),
	)
	require.Equal(t, "2 of 5 recent events would be delivered; 1 filtered out; 1 error; 1 not subscribed. Nothing was saved.", text(t, ctx, "#preview-counts"))
	verdicts := map[string]string{big1: "matched", big2: "matched", small: "not_matched", noCurrency: "error", voided: "not_subscribed"}
	for evt, want := range verdicts {
		got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('#preview-events tr[data-event=%q]').dataset.verdict`, evt))
		require.Equal(t, want, got, evt)
	}
	require.Equal(t, "filter error", text(t, ctx, fmt.Sprintf(`#preview-events tr[data-event=%q] .verdict`, noCurrency)))
	require.Equal(t, "no such key: currency", text(t, ctx, fmt.Sprintf(`#preview-events tr[data-event=%q] pre`, noCurrency)))
	require.Equal(t, good, eval[string](t, ctx, `document.querySelector("#filter").value`))
	require.Equal(t, "https://crm.acme.test/in", eval[string](t, ctx, `document.querySelector('input[name="url"]').value`))
	require.Equal(t, 1, endpoints(), "a preview saves nothing")

	// Saved with its filter.
	do(t, ctx, chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#secret")))
	var crm, saved string
	require.NoError(t, e.st.Pool().QueryRow(bg, `SELECT id, filter FROM endpoints WHERE url = 'https://crm.acme.test/in'`).Scan(&crm, &saved))
	require.Equal(t, good, saved)
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/endpoints"),
		chromedp.WaitVisible(chromedp.CSS("#endpoints")),
	)
	require.Equal(t, good, text(t, ctx, fmt.Sprintf(`tr[data-endpoint=%q] pre.filter`, crm)))

	// An event the filter skips: "filtered out" on its page, reached from
	// the delivery to the ledger.
	skipped, dl := e.event("invoice.paid", map[string]any{"amount": 10, "currency": "usd"})
	require.NotContains(t, dl, crm)
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/deliveries/"+dl[ledger]),
		chromedp.WaitVisible(chromedp.CSS("#questions")),
	)
	require.Equal(t, "filtered out by 1 of your endpoints", text(t, ctx, "#filtered-out-count"))
	do(t, ctx, chromedp.Click(chromedp.CSS("#event-link")), chromedp.WaitVisible(chromedp.CSS("#filtered-out")))
	require.Equal(t, skipped, text(t, ctx, "#event-id"))
	row := text(t, ctx, fmt.Sprintf(`#filtered-out tr[data-endpoint=%q]`, crm))
	require.Contains(t, row, "https://crm.acme.test/in")
	require.Contains(t, row, "filtered out the filter was false for this event")
	require.Contains(t, row, good, "its filter now")
	require.Equal(t, "pending", text(t, ctx, fmt.Sprintf(`#event-deliveries tr[data-endpoint=%q] .status`, ledger)))

	// A filter holding markup, in the preview of the saved endpoint.
	const scriptFilter = `type == '<script>window.__pwned = "filter"</script>'`
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/endpoints/"+crm),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-form")),
	)
	require.Equal(t, good, eval[string](t, ctx, `document.querySelector("#filter").value`))
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#filter"), scriptFilter),
		chromedp.Click(chromedp.CSS("#test-filter")),
		chromedp.WaitVisible(chromedp.CSS("#filter-preview")),
	)
	require.Equal(t, "0", text(t, ctx, "#preview-matched"))
	require.Equal(t, scriptFilter, eval[string](t, ctx, `document.querySelector("#filter").value`), "shown as typed, as text")
	nothingRan(t, ctx)
	require.Equal(t, good, e.filterOf(crm), "a preview saves nothing")

	// An evaluation error holding an event's markup: as text in the
	// preview and on the event's page, found by its ID.
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/endpoints/"+crm),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-form")),
		chromedp.SetValue(chromedp.CSS("#filter"), "data[data.k] == 1"),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	require.Equal(t, "data[data.k] == 1", e.filterOf(crm))
	hostileEvt, dl := e.event("invoice.paid", map[string]any{"k": hostile})
	require.NotContains(t, dl, crm)
	do(t, ctx,
		chromedp.Click(chromedp.CSS("#test-filter")),
		chromedp.WaitVisible(chromedp.CSS("#filter-preview")),
	)
	require.Equal(t, "no such key: "+hostile, text(t, ctx, fmt.Sprintf(`#preview-events tr[data-event=%q] pre`, hostileEvt)))
	nothingRan(t, ctx)
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/deliveries"),
		chromedp.WaitVisible(chromedp.CSS("#find-event")),
		chromedp.SetValue(chromedp.CSS(`#find-event input[name="id"]`), hostileEvt),
		chromedp.Click(chromedp.CSS("#find-event button")),
		chromedp.WaitVisible(chromedp.CSS("#filtered-out")),
	)
	require.Equal(t, "no such key: "+hostile, text(t, ctx, fmt.Sprintf(`#filtered-out tr[data-endpoint=%q] pre.filter-error`, crm)))
	nothingRan(t, ctx)

	// A CEL error quoting markup; then the filter cleared.
	do(t, ctx,
		chromedp.Navigate(e.srv.URL+"/portal/endpoints/"+crm),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-form")),
		chromedp.SetValue(chromedp.CSS("#filter"), `data.x == '<img src=x onerror="window.__pwned = 1">' &&`),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#filter-error")),
	)
	require.Contains(t, text(t, ctx, "#filter-error"), `| data.x == '<img src=x onerror="window.__pwned = 1">' &&`)
	nothingRan(t, ctx)
	require.Equal(t, "data[data.k] == 1", e.filterOf(crm), "nothing saved")
	do(t, ctx,
		chromedp.Clear(chromedp.CSS("#filter")),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	require.Empty(t, e.filterOf(crm), "cleared")
}
