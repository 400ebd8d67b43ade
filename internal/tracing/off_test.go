package tracing_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"hookrelay/internal/tracing"
)

// offPath is what a delivery does with tracing when it is off: restore
// the stored context, start the dispatch and attempt spans, inject into
// the request, end them.
func offPath(tr *tracing.Tracing, h http.Header) {
	ctx := tr.Restore(context.Background(), "", "")
	ctx, dispatch := tr.Start(ctx, tracing.SpanDispatch, trace.SpanKindInternal)
	ctx, attempt := tr.Start(ctx, tracing.SpanAttempt, trace.SpanKindClient)
	tr.Inject(ctx, h)
	attempt.End()
	dispatch.End()
}

// Tracing off costs nothing: the calls a delivery makes allocate nothing.
func TestOffAllocatesNothing(t *testing.T) {
	h := http.Header{}
	require.Zero(t, testing.AllocsPerRun(1000, func() { offPath(nil, h) }))
	require.Empty(t, h)
}

func BenchmarkOff(b *testing.B) {
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		offPath(nil, h)
	}
}

func BenchmarkOn(b *testing.B) {
	tr := newBenchTracing(b)
	b.ReportAllocs()
	for b.Loop() {
		offPath(tr, http.Header{})
	}
}
