package dispatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"hookrelay/activities"
	"hookrelay/internal/tracing"
	"hookrelay/outbox"
	"hookrelay/workflows"
)

// A claimed row's dispatch continues the trace its event was published
// in; a carrier's start continues its first row's and links the others';
// off, nothing is started.
func TestDispatchContinuesTheRowsTrace(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	const other = "00-11111111111111111111111111111111-2222222222222222-01"
	rows := []outbox.Row{
		{DeliveryID: "dlv_1", AppID: "app_1", EventType: "order.shipped", CarrierID: "car_1", Traceparent: parent},
		{DeliveryID: "dlv_2", AppID: "app_1", EventType: "order.shipped", CarrierID: "car_1", Traceparent: other},
		{DeliveryID: "dlv_3", AppID: "app_1", EventType: "order.shipped", CarrierID: "car_1"},
	}

	off := &Dispatcher{}
	ctx, span := off.traced(context.Background(), rows[0])
	require.False(t, span.SpanContext().IsValid())
	require.False(t, trace.SpanContextFromContext(ctx).IsValid(), "off: the stored context is not restored")

	rec := tracetest.NewSpanRecorder()
	d := &Dispatcher{Tracing: tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))}
	_, span = d.traced(context.Background(), rows[0])
	span.End()
	_, span = d.tracedCarrier(context.Background(), rows, "car_1", 3)
	span.End()
	_, span = d.traced(context.Background(), rows[2])
	span.End()
	ended := rec.Ended()
	require.Len(t, ended, 3)
	for _, s := range ended[:2] {
		require.Equal(t, tracing.SpanDispatch, s.Name())
		require.Equal(t, "0af7651916cd43dd8448eb211c80319c", s.SpanContext().TraceID().String())
		require.Equal(t, "b7ad6b7169203331", s.Parent().SpanID().String())
		for _, kv := range s.Attributes() {
			require.True(t, tracing.Allowed[kv.Key], kv.Key)
		}
	}
	require.Len(t, ended[1].Links(), 1)
	require.Equal(t, "11111111111111111111111111111111", ended[1].Links()[0].SpanContext.TraceID().String())
	require.False(t, ended[2].Parent().IsValid(), "an untraced event's dispatch starts a trace of its own")
}

// An ordered head's first attempt, made by its sequencer's run, continues
// the trace its event was published in: a dispatch span under the stored
// parent, and the attempt's span under it.
func TestSequencedHeadContinuesTheRowsTrace(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := context.Background()
	f := setupSender(t, 0, time.Second)
	_, h := f.fifoHead(t, "k")
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	d := &Dispatcher{Pool: f.st.Pool(), Client: &fakeClient{}, Logger: slog.New(slog.DiscardHandler), Tracing: tr,
		Sequencer: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler), Tracing: tr}}
	row := *h.Row
	row.Traceparent = parent
	row.Settings.Schedule = []time.Duration{0, time.Second}
	_, err := d.sendHead(ctx, row, time.Now().Add(workflows.SequenceRunBudget), func() (bool, error) { return true, nil })
	require.NoError(t, err)
	require.Equal(t, int64(1), f.hits.Load())
	names := map[string]bool{}
	for _, s := range rec.Ended() {
		names[s.Name()] = true
		require.Equal(t, "0af7651916cd43dd8448eb211c80319c", s.SpanContext().TraceID().String(), s.Name())
	}
	require.True(t, names[tracing.SpanDispatch] && names[tracing.SpanAttempt], "%v", names)
}
