package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"hookrelay/api"
	"hookrelay/internal/tracing"
)

// With tracing on, an ingest request is a span joining the producer's
// traceparent, stored with the event; off, the same request stores NULL.
func TestIngestTrace(t *testing.T) {
	ctx := context.Background()
	st, app, key := tenant(t, "trace")
	rec := tracetest.NewSpanRecorder()
	on := api.New(api.Options{Store: st, AllowPrivateTargets: true,
		Tracing: tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))}).Handler()
	off := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	ingest := func(h http.Handler) (id, traceparent string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/apps/"+app.ID+"/events", bytes.NewReader([]byte(`{"type":"order.shipped","data":{"n":1}}`)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
		var out struct{ ID string }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
		var tp *string
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT traceparent FROM events WHERE app_id = $1 AND id = $2`, app.ID, out.ID).Scan(&tp))
		if tp == nil {
			return out.ID, ""
		}
		return out.ID, *tp
	}
	id, tp := ingest(on)
	require.Len(t, rec.Ended(), 1)
	span := rec.Ended()[0]
	require.Equal(t, tracing.SpanIngest, span.Name())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", span.SpanContext().TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", span.Parent().SpanID().String())
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-"+span.SpanContext().SpanID().String()+"-01", tp)
	attrs := map[string]string{}
	for _, kv := range span.Attributes() {
		require.True(t, tracing.Allowed[kv.Key], kv.Key)
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	require.Equal(t, id, attrs["hookrelay.event.id"])
	require.Equal(t, "order.shipped", attrs["hookrelay.event.type"])
	require.Equal(t, "202", attrs["http.response.status_code"])

	_, tp = ingest(off)
	require.Empty(t, tp, "off: NULL, whatever the producer sent")
	require.Len(t, rec.Ended(), 1)
}
