package dispatch

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"hookrelay/internal/tracing"
	"hookrelay/outbox"
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
