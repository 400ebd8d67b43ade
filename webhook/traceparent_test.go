package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/signing"
	"hookrelay/webhook"
)

func TestParseTraceParent(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	p, ok := webhook.ParseTraceParent(tp, " vendor=x ")
	require.True(t, ok)
	require.Equal(t, tp, p.String())
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", p.TraceIDString())
	require.True(t, p.Sampled())
	require.Equal(t, "vendor=x", p.State)

	// A later version is read as 00, with its extra fields ignored.
	p2, ok := webhook.ParseTraceParent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-future", "")
	require.True(t, ok)
	require.False(t, p2.Sampled())

	for _, bad := range []string{
		"", "garbage", tp + "-extra",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
		"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	} {
		_, ok := webhook.ParseTraceParent(bad, "")
		require.False(t, ok, bad)
	}

	c := p.Child()
	require.Equal(t, p.TraceID, c.TraceID)
	require.NotEqual(t, p.SpanID, c.SpanID)
	h := http.Header{}
	c.Inject(h)
	require.Equal(t, c.String(), h.Get("traceparent"))
	require.Equal(t, "vendor=x", h.Get("tracestate"))
	h = http.Header{}
	webhook.TraceParent{}.Inject(h)
	require.Empty(t, h)
}

// The middleware hands the sender's traceparent on with the verified
// event; the signature does not cover it, so it does not disturb
// verification.
func TestMiddlewareContinuesTheTrace(t *testing.T) {
	secret, _ := signing.GenerateSecret()
	v, err := webhook.NewVerifier(secret)
	require.NoError(t, err)
	var got webhook.Event
	h := webhook.Middleware(v, webhook.Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = webhook.FromContext(r.Context())
	}))
	req := signedRequest(t, secret, []byte(`{"id":"evt_1"}`))
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", got.Trace.TraceIDString())

	got = webhook.Event{}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, signedRequest(t, secret, []byte(`{"id":"evt_2"}`)))
	require.Equal(t, http.StatusOK, rec.Code)
	require.False(t, got.Trace.IsValid())
}
