package receiver_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/internal/testenv"
	"hookrelay/receiver"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

// TestControlIsGuarded: without a token /control answers loopback clients
// only; with one it needs the bearer token.
func TestControlIsGuarded(t *testing.T) {
	ctx := context.Background()
	url, err := pg.NewDatabase(ctx, "receiver")
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
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
