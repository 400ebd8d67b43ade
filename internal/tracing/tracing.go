// Package tracing is hookrelay's OpenTelemetry tracing: off unless the
// standard OTEL_* environment asks for an OTLP exporter (FromEnv), and
// then one trace per event from the ingest request through the outbox,
// the dispatcher, the delivery workflow and every attempt to the request a
// receiver gets, which carries W3C traceparent.
//
// A *Tracing is passed down explicitly (never the OpenTelemetry globals);
// every method works on a nil *Tracing, which is tracing off: nothing is
// started, extracted, injected or stored, and the Temporal client gets no
// interceptor (package temporaltrace). This package links no Temporal
// code: the API imports it.
package tracing

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceNameDefault is the service.name of hookrelay's spans when
// OTEL_SERVICE_NAME does not name one.
const ServiceNameDefault = "hookrelay"

// InstrumentationName names hookrelay's tracer.
const InstrumentationName = "hookrelay"

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL (and its _TRACES_ form).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
	// ProtocolDefault is the specification's default.
	ProtocolDefault = ProtocolHTTP
)

// Span names hookrelay starts itself (the Temporal interceptor names its
// own: StartWorkflow:…, RunWorkflow:…, StartActivity:…, RunActivity:…).
const (
	SpanIngest   = "hookrelay.ingest"
	SpanDispatch = "hookrelay.dispatch"
	SpanAttempt  = "hookrelay.attempt"
)

// Tracing holds a tracer provider and what hookrelay traces with. The
// zero of *Tracing (nil) is tracing off.
type Tracing struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	// shutdown flushes and stops the provider hookrelay built (nil for
	// one the caller owns).
	shutdown func(context.Context) error
}

// ConfigError is an OTEL_* setting hookrelay cannot use.
type ConfigError struct {
	Name, Value, Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Name, e.Value, e.Reason)
}

// Enabled reports whether getenv (os.Getenv in production) asks for
// tracing: an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is otlp,
// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns
// it off.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// FromEnv builds tracing as the OTEL_* environment read by getenv says:
// nil (off) unless Enabled; otherwise an OTLP exporter over gRPC or
// HTTP (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL;
// default http/protobuf) batched into a tracer provider. getenv decides
// those; the exporter reads its own settings (endpoint, headers, TLS,
// compression, timeout), the provider its sampler (OTEL_TRACES_SAMPLER)
// and batching (OTEL_BSP_*), and the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES from the process environment, as the
// specification has them. Shutdown flushes it.
func FromEnv(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	if v := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); v != "" && v != "otlp" {
		return nil, &ConfigError{Name: "OTEL_TRACES_EXPORTER", Value: v, Reason: "hookrelay exports traces with otlp only (or none)"}
	}
	protocol, protocolVar := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if protocol == "" {
		protocol, protocolVar = getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	if protocol == "" {
		protocol = ProtocolDefault
	}
	// The exporters read the endpoint (the signal's own as is, the generic
	// one as a base for /v1/traces over HTTP) and the rest themselves.
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	case ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, &ConfigError{Name: protocolVar, Value: protocol, Reason: "must be grpc or http/protobuf"}
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceNameDefault)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// New traces with tp (tests and the bench pass their own provider; its
// owner shuts it down). A nil tp is tracing off.
func New(tp trace.TracerProvider) *Tracing {
	if tp == nil {
		return nil
	}
	return &Tracing{provider: tp, tracer: tp.Tracer(InstrumentationName), prop: propagation.TraceContext{}}
}

// Shutdown flushes the spans not yet exported and stops the exporter of a
// provider FromEnv built.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Tracer is the tracer hookrelay's spans come from (a no-op one when off).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(InstrumentationName)
	}
	return t.tracer
}

// Start starts a span named name under ctx's span; when off it returns
// ctx and a span that records nothing.
func (t *Tracing) Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// StartLinked is Start for a span that serves several traces: it is a
// child of ctx's span and links each of links' (a carrier workflow's
// start, under its first delivery's trace, linking the others').
func (t *Tracing) StartLinked(ctx context.Context, name string, links []trace.SpanContext, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ls := make([]trace.Link, 0, len(links))
	for _, sc := range links {
		if sc.IsValid() {
			ls = append(ls, trace.Link{SpanContext: sc})
		}
	}
	return t.tracer.Start(ctx, name, trace.WithAttributes(attrs...), trace.WithLinks(ls...))
}

// Extract returns ctx with the remote parent a request's W3C
// traceparent and tracestate name (ctx unchanged when off or when there
// is none).
func (t *Tracing) Extract(ctx context.Context, h http.Header) context.Context {
	if t == nil {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject sets W3C traceparent on h for ctx's span, for a receiver: never
// tracestate, whose entries (a tenant, a sampling decision of the
// producer's tracing vendor) are the operator's, not a third party's. It
// sets nothing when off or when ctx holds no valid span.
func (t *Tracing) Inject(ctx context.Context, h http.Header) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
	h.Del("tracestate")
}

// InjectFresh sets W3C traceparent on h naming a new trace (a random
// trace ID and span ID, sampled as ctx's span is) instead of ctx's, so a
// receiver that traces starts its own trace and the producer's trace ID
// never leaves; it answers the new trace ID, "" (and sets nothing) when off
// or when ctx holds no valid span.
func (t *Tracing) InjectFresh(ctx context.Context, h http.Header) string {
	sc := trace.SpanContextFromContext(ctx)
	if t == nil || !sc.IsValid() {
		return ""
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	fresh := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: sc.TraceFlags(), Remote: true})
	t.prop.Inject(trace.ContextWithSpanContext(context.Background(), fresh), propagation.HeaderCarrier(h))
	h.Del("tracestate")
	return tid.String()
}

// Restore returns ctx with the remote parent stored with an outbox row
// (see outbox.TraceContext), so the dispatcher's spans join the trace the
// event was published in, whichever process claims the row. It returns
// ctx unchanged when off or when nothing valid was stored.
func (t *Tracing) Restore(ctx context.Context, traceparent, tracestate string) context.Context {
	if t == nil || traceparent == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		carrier["tracestate"] = tracestate
	}
	return t.prop.Extract(ctx, carrier)
}

// Provider is the tracer provider (nil when off): package temporaltrace
// builds Temporal's interceptor on it (kept out of this package so the
// API, which traces ingest, links no Temporal code).
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Propagator is the W3C trace-context propagator (nil when off).
func (t *Tracing) Propagator() propagation.TextMapPropagator {
	if t == nil {
		return nil
	}
	return t.prop
}
