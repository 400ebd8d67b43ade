package activities_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/internal/tracing"
	"hookrelay/signing"
	"hookrelay/store"
)

// headerTarget is a target whose receiver keeps the headers it got.
func headerTarget(t *testing.T, code int) (store.Target, func() http.Header) {
	var mu sync.Mutex
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	tg := target(t, code)
	tg.URL, tg.AppID = srv.URL, "app_1"
	tg.Payload = []byte(`{"card":"4242424242424242"}`)
	tg.Headers = map[string]string{"X-Custom": "custom-value"}
	return tg, func() http.Header { mu.Lock(); defer mu.Unlock(); return got }
}

// With tracing off an attempt sends no traceparent, even under a context
// that holds a span context (a producer's, say).
func TestNoTraceparentWhenOff(t *testing.T) {
	t.Parallel()
	tg, got := headerTarget(t, 200)
	a := &activities.Activities{Store: &flakyStore{target: tg}, HTTP: activities.NewHTTPClient(false), UserAgent: "test"}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	res, err := a.SendSigned(ctx, activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1, Timeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class)
	require.Empty(t, got().Get("traceparent"))
	require.Empty(t, got().Get("tracestate"))
}

// With tracing on, each attempt is a span under the caller's, its request
// carries that span as traceparent, and its attributes are only the
// allowed ones, none holding the secret, a signature or the payload.
func TestAttemptSpan(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tracing.New(tp)
	tg, got := headerTarget(t, 500)
	a := &activities.Activities{Store: &flakyStore{target: tg}, HTTP: activities.NewHTTPClient(false), UserAgent: "test", Tracing: tr}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	res, err := a.SendSigned(ctx, activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 2, Timeout: time.Second})
	require.NoError(t, err)
	parent.End()
	require.Equal(t, activities.ClassRetryable, res.Class)

	var span sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == tracing.SpanAttempt {
			span = s
		}
	}
	require.NotNil(t, span)
	require.Equal(t, parent.SpanContext().TraceID(), span.SpanContext().TraceID())
	require.Equal(t, parent.SpanContext().SpanID(), span.Parent().SpanID())
	h := got()
	require.Equal(t, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()+"-01", h.Get("traceparent"))

	attrs := map[string]string{}
	for _, kv := range span.Attributes() {
		require.True(t, tracing.Allowed[kv.Key], "attribute %s is not on the allow-list", kv.Key)
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	require.Equal(t, map[string]string{
		"hookrelay.app.id": "app_1", "hookrelay.endpoint.id": "ep_1", "hookrelay.event.id": "evt_1", "hookrelay.delivery.id": "dlv_1",
		"hookrelay.cycle": "1", "hookrelay.attempt": "2", "hookrelay.class": string(activities.ClassRetryable), "http.response.status_code": "500",
	}, attrs)
	secret := base64.StdEncoding.EncodeToString(tg.Keys[0].Secret)
	forbidden := []string{secret, string(tg.Payload), "4242424242424242", "custom-value", h.Get(signing.HeaderSignature)}
	for _, v := range attrs {
		for _, f := range forbidden {
			require.NotEmpty(t, f)
			require.False(t, strings.Contains(v, f), "attribute value %q holds %q", v, f)
		}
	}
}

// The trace context a receiver is sent: linked by default (the attempt's
// span, in the event's trace), fresh (a new trace ID, recorded on the
// attempt's span, the event's never sent) or off, the endpoint's choice
// over the deployment's; never tracestate.
func TestReceiverTraceContext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		deployment, endpoint delivery.TraceContext
		want                 delivery.TraceContext
	}{
		{"", "", delivery.TraceLinked},
		{delivery.TraceFresh, "", delivery.TraceFresh},
		{delivery.TraceOff, "", delivery.TraceOff},
		{delivery.TraceOff, delivery.TraceLinked, delivery.TraceLinked},
		{delivery.TraceLinked, delivery.TraceFresh, delivery.TraceFresh},
		{delivery.TraceFresh, delivery.TraceOff, delivery.TraceOff},
	} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		tg, got := headerTarget(t, 200)
		tg.TraceContext = string(tc.endpoint)
		a := &activities.Activities{Store: &flakyStore{target: tg}, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
			Tracing: tracing.New(tp), ReceiverTraces: tc.deployment}
		ctx, parent := tp.Tracer("test").Start(context.Background(), "producer")
		_, err := a.SendSigned(ctx, activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1, Timeout: time.Second})
		require.NoError(t, err)
		parent.End()
		var span sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == tracing.SpanAttempt {
				span = s
			}
		}
		require.NotNil(t, span)
		h := got()
		require.Empty(t, h.Get("tracestate"))
		name := fmt.Sprintf("deployment %q, endpoint %q", tc.deployment, tc.endpoint)
		switch tc.want {
		case delivery.TraceOff:
			require.Empty(t, h.Get("traceparent"), name)
		case delivery.TraceLinked:
			require.Equal(t, fmt.Sprintf("00-%s-%s-01", parent.SpanContext().TraceID(), span.SpanContext().SpanID()), h.Get("traceparent"), name)
		case delivery.TraceFresh:
			tp := h.Get("traceparent")
			require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, tp, name)
			require.NotContains(t, tp, parent.SpanContext().TraceID().String(), name)
			var sent string
			for _, kv := range span.Attributes() {
				if kv.Key == tracing.KeyReceiverTraceID {
					sent = kv.Value.AsString()
				}
			}
			require.Equal(t, strings.Split(tp, "-")[1], sent, "the attempt's span names the trace the receiver got")
		}
	}
}
