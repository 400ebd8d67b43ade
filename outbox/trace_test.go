package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"hookrelay/outbox"
	"hookrelay/store"
)

// The producer's trace context survives the outbox: Publish stores it with
// the event in the producer's transaction, and the rows the dispatcher
// claims carry it; an untraced publish stores NULL.
func TestTraceContextSurvivesTheOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	state, err := trace.ParseTraceState("vendor=abc")
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:  trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	})
	traced := trace.ContextWithSpanContext(ctx, sc)
	parent, tstate := outbox.TraceContext(traced)
	require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", parent)
	require.Equal(t, "vendor=abc", tstate)

	tx, err := b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	withTrace, err := outbox.Publish(traced, tx, b.app.ID, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	without, err := publish(t, b, outbox.Event{Type: "invoice.created", Data: json.RawMessage(`{"n":2}`)})
	require.NoError(t, err)

	var nulls int
	require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE id = $1 AND traceparent IS NULL AND tracestate IS NULL`, without.ID).Scan(&nulls))
	require.Equal(t, 1, nulls, "an untraced publish stores NULL")

	tx, err = b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	rows, err := store.ClaimOutbox(ctx, tx, 10)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	for _, r := range rows {
		if r.EventID == withTrace.ID {
			require.Equal(t, parent, r.Traceparent)
			require.Equal(t, "vendor=abc", r.Tracestate)
		} else {
			require.Empty(t, r.Traceparent)
			require.Empty(t, r.Tracestate)
		}
	}
}
