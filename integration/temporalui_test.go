package integration

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	workflowpb "go.temporal.io/api/workflow/v1"

	"hookrelay/config"
	"hookrelay/delivery"
	"hookrelay/internal/browser"
)

// screenshotsEnv, set to 1, makes TestTemporalUIReadsLikeTheDeliveryLog
// save the README's screenshots in docs/temporal-ui.
const screenshotsEnv = "HOOKRELAY_SCREENSHOTS"

// TestTemporalUIReadsLikeTheDeliveryLog opens the embedded Temporal Web UI
// in headless Chromium after two events went out through a carrier (one
// delivered at once, one failing its first attempt and delivered on its
// second): the workflow list shows both workflows with the delivery's
// search attributes (UI 2.54's list shows no summaries: Temporal's list
// API does not return them); the delivery's page shows its summary, its
// details, its last attempt's result, and its activities and timers by
// their summaries; its carrier's page shows the carrier's summary.
func TestTemporalUIReadsLikeTheDeliveryLog(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	uiAddr := l.Addr().String()
	require.NoError(t, l.Close())
	require.NoError(t, temporal.StartUI(uiAddr, slog.New(slog.DiscardHandler)))
	h := newHarness(t, inMode(config.FirstAttemptsCarrier))
	ctx := browser.New(t)

	rc, _ := firstFails(t)
	// localhost, so the summaries read as a host name.
	base := strings.Replace(rc.URL(), "127.0.0.1", "localhost", 1)
	host := strings.TrimPrefix(base, "http://")
	host = host[:strings.IndexByte(host, '/')]
	appID := h.createApp()
	h.createEndpoint(appID, map[string]any{"url": base, "event_types": []string{"invoice.failed"}, "retry_schedule": []string{"0s", "1s"}})
	flakyEp := h.createEndpoint(appID, map[string]any{"url": base + "?flaky=1", "event_types": []string{"invoice.failed"}, "retry_schedule": []string{"0s", "1s"}})
	// One event, two deliveries written by one statement: one dispatcher
	// round claims both, so one carrier carries them (two events could be
	// claimed in two rounds on a loaded machine, each then on its own).
	var ok, flaky string
	for _, d := range h.send(appID, "invoice.failed", map[string]any{"invoice": "in_1"}).Deliveries {
		if d.EndpointID == flakyEp.ID {
			flaky = d.ID
		} else {
			ok = d.ID
		}
	}
	h.waitDelivery(appID, ok, 30*time.Second, delivery.StatusSucceeded)
	h.waitDelivery(appID, flaky, 30*time.Second, delivery.StatusSucceeded)
	desc, err := h.client.DescribeWorkflowExecution(context.Background(), flaky, "")
	require.NoError(t, err)
	runID := desc.WorkflowExecutionInfo.Execution.RunId

	step := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](pageText))
			t.Fatalf("%v; the page reads:\n%s", err, page)
		}
	}
	// shows waits until the page's text holds every one of want.
	shows := func(want ...string) chromedp.Action[chromedp.Void] {
		js := "(() => { const t = " + pageText + "; return true"
		for _, w := range want {
			js += " && t.includes(" + jsString(w) + ")"
		}
		js += "; })()"
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(50*time.Second))
	}
	var carriers []*workflowpb.WorkflowExecutionInfo
	require.Eventually(t, func() bool {
		carriers = h.list("HookrelayDeliveries = '" + flaky + "'")
		return len(carriers) == 1
	}, 10*time.Second, 100*time.Millisecond, "the failing delivery went on from its carrier")
	parent := carriers[0].Execution
	ns := "http://" + uiAddr + "/namespaces/default/workflows"

	// The list: one row per workflow, with the deliveries' search
	// attributes as columns (the UI's column picker keeps its choice in
	// local storage; here it is set before the page loads).
	columns := `{"default":[{"label":"Status"},{"label":"Workflow ID"},{"label":"Type"},{"label":"HookrelayEventType"},` +
		`{"label":"HookrelayState"},{"label":"End"},{"label":"HookrelayApp"}]}`
	// Wide enough for the list's columns.
	step(chromedp.EmulateViewport(1600, 900), chromedp.Navigate("http://"+uiAddr+"/"),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem("namespace-workflow-table-columns", `+jsString(columns)+`)`),
		// Filtered to the two workflows: tests that run beside this one
		// start hundreds of others, which would push these two off the
		// list's first page.
		chromedp.Navigate(ns+"?query="+url.QueryEscape("WorkflowId = '"+flaky+"' OR WorkflowId = '"+parent.WorkflowId+"'")), shows(flaky, parent.WorkflowId, "invoice.failed", "succeeded", "CarrierWorkflow"))
	shoot(t, ctx, "workflows")

	// A delivery's summary, its details and what its last attempt did.
	summary := "invoice.failed → " + host + " · app " + t.Name()
	step(chromedp.Navigate(ns+"/"+flaky+"/"+runID+"/user-metadata"),
		shows(summary, "Schedule 0s, 1s (2 attempts)", "Deadline 1h15m0s (until", "attempt 2: POST "+host+" → 200 in"))
	shoot(t, ctx, "delivery-summary")

	// Its history: each activity by its summary.
	step(chromedp.Navigate(ns+"/"+flaky+"/"+runID+"/history/compact"), shows(summary, "POST "+host+" (attempt 2)", " for attempt 2"),
		chromedp.Evaluate[chromedp.Void](`Array.from(document.querySelectorAll("h1,h2,h3")).find(e => e.innerText.startsWith("Event History")).scrollIntoView()`))
	shoot(t, ctx, "delivery-history")

	// Its carrier, which made its first attempt.
	step(chromedp.Navigate(ns+"/"+parent.WorkflowId+"/"+parent.RunId+"/user-metadata"), shows("carrier: ", " first attempt", summary))
}

// pageText is JavaScript for the page's text with that of its frames: the
// UI renders summaries and details (Temporal Markdown) in iframes.
const pageText = `[document.body ? document.body.innerText : ""].concat(Array.from(document.querySelectorAll("iframe"),
	f => f.contentDocument && f.contentDocument.body ? f.contentDocument.body.innerText : "")).join("\n")`

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// shoot saves a screenshot of the browser's window as docs/temporal-ui/
// name.png when screenshotsEnv asks for it.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv(screenshotsEnv) != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	dir := filepath.Join("..", "docs", "temporal-ui")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}
