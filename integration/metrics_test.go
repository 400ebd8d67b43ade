package integration

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
)

// scrape reads a /metrics page: value sums by series name and label set
// ("name" or "name{label=value}", one label).
func scrape(t *testing.T, url string) func(name string, label ...string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return func(name string, label ...string) float64 {
		f, ok := families[name]
		if !ok {
			return 0
		}
		total := 0.0
		for _, m := range f.Metric {
			if len(label) == 2 && !hasLabel(m, label[0], label[1]) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
		return total
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestMetricsMatchTheDatabase: after a mixed run (successes, a retry, a
// dead letter, a 429, shed ingests) every series agrees with Postgres.
func TestMetricsMatchTheDatabase(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *harnessConfig) { c.maxBacklog = 5 })
	appID := h.createApp()
	var mu sync.Mutex
	seen := map[string]int{}
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mode := r.URL.Query().Get("mode")
		mu.Lock()
		seen[mode]++
		first := seen[mode] == 1
		mu.Unlock()
		switch {
		case mode == "dead":
			w.WriteHeader(http.StatusNotFound)
		case mode == "flaky" && first:
			w.WriteHeader(http.StatusBadGateway)
		case mode == "throttle" && first:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	for _, mode := range []string{"ok", "dead", "flaky", "throttle"} {
		h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?mode=" + mode, "event_types": []string{"m." + mode}, "retry_schedule": []string{"0s", "1s", "1s"}})
	}
	// With no worker process the outbox fills, and ingest sheds past 5.
	h.stopWorker()
	var accepted, shed int
	send := func(typ string) {
		var ev eventResp
		switch code := h.do("POST", "/v1/apps/"+appID+"/events", map[string]any{"type": typ, "data": map[string]any{}}, &ev); code {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			shed++
		default:
			t.Fatalf("ingest answered %d", code)
		}
	}
	for _, typ := range []string{"m.ok", "m.ok", "m.dead", "m.flaky", "m.throttle"} {
		send(typ)
	}
	require.Eventually(t, func() bool { send("m.ok"); return shed > 0 }, 10*time.Second, 100*time.Millisecond)
	h.startWorker()

	ctx := context.Background()
	db := func(q string, args ...any) float64 {
		var n float64
		require.NoError(t, h.store.Pool().QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool {
		return db(`SELECT count(*) FROM deliveries WHERE status IN ('pending', 'delivering')`) == 0 && db(`SELECT count(*) FROM outbox`) == 0
	}, 30*time.Second, 100*time.Millisecond)
	api := scrape(t, h.url+"/metrics")
	worker := scrape(t, "http://"+h.worker.MetricsAddr+"/metrics")

	require.Equal(t, db(`SELECT count(*) FROM events WHERE app_id = $1`, appID), api("hookrelay_events_ingested_total", "outcome", "accepted"), "events accepted through the API (not operational ones)")
	require.Equal(t, float64(accepted), api("hookrelay_events_ingested_total", "outcome", "accepted"))
	require.Equal(t, float64(shed), api("hookrelay_events_ingested_total", "outcome", "shed"))
	require.Equal(t, db(`SELECT count(*) FROM deliveries WHERE status = $1`, delivery.StatusDeadLettered), api("hookrelay_dead_letters"))
	require.Equal(t, 1.0, api("hookrelay_dead_letters"))
	require.Zero(t, api("hookrelay_outbox_backlog"))
	require.Zero(t, api("hookrelay_state_scrape_failed"))

	for _, class := range delivery.Classes() {
		require.Equal(t, db(`SELECT count(*) FROM attempts WHERE class = $1`, class), worker("hookrelay_attempts_total", "class", string(class)), class)
	}
	require.Equal(t, 1.0, worker("hookrelay_attempts_total", "class", string(delivery.ClassThrottled)))
	require.Equal(t, db(`SELECT count(*) FROM attempts WHERE status_code BETWEEN 500 AND 599`), worker("hookrelay_attempts_total", "code", "5xx"))
	require.Equal(t, db(`SELECT count(*) FROM attempts`), worker("hookrelay_attempt_duration_seconds"))
	require.Equal(t, db(`SELECT count(*) FROM deliveries`), worker("hookrelay_first_attempt_latency_seconds"), "one first attempt each")
	require.Equal(t, db(`SELECT count(*) FROM deliveries WHERE status = $1`, delivery.StatusSucceeded), worker("hookrelay_deliveries_finished_total", "status", "succeeded"))
	require.Equal(t, 1.0, worker("hookrelay_deliveries_finished_total", "status", "dead_lettered"))
	// The 404 dead letter is counted by its last attempt's class.
	require.Equal(t, db(`SELECT count(*) FROM deliveries d WHERE d.status = $1 AND (SELECT a.class FROM attempts a WHERE a.delivery_id = d.id ORDER BY a.started_at DESC LIMIT 1) = $2`,
		delivery.StatusDeadLettered, delivery.ClassPermanent), worker("hookrelay_dead_lettered_total", "class", string(delivery.ClassPermanent)))
	require.Equal(t, 1.0, worker("hookrelay_dead_lettered_total", "class", string(delivery.ClassPermanent)))
	require.Positive(t, worker("hookrelay_dispatcher_rounds_total"))
}
