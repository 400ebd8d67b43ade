package receiver_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/testenv"
	"hookrelay/receiver"
	"hookrelay/signing"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

// TestControlIsGuarded: without a token /control answers loopback clients
// only; with one it needs the bearer token.
func TestControlIsGuarded(t *testing.T) {
	ctx := context.Background()
	pool := pg.Pool(t, "receiver", false)
	control := func(h http.Handler, from, token string) int {
		req := httptest.NewRequest(http.MethodPost, "/control", strings.NewReader(`{"fail":"502","fail_times":1}`))
		req.RemoteAddr = net.JoinHostPort(from, "5000")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	open, err := receiver.New(ctx, receiver.Config{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Pool: pool})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, control(open.Handler(), "192.0.2.7", ""))
	require.Equal(t, http.StatusNoContent, control(open.Handler(), "127.0.0.1", ""))
	require.Equal(t, http.StatusNoContent, control(open.Handler(), "::1", ""))

	guarded, err := receiver.New(ctx, receiver.Config{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Pool: pool, ControlToken: "s3cret-token"})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, control(guarded.Handler(), "127.0.0.1", ""))
	require.Equal(t, http.StatusForbidden, control(guarded.Handler(), "127.0.0.1", "wrong"))
	require.Equal(t, http.StatusNoContent, control(guarded.Handler(), "192.0.2.7", "s3cret-token"))
}

// signed is a POST /webhook of an envelope with event ID id, signed with
// secret.
func signed(t *testing.T, id, secret string) *http.Request {
	body := []byte(`{"id":"` + id + `","type":"order.paid","created":"2026-12-01T10:00:00Z","api_version":"2026-11-01","data":{}}`)
	key, err := signing.ParseSecret(secret)
	require.NoError(t, err)
	h, err := signing.Sign(id, time.Now(), body, []signing.Key{{ID: "k", Secret: key}})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	for k, v := range h.Map() {
		req.Header.Set(k, v)
	}
	return req
}

// TestTenantsDedupeApart: the same event ID from two tenants is two
// events; a repeat from one of them is a duplicate; a forged request marks
// neither as seen.
func TestTenantsDedupeApart(t *testing.T) {
	ctx := context.Background()
	pool := pg.Pool(t, "tenants", false)
	secretA, err := signing.GenerateSecret()
	require.NoError(t, err)
	secretB, err := signing.GenerateSecret()
	require.NoError(t, err)
	forger, err := signing.GenerateSecret()
	require.NoError(t, err)
	rc, err := receiver.New(ctx, receiver.Config{Secrets: []string{"app-a=" + secretA, "app-b=" + secretB}, Pool: pool})
	require.NoError(t, err)
	h := rc.Handler()
	post := func(req *http.Request) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusUnauthorized, post(signed(t, "order-1", forger)), "forged")
	require.Equal(t, http.StatusNoContent, post(signed(t, "order-1", secretA)))
	require.Equal(t, http.StatusNoContent, post(signed(t, "order-1", secretB)), "another tenant's order-1 is another event")
	require.Equal(t, http.StatusNoContent, post(signed(t, "order-1", secretA)), "a repeat is absorbed with 2xx")
	st, err := rc.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Accepted)
	require.Equal(t, 1, st.Duplicates)
	require.Equal(t, 2, st.BusinessEffects)
	var seen []string
	rows, err := pool.Query(ctx, `SELECT source FROM webhook_inbox_seen WHERE event_id = 'order-1' ORDER BY source`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		seen = append(seen, s)
	}
	require.Equal(t, []string{"app-a", "app-b"}, seen, "deduped by (tenant, event ID); the forgery marked nothing")
}
