package outbox

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// TraceContext is the W3C trace context (traceparent, tracestate) of the
// span ctx holds, both "" when it holds none: Publish stores it with the
// event, so the dispatcher that claims the event's rows (maybe in another
// process, after a restart) continues the trace the event was published
// in. hookrelay's ingest puts its span in ctx only when tracing is on; a
// producer that publishes in its own transaction passes its own. Only the
// OpenTelemetry API is read, never a tracer provider.
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String(), sc.TraceState().String()
}
