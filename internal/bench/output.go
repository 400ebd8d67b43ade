package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// Latency is a distribution summary in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Report is bench-report.json.
type Report struct {
	Date          string   `json:"date"`
	Machine       string   `json:"machine"`
	Events        int      `json:"events"`
	Receivers     int      `json:"receivers"`
	Rate          float64  `json:"rate"`
	Schedule      []string `json:"schedule"`
	EagerStart    bool     `json:"eager_start"`
	Shards        int      `json:"temporal_shards"`
	TemporalStore string   `json:"temporal_store"`
	// FailFirst is the percentage of deliveries whose first request was
	// answered 502 (Options.FailFirst).
	FailFirst int `json:"fail_first_percent"`
	// Shape is the first-attempt mode (workflow, sender, carrier); CarriedShare and DirectShare are
	// the shares of first attempts made in a carrier and by the sender,
	// TakenShare of those the sender took from their ingest with no
	// round (dispatch.Dispatcher.Take).
	Shape        string  `json:"shape"`
	CarriedShare float64 `json:"carried_share"`
	// LocalShare is the share of deliveries whose workflow made the first
	// attempt as a local activity in its first task.
	LocalShare  float64 `json:"local_share"`
	DirectShare float64 `json:"direct_share"`
	TakenShare  float64 `json:"taken_share"`
	// LatenessMS is first-attempt lateness: the request's start minus its
	// due time (acceptance plus the jittered first wait).
	LatenessMS          Latency `json:"first_attempt_lateness_ms"`
	DeliveriesPerSecond float64 `json:"deliveries_per_second"`
	LatencyMS           Latency `json:"latency_ms"`
	IngestPerSecond     float64 `json:"ingest_per_second"`
	IngestLatencyMS     Latency `json:"ingest_latency_ms"`
	Shed                int     `json:"shed_429"`
	CPUMSPerDelivery    float64 `json:"cpu_ms_per_delivery"`
	CPUSeconds          float64 `json:"cpu_seconds"`
	// PostgresCPUMSPerDelivery is the Postgres processes' part of
	// CPUMSPerDelivery (hookrelay's own data and Temporal's store).
	PostgresCPUMSPerDelivery float64 `json:"postgres_cpu_ms_per_delivery"`
	PeakRSSMB                float64 `json:"peak_rss_mb"`
	Delivered                int     `json:"delivered"`
	Lost                     int     `json:"lost"`
	Duplicates               int     `json:"duplicates"`
	BaselinePerSecond        float64 `json:"baseline_deliveries_per_second"`
	RatioToBaseline          float64 `json:"ratio_to_baseline"`
	TemporalCeilingPerSec    float64 `json:"temporal_ceiling_per_second"`
	// TemporalCeilingAfterPerSec is the ceiling measured again after the
	// main run; CeilingUnstable is set when the two differ by more than
	// CeilingTolerance.
	TemporalCeilingAfterPerSec float64 `json:"temporal_ceiling_after_per_second"`
	CeilingUnstable            bool    `json:"ceiling_unstable"`
	RatioToTemporalCeiling     float64 `json:"ratio_to_temporal_ceiling"`
	ThroughputPerSecond        []int   `json:"throughput_per_second"`
	// Histories is what the run cost in Temporal.
	Histories HistoryCost `json:"histories"`
	// Modes are every mode measured in the same run, in turn, this one
	// first.
	Modes            []*Report `json:"modes,omitempty"`
	LatencySamplesMS []float64 `json:"-"`
	// WarmUpEvents is how many events the warm-up sent before anything
	// was measured (see warmUp).
	WarmUpEvents int `json:"warm_up_events"`
	// Tracing is the same shape measured again with tracing on (--tracing).
	Tracing *TracingReport `json:"tracing,omitempty"`
}

