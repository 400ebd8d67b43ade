package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"hookrelay/internal/tracing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
	} {
		require.Equal(t, c.want, tracing.Enabled(env(c.env)), "%v", c.env)
	}
}

func TestFromEnv(t *testing.T) {
	ctx := context.Background()
	tr, err := tracing.FromEnv(ctx, env(nil))
	require.NoError(t, err)
	require.Nil(t, tr, "off by default")

	_, err = tracing.FromEnv(ctx, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}))
	var ce *tracing.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "OTEL_EXPORTER_OTLP_PROTOCOL", ce.Name)

	for _, p := range []string{tracing.ProtocolGRPC, tracing.ProtocolHTTP} {
		tr, err := tracing.FromEnv(ctx, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": p}))
		require.NoError(t, err, p)
		require.NotNil(t, tr, p)
		require.NoError(t, tr.Shutdown(ctx))
	}
}

// Off is a nil *Tracing: nothing is started, extracted or injected, and
// Temporal gets no interceptor.
func TestOff(t *testing.T) {
	var tr *tracing.Tracing
	ctx := context.Background()
	h := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	require.False(t, trace.SpanContextFromContext(tr.Extract(ctx, h)).IsValid())
	require.False(t, trace.SpanContextFromContext(tr.Restore(ctx, h.Get("Traceparent"), "")).IsValid())
	sctx, span := tr.Start(ctx, tracing.SpanAttempt, trace.SpanKindClient)
	require.Equal(t, ctx, sctx)
	require.False(t, span.SpanContext().IsValid())
	out := http.Header{}
	tr.Inject(trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(newTracing(t).Extract(ctx, h))), out)
	require.Empty(t, out, "never a traceparent when off")
	require.Nil(t, tr.Provider(), "Temporal gets no interceptor (package temporaltrace)")
	require.NoError(t, tr.Shutdown(ctx))
}

func newTracing(t *testing.T) *tracing.Tracing {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp)
}

// A stored trace context is restored as the remote parent: spans started
// under it join its trace, and the request they make carries it on, but
// for its tracestate.
func TestRestoreInject(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tracing.New(tp)
	ctx := tr.Restore(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "vendor=x")
	ctx, span := tr.Start(ctx, tracing.SpanDispatch, trace.SpanKindInternal, tracing.Delivery("dlv_1"))
	h := http.Header{}
	tr.Inject(ctx, h)
	span.End()
	require.Len(t, rec.Ended(), 1)
	got := rec.Ended()[0]
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", got.SpanContext().TraceID().String())
	require.Equal(t, "b7ad6b7169203331", got.Parent().SpanID().String())
	require.Regexp(t, `^00-0af7651916cd43dd8448eb211c80319c-`+got.SpanContext().SpanID().String()+`-01$`, h.Get("traceparent"))
	require.Empty(t, h.Get("tracestate"), "a receiver never gets the producer's tracestate")
	require.Equal(t, "vendor=x", span.SpanContext().TraceState().String(), "the span keeps it, for the operator's own exporter")

	// Nothing stored, or garbage: a new root.
	for _, tp := range []string{"", "00-zz-yy-01", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		require.False(t, trace.SpanContextFromContext(tr.Restore(context.Background(), tp, "")).IsValid(), tp)
	}
}

func TestAllowedCoversHelpers(t *testing.T) {
	for _, kv := range []attribute.KeyValue{
		tracing.App("a"), tracing.Endpoint("e"), tracing.EventType("t"), tracing.Event("v"), tracing.Delivery("d"),
		tracing.Deliveries(2), tracing.Cycle(1), tracing.Attempt(1), tracing.Class("success"), tracing.StatusCode(200),
	} {
		require.True(t, tracing.Allowed[kv.Key], kv.Key)
	}
}

func newBenchTracing(b *testing.B) *tracing.Tracing {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp)
}

// Over HTTP the generic endpoint is a base: spans go to its /v1/traces,
// and Shutdown flushes them.
func TestFromEnvExportsOverHTTP(t *testing.T) {
	paths := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tracing.ProtocolHTTP)
	tr, err := tracing.FromEnv(context.Background(), os.Getenv)
	require.NoError(t, err)
	require.NotNil(t, tr)
	_, span := tr.Start(context.Background(), tracing.SpanIngest, trace.SpanKindServer)
	span.End()
	require.NoError(t, tr.Shutdown(context.Background()))
	require.Equal(t, "/v1/traces", <-paths)
}
