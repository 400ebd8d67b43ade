package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// FiltersReport is what `hookrelay bench --filters N` measures: ingest of
// the same events into an app with N endpoints without filters and into
// an app with the same N endpoints each carrying a filter of realistic
// size, in alternating rounds on one server. The endpoints are paused, so
// only ingest (fan-out and its writes) is measured; every filter accepts
// every event, so both apps write the same deliveries.
type FiltersReport struct {
	Date      string  `json:"date"`
	Machine   string  `json:"machine"`
	Endpoints int     `json:"endpoints"`
	Events    int     `json:"events_per_shape"`
	Rate      float64 `json:"rate"`
	// Shapes are without filters, then with them.
	Shapes []FiltersShape `json:"shapes"`
	// CPURatio is the filtered shape's CPU per event over the plain one's.
	CPURatio float64 `json:"cpu_ratio"`
}

// FiltersShape is one app's ingest figures.
type FiltersShape struct {
	Name            string  `json:"name"`
	IngestMS        Latency `json:"ingest_ms"`
	CPUMSPerEvent   float64 `json:"cpu_ms_per_event"`
	PostgresMSEvent float64 `json:"postgres_cpu_ms_per_event"`
	Accepted        int     `json:"accepted"`
}

// filterFor is endpoint i's filter: about 200 bytes, the shape users
// write (a type prefix, thresholds, a membership test, a nested field
// guarded by has()), true for every event filterEvent makes.
func filterFor(i int) string {
	return fmt.Sprintf("type.startsWith('invoice.') && data.amount >= %d && data.currency in ['usd', 'eur', 'gbp'] && "+
		"has(data.customer) && data.customer.region in ['eu', 'us', 'apac'] && !('test' in data.tags) && size(data.lines) > 0", i)
}

// filterEvent is a realistic invoice event's data (about 500 bytes).
func filterEvent(i int) map[string]any {
	return map[string]any{
		"amount": 1000 + i%5000, "currency": []string{"usd", "eur", "gbp"}[i%3], "invoice_id": fmt.Sprintf("in_%08d", i),
		"customer": map[string]any{"id": fmt.Sprintf("cus_%06d", i%997), "region": []string{"eu", "us", "apac"}[i%3], "tier": "gold", "email": "billing@example.com"},
		"tags":     []string{"recurring", "card"},
		"lines": []map[string]any{{"sku": "plan-pro", "qty": 1, "unit_amount": 900}, {"sku": "seat", "qty": 3, "unit_amount": 100},
			{"sku": "support", "qty": 1, "unit_amount": 0}},
		"metadata": map[string]any{"order": fmt.Sprintf("ord_%d", i), "source": "checkout"},
	}
}

// RunFilters runs the filter measurement with n endpoints per app.
func RunFilters(ctx context.Context, o Options, n int) (*FiltersReport, error) {
	o.withDefaults()
	if o.Rate <= 0 {
		o.Rate = 100
	}
	o.NoShed = true
	b, cleanup, err := startRunner(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rep := &FiltersReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Endpoints: n, Events: o.Events, Rate: o.Rate,
		Shapes: []FiltersShape{{Name: "without filters"}, {Name: fmt.Sprintf("with %d filters", n)}}}
	apps := make([]string, 2)
	for s := range apps {
		var app struct{ ID string }
		if code, err := b.call(ctx, "POST", "/v1/apps", map[string]any{"name": rep.Shapes[s].Name}, &app); err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("create app: %d %v", code, err)
		}
		apps[s] = app.ID
		for i := range n {
			ep := map[string]any{"url": "http://127.0.0.1:9/never", "paused": true}
			if s == 1 {
				ep["filter"] = filterFor(i)
			}
			if code, err := b.call(ctx, "POST", "/v1/apps/"+app.ID+"/endpoints", ep, nil); err != nil || code != http.StatusCreated {
				return nil, fmt.Errorf("create endpoint: %d %v", code, err)
			}
		}
	}
	// Four rounds, alternating, so drift on the machine falls on both.
	const rounds = 4
	lat := make([][]float64, 2)
	for r := range rounds {
		s := r % 2
		b.progress("filters: round %d of %d (%s)", r+1, rounds, rep.Shapes[s].Name)
		cpu := stackCPU(b.pgPID())
		var mu sync.Mutex
		fanOut(o.Concurrency, o.Events/(rounds/2), o.Rate, func(i int) {
			t0 := time.Now()
			code, err := b.call(ctx, "POST", "/v1/apps/"+apps[s]+"/events", map[string]any{"type": "invoice.paid", "data": filterEvent(i)}, nil)
			if err != nil || code != http.StatusAccepted {
				return
			}
			mu.Lock()
			lat[s] = append(lat[s], float64(time.Since(t0).Microseconds())/1000)
			mu.Unlock()
		})
		total, pg := cpu()
		rep.Shapes[s].CPUMSPerEvent += total * 1000
		rep.Shapes[s].PostgresMSEvent += pg * 1000
	}
	b.progress("")
	for s := range rep.Shapes {
		sh := &rep.Shapes[s]
		sh.Accepted = len(lat[s])
		sh.IngestMS = summarize(lat[s])
		if sh.Accepted > 0 {
			sh.CPUMSPerEvent /= float64(sh.Accepted)
			sh.PostgresMSEvent /= float64(sh.Accepted)
		}
	}
	if rep.Shapes[0].CPUMSPerEvent > 0 {
		rep.CPURatio = rep.Shapes[1].CPUMSPerEvent / rep.Shapes[0].CPUMSPerEvent
	}
	return rep, nil
}

// WriteTable prints the filter measurement.
func (r *FiltersReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\nhookrelay bench --filters %d — %s, %s\n", r.Endpoints, r.Date, r.Machine)
	fmt.Fprintf(w, "  %d events per shape at %.0f events/s, %d paused endpoints per app (ingest only), every filter true\n\n", r.Events, r.Rate, r.Endpoints)
	fmt.Fprintf(w, "  %-20s %24s %28s %10s\n", "shape", "ingest p50/p99 (ms)", "CPU per event (Postgres)", "accepted")
	for _, s := range r.Shapes {
		fmt.Fprintf(w, "  %-20s %24s %28s %10d\n", s.Name, fmt.Sprintf("%.2f / %.2f", s.IngestMS.P50, s.IngestMS.P99),
			fmt.Sprintf("%.3f ms (%.3f ms)", s.CPUMSPerEvent, s.PostgresMSEvent), s.Accepted)
	}
	fmt.Fprintf(w, "\n  CPU per event with filters: × %.3f the same endpoints without (target ≤ × 1.20)\n", r.CPURatio)
}