// WriteTable prints the report as a table.
func (r *Report) WriteTable(w io.Writer) {
	row := func(k, v string) { fmt.Fprintf(w, "  %-34s %s\n", k, v) }
	fmt.Fprintf(w, "\nhookrelay bench — %s, %s\n", r.Date, r.Machine)
	row("events / receivers", fmt.Sprintf("%d / %d", r.Events, r.Receivers))
	rate := "as fast as accepted"
	if r.Rate > 0 {
		rate = fmt.Sprintf("%.0f events/s", r.Rate)
	}
	row("ingest rate", rate)
	row("schedule", strings.Join(r.Schedule, ","))
	row("not measured", fmt.Sprintf("a warm-up of %d events, ANALYZE halfway through", r.WarmUpEvents))
	if len(r.Modes) > 1 {
		fmt.Fprintf(w, "\n  %-9s %12s %14s %12s %18s %10s %13s %8s\n", "mode", "deliveries/s", "CPU ms/deliv.", "of which PG", "lateness p50/p99", "WFT/deliv.", "events/deliv.", "lost")
		for _, m := range r.Modes {
			fmt.Fprintf(w, "  %-9s %12.1f %14.2f %12.2f %18s %10.2f %13.2f %8d\n", m.Shape, m.DeliveriesPerSecond, m.CPUMSPerDelivery, m.PostgresCPUMSPerDelivery,
				fmt.Sprintf("%.1f / %.1f ms", m.LatenessMS.P50, m.LatenessMS.P99), m.Histories.TasksPerDelivery, m.Histories.EventsPerDelivery, m.Lost)
		}
		fmt.Fprintf(w, "\n  %s mode in detail:\n", r.Shape)
	}
	row("shape", r.Shape)
	row("first attempts by sender / carrier", fmt.Sprintf("%.1f %% / %.1f %%", r.DirectShare*100, r.CarriedShare*100))
	row("… taken from their ingest, no round", fmt.Sprintf("%.1f %%", r.TakenShare*100))
	row("first attempts local to a workflow", fmt.Sprintf("%.1f %%", r.LocalShare*100))
	if r.FailFirst > 0 {
		row("first requests answered 502", fmt.Sprintf("%d %% of deliveries (their latency includes the retry's wait)", r.FailFirst))
	}
	row("first-attempt lateness p50/p95/p99", fmt.Sprintf("%.1f / %.1f / %.1f ms", r.LatenessMS.P50, r.LatenessMS.P95, r.LatenessMS.P99))
	row("deliveries/s (steady)", fmt.Sprintf("%.1f", r.DeliveriesPerSecond))
	row("first-attempt latency p50/p95/p99/max", fmt.Sprintf("%.0f / %.0f / %.0f / %.0f ms", r.LatencyMS.P50, r.LatencyMS.P95, r.LatencyMS.P99, r.LatencyMS.Max))
	row("ingest/s, ingest p99", fmt.Sprintf("%.0f, %.1f ms (shed with 429: %d)", r.IngestPerSecond, r.IngestLatencyMS.P99, r.Shed))
	row("CPU per delivery (whole stack)", fmt.Sprintf("%.2f ms, of which Postgres %.2f ms (%.1f s in all)", r.CPUMSPerDelivery, r.PostgresCPUMSPerDelivery, r.CPUSeconds))
	row("peak RSS (hookrelay process)", fmt.Sprintf("%.0f MiB", r.PeakRSSMB))
	row("delivered / lost / duplicates", fmt.Sprintf("%d / %d / %d", r.Delivered, r.Lost, r.Duplicates))
	row("baseline (sign + POST loop)", fmt.Sprintf("%.0f/s → ratio %.4f", r.BaselinePerSecond, r.RatioToBaseline))
	ceil := fmt.Sprintf("%.1f/s before, %.1f/s after → ratio %.2f", r.TemporalCeilingPerSec, r.TemporalCeilingAfterPerSec, r.RatioToTemporalCeiling)
	if r.CeilingUnstable {
		ceil += fmt.Sprintf(" (UNSTABLE: readings more than %.0f %% apart; compare ratios with care)", CeilingTolerance*100)
	}
	row("Temporal ceiling (trivial workflow)", ceil)
	if t := r.Tracing; t != nil {
		fmt.Fprintf(w, "  %s\n", "tracing (a second stack, sampling 100 %, OTLP/HTTP to a discarding collector):")
		row("CPU per delivery off → on", fmt.Sprintf("%.2f → %.2f ms (× %.2f)", t.OffCPUMSPerDelivery, t.OnCPUMSPerDelivery, t.CPURatio))
		row("deliveries/s off → on", fmt.Sprintf("%.1f → %.1f", t.OffDeliveriesPerSecond, t.OnDeliveriesPerSecond))
		row("first-attempt latency p50/p99 off → on", fmt.Sprintf("%.0f / %.0f → %.0f / %.0f ms", r.LatencyMS.P50, r.LatencyMS.P99, t.On.LatencyMS.P50, t.On.LatencyMS.P99))
		row("exported per delivery", fmt.Sprintf("%.0f bytes in %d requests (%d delivered, %d lost)", t.ExportedBytesPerDelivery, t.ExportRequests, t.On.Delivered, t.On.Lost))
	}
}

