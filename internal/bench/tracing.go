package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"hookrelay/dispatch"
	"hookrelay/internal/app"
	"hookrelay/internal/tracing"
)

// TracingReport compares CPU per delivery with tracing off (the run) and
// on (a second stack, every delivery sampled).
type TracingReport struct {
	OffCPUMSPerDelivery    float64 `json:"off_cpu_ms_per_delivery"`
	OnCPUMSPerDelivery     float64 `json:"on_cpu_ms_per_delivery"`
	CPURatio               float64 `json:"cpu_ratio"`
	OffDeliveriesPerSecond float64 `json:"off_deliveries_per_second"`
	OnDeliveriesPerSecond  float64 `json:"on_deliveries_per_second"`
	// ExportRequests and ExportedBytesPerDelivery are what the exporter
	// sent the collector.
	ExportRequests           int64   `json:"export_requests"`
	ExportedBytesPerDelivery float64 `json:"exported_bytes_per_delivery"`
	// On is the traced run's own report.
	On *Report `json:"on"`
}

// discardCollector is an OTLP/HTTP trace endpoint that reads each export
// and throws it away (undecoded: the collector's own work is not
// hookrelay's cost), counting requests and bytes.
type discardCollector struct {
	srv             *http.Server
	url             string
	requests, bytes atomic.Int64
}

// newDiscardCollector serves the collector on a free loopback port (the
// receivers' serve).
func newDiscardCollector() (*discardCollector, error) {
	c := &discardCollector{}
	var err error
	c.srv, c.url, err = serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		c.requests.Add(1)
		c.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	if err != nil {
		return nil, fmt.Errorf("trace collector: %w", err)
	}
	return c, nil
}

// measureTracing runs the sender shape again on a fresh stack with tracing
// on: spans batched and exported over OTLP/HTTP (protobuf) as in
// production, sampled at 100 %.
func measureTracing(ctx context.Context, o Options, off *Report) (*TracingReport, error) {
	col, err := newDiscardCollector()
	if err != nil {
		return nil, err
	}
	defer col.srv.Close()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(col.url+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	stack, cleanup, err := startStackWith(ctx, o, app.Options{Tracing: tracing.New(tp)})
	if err != nil {
		return nil, err
	}
	defer cleanup()
	s := &sink{first: map[string]time.Time{}, failFirst: o.FailFirst}
	rs, err := startReceivers(o.Receivers, s)
	if err != nil {
		return nil, err
	}
	defer rs.stop()
	b := &runner{o: o, stack: stack, rs: rs, sink: s, api: "http://" + stack.APIAddr, key: stack.Config.AdminKey}
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	// The same warm-ups the run had before its measurement.
	if _, err = ceiling(ctx, stack.Client, max(o.CeilingWorkflows/5, 1), o.Concurrency); err != nil {
		return nil, err
	}
	stack.Dispatcher.SetMode(dispatch.Mode(o.Mode))
	on := *off
	if on.WarmUpEvents, err = b.warmUp(ctx); err != nil {
		return nil, err
	}
	b.sink.reset()
	on.Modes, on.Tracing = nil, nil
	on.Shape = "sender, traced"
	req0, bytes0 := col.requests.Load(), col.bytes.Load()
	b.progress("hookrelay: %s", on.Shape)
	if err := b.hookrelay(ctx, &on); err != nil {
		return nil, err
	}
	t := &TracingReport{OffCPUMSPerDelivery: off.CPUMSPerDelivery, OnCPUMSPerDelivery: on.CPUMSPerDelivery,
		OffDeliveriesPerSecond: off.DeliveriesPerSecond, OnDeliveriesPerSecond: on.DeliveriesPerSecond,
		ExportRequests: col.requests.Load() - req0, On: &on}
	if off.CPUMSPerDelivery > 0 {
		t.CPURatio = on.CPUMSPerDelivery / off.CPUMSPerDelivery
	}
	if on.Delivered > 0 {
		t.ExportedBytesPerDelivery = float64(col.bytes.Load()-bytes0) / float64(on.Delivered)
	}
	return t, nil
}
