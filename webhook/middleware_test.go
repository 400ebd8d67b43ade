package webhook_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"hookrelay/signing"
	"hookrelay/webhook"
	"hookrelay/webhook/ginhook"
)

func signedRequest(t *testing.T, secret string, body []byte) *http.Request {
	key, err := signing.ParseSecret(secret)
	require.NoError(t, err)
	h, err := signing.Sign("evt_1", time.Now(), body, []signing.Key{{Secret: key}})
	require.NoError(t, err)
	req := httptest.NewRequest("POST", "/hook", bytes.NewReader(body))
	for k, v := range h.Map() {
		req.Header.Set(k, v)
	}
	return req
}

func TestMiddleware(t *testing.T) {
	secret, _ := signing.GenerateSecret()
	v, err := webhook.NewVerifier(secret)
	require.NoError(t, err)
	var rejected []error
	var got webhook.Event
	h := webhook.Middleware(v, webhook.Options{MaxBody: 1024, OnReject: func(_ *http.Request, err error) { rejected = append(rejected, err) }},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ = webhook.FromContext(r.Context())
			w.WriteHeader(http.StatusNoContent)
		}))
	// Whitespace and key order survive: the signature covers raw bytes.
	body := []byte(`{ "type" : "a.b",  "id":"evt_1", "data":{} }`)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, signedRequest(t, secret, body))
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Equal(t, "evt_1", got.ID)
	require.Equal(t, body, got.Body)

	rec = httptest.NewRecorder()
	req := signedRequest(t, secret, body)
	req.Body = io.NopCloser(strings.NewReader(string(body) + " "))
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, "invalid signature\n", rec.Body.String(), "generic answer, nothing echoed")
	require.ErrorIs(t, rejected[0], webhook.ErrNoMatch)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, signedRequest(t, secret, bytes.Repeat([]byte("a"), 2048)))
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
}

func TestGinAdapter(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	secret, _ := signing.GenerateSecret()
	v, err := webhook.NewVerifier(secret)
	require.NoError(t, err)
	r := gin.New()
	r.POST("/hook", ginhook.Verify(v, webhook.Options{}), func(c *gin.Context) {
		ev, ok := ginhook.Event(c)
		require.True(t, ok)
		c.String(http.StatusOK, ev.ID)
	})
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, signedRequest(t, secret, []byte(`{}`)))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "evt_1", rec.Body.String())
	other, _ := signing.GenerateSecret()
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, signedRequest(t, other, []byte(`{}`)))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
}

// TestMiddlewareTriesTheNamedTenantsKeys: a receiver of 20 tenants (past
// MaxChecksPerRequest) verifies a request that names its tenant against
// that tenant's key alone, and refuses one that names none before reading
// any key (401, ErrTooManyKeys).
func TestMiddlewareTriesTheNamedTenantsKeys(t *testing.T) {
	v := &webhook.Verifier{}
	var mine string
	for i := range 20 {
		s, err := signing.GenerateSecret()
		require.NoError(t, err)
		require.NoError(t, v.AddTenantSecret(fmt.Sprint("t", i), s))
		if i == 7 {
			mine = s
		}
	}
	var rejected []error
	var got webhook.Event
	h := webhook.Middleware(v, webhook.Options{OnReject: func(_ *http.Request, err error) { rejected = append(rejected, err) },
		Tenant: func(r *http.Request) string { return r.URL.Query().Get("tenant") }},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = webhook.FromContext(r.Context()) }))
	body := []byte(`{"id":"evt_1"}`)
	req := signedRequest(t, mine, body)
	req.URL.RawQuery = "tenant=t7"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "t7", got.Tenant)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, signedRequest(t, mine, body))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Len(t, rejected, 1)
	require.ErrorIs(t, rejected[0], webhook.ErrTooManyKeys)
}