// WriteJSON writes bench-report.json.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteSVG draws the first-attempt latency distribution (CDF) and the
// deliveries per second over time.
func (r *Report) WriteSVG(path string) error {
	const w, h, pad = 900, 360, 50
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, w, h*2+40)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="white"/>`)
	// Latency CDF, log-scaled x.
	lat := append([]float64(nil), r.LatencySamplesMS...)
	sort.Float64s(lat)
	fmt.Fprintf(&sb, `<text x="%d" y="20" font-size="14">First-attempt latency (ingest 202 → receiver), CDF; p50 %.0f ms, p99 %.0f ms</text>`, pad, r.LatencyMS.P50, r.LatencyMS.P99)
	axes(&sb, pad, 30, w-2*pad, h-60)
	if len(lat) > 0 {
		lo, hi := math.Log10(math.Max(lat[0], 0.1)), math.Log10(math.Max(lat[len(lat)-1], 1))
		if hi <= lo {
			hi = lo + 1
		}
		var pts []string
		step := max(1, len(lat)/400)
		for i := 0; i < len(lat); i += step {
			x := float64(pad) + (math.Log10(math.Max(lat[i], 0.1))-lo)/(hi-lo)*float64(w-2*pad)
			y := float64(30+h-60) - float64(i+1)/float64(len(lat))*float64(h-60)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(&sb, `<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="%s"/>`, strings.Join(pts, " "))
		for _, v := range []float64{1, 10, 100, 1000, 10000, 100000} {
			if lv := math.Log10(v); lv >= lo && lv <= hi {
				x := float64(pad) + (lv-lo)/(hi-lo)*float64(w-2*pad)
				fmt.Fprintf(&sb, `<text x="%.0f" y="%d" text-anchor="middle">%g ms</text>`, x, h-15, v)
			}
		}
		fmt.Fprintf(&sb, `<text x="%d" y="40">100%%</text><text x="%d" y="%d">0%%</text>`, pad-40, pad-30, h-30)
	}
	// Throughput over time.
	top := h + 40
	peak := 1
	for _, v := range r.ThroughputPerSecond {
		peak = max(peak, v)
	}
	fmt.Fprintf(&sb, `<text x="%d" y="%d" font-size="14">Deliveries per second (first 2xx at a receiver); steady %.1f/s, peak %d/s</text>`, pad, top-10, r.DeliveriesPerSecond, peak)
	axes(&sb, pad, top, w-2*pad, h-60)
	if n := len(r.ThroughputPerSecond); n > 0 {
		bw := float64(w-2*pad) / float64(n)
		for i, v := range r.ThroughputPerSecond {
			bh := float64(v) / float64(peak) * float64(h-60)
			fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2ca02c"/>`, float64(pad)+float64(i)*bw, float64(top+h-60)-bh, math.Max(bw-1, 0.5), bh)
		}
		fmt.Fprintf(&sb, `<text x="%d" y="%d">0 s</text><text x="%d" y="%d" text-anchor="end">%d s</text>`, pad, top+h-45, w-pad, top+h-45, n)
		fmt.Fprintf(&sb, `<text x="%d" y="%d">%d/s</text>`, 5, top+10, peak)
	}
	sb.WriteString(`</svg>`)
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

func axes(sb *strings.Builder, x, y, w, h int) {
	fmt.Fprintf(sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, x, y+h, x+w, y+h)
	fmt.Fprintf(sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, x, y, x, y+h)
}
