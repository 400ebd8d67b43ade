package delivery

// TraceContext is the W3C trace context a receiver is sent with each
// attempt while tracing is on (docs/contract.md#11-operations). tracestate
// is never sent: its entries are the operator's.
type TraceContext string

// Trace contexts.
const (
	// TraceLinked sends traceparent naming the attempt's span in the
	// event's own trace, so a receiver that traces joins it.
	TraceLinked TraceContext = "linked"
	// TraceFresh sends traceparent of a new trace for each attempt: the
	// producer's trace ID never leaves; the attempt's span records the new
	// one (hookrelay.receiver_trace_id) to find the receiver's side.
	TraceFresh TraceContext = "fresh"
	// TraceOff sends no trace context.
	TraceOff TraceContext = "off"
	// TraceContextDefault is the deployment's default (--receiver-traces).
	TraceContextDefault = TraceLinked
)

// Valid reports whether c is one of the trace contexts.
func (c TraceContext) Valid() bool { return c == TraceLinked || c == TraceFresh || c == TraceOff }
