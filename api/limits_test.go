package api_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/config"
	"hookrelay/ids"
	"hookrelay/store"
)

// TestFailedAuthIsRateLimited: past the limit a client address gets a bare
// 429 with Retry-After for every request without a valid key, while a
// valid key from the same address is still served; another address is
// served; an X-Forwarded-For from a client that is not a trusted proxy
// changes nothing; no failure is logged with the key.
func TestFailedAuthIsRateLimited(t *testing.T) {
	t.Parallel()
	const good = "hr_good_key_0123456789"
	st := storeWithAdminKey(t, "auth", good)
	var logs bytes.Buffer
	h := api.New(api.Options{Store: st, AuthFailuresPerMinute: 5, Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Handler()
	call := func(from, forwarded, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/apps", nil)
		req.RemoteAddr = from + ":4242"
		req.Header.Set("X-Forwarded-For", forwarded) // not trusted
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 5 {
		rec := call("192.0.2.1", fmt.Sprintf("203.0.113.%d", i), fmt.Sprintf("hr_wrong_guess_%d", i))
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.NotContains(t, rec.Body.String(), "detail", "a bare 401")
	}
	rec := call("192.0.2.1", "203.0.113.99", "hr_wrong_guess_again")
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "over the limit, a wrong key waits")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.NotContains(t, rec.Body.String(), "detail", "a bare 429")
	require.Equal(t, http.StatusTooManyRequests, call("192.0.2.1", "", "").Code, "so does no key")
	require.Equal(t, http.StatusOK, call("192.0.2.1", "", good).Code, "a valid key is never refused for other requests' failures")
	require.Equal(t, http.StatusOK, call("192.0.2.2", "", good).Code, "another address is served")
	require.Equal(t, http.StatusUnauthorized, call("192.0.2.2", "", "").Code)
	require.Contains(t, logs.String(), "authentication failed")
	require.Contains(t, logs.String(), "client=192.0.2.1")
	require.NotContains(t, logs.String(), "203.0.113", "an untrusted X-Forwarded-For is ignored")
	require.NotContains(t, logs.String(), "hr_wrong")
}

// TestClientAddressBehindTrustedProxies: on a connection from a trusted
// proxy the client is the right-most address of X-Forwarded-For (else
// Forwarded) that is not a trusted proxy, so one misconfigured producer
// behind the proxy is limited alone and a valid key behind it is served.
func TestClientAddressBehindTrustedProxies(t *testing.T) {
	t.Parallel()
	const good = "hr_good_proxy_key_0123456789"
	st := storeWithAdminKey(t, "proxy", good)
	trusted, err := config.ParseTrustedProxies("10.0.0.0/8, 2001:db8:ffff::/48,192.0.2.10")
	require.NoError(t, err)
	var logs bytes.Buffer
	h := api.New(api.Options{Store: st, AuthFailuresPerMinute: 2, TrustedProxies: trusted, Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Handler()
	call := func(from string, header http.Header, key string) int {
		req := httptest.NewRequest(http.MethodGet, "/v1/apps", nil)
		req.RemoteAddr = from
		maps.Copy(req.Header, header)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	xff := func(v ...string) http.Header { return http.Header{"X-Forwarded-For": v} }
	fwd := func(v string) http.Header { return http.Header{"Forwarded": {v}} }
	const proxy = "10.1.2.3:5555"

	for _, tc := range []struct {
		name   string
		from   string
		header http.Header
		client string
	}{
		{"one producer behind the proxy", proxy, xff("198.51.100.7"), "198.51.100.7"},
		{"a chain of trusted proxies", proxy, xff("198.51.100.8, 10.9.9.9", "192.0.2.10"), "198.51.100.8"},
		{"a spoofed left-most entry", proxy, xff("6.6.6.6, 198.51.100.9"), "198.51.100.9"},
		{"Forwarded, IPv6 with a port", "[2001:db8:ffff::1]:443", fwd(`for=192.0.2.60;proto=https, for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::17"},
		{"no header: the proxy itself", proxy, nil, "10.1.2.3"},
		{"garbage stops at the proxy that wrote it", proxy, xff("198.51.100.10, unknown"), "10.1.2.3"},
		{"a direct client cannot pick its address", "203.0.113.5:1", xff("198.51.100.11"), "203.0.113.5"},
	} {
		logs.Reset()
		require.Equal(t, http.StatusUnauthorized, call(tc.from, tc.header, "hr_wrong"), tc.name)
		require.Contains(t, logs.String(), "client="+tc.client+" ", tc.name)
	}

	// Two failures block 198.51.100.7 alone: other producers behind the
	// same proxy, and its own valid key, are served.
	require.Equal(t, http.StatusUnauthorized, call(proxy, xff("198.51.100.7"), "hr_wrong"))
	require.Equal(t, http.StatusTooManyRequests, call(proxy, xff("198.51.100.7"), "hr_wrong"))
	require.Equal(t, http.StatusOK, call(proxy, xff("198.51.100.7"), good))
	require.Equal(t, http.StatusUnauthorized, call(proxy, xff("198.51.100.77"), "hr_wrong"), "another producer is not blocked")
	require.Equal(t, http.StatusOK, call(proxy, xff("198.51.100.77"), good))

	_, err = config.ParseTrustedProxies("10.0.0.0/8,not-a-cidr")
	require.ErrorContains(t, err, "not-a-cidr")
}

// TestConnectionBoundSkipsTrustedProxies: the per-client connection bound
// counts TCP peers, so it closes a third connection from one untrusted
// address but not a fourth from a trusted proxy, which carries many
// producers.
func TestConnectionBoundSkipsTrustedProxies(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }), api.ServerOptions{})
	go func() { _ = srv.Serve(api.LimitListener(ln, 2, netip.MustParsePrefix("127.0.0.1/32"))) }()
	t.Cleanup(func() { srv.Close() })
	// open holds a connection from local and reports whether the server
	// answers a request on it.
	open := func(local string) (net.Conn, bool) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return c, false
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		return c, err == nil && strings.HasPrefix(line, "HTTP/1.1 204")
	}
	for i := range 4 {
		_, ok := open("127.0.0.1")
		require.True(t, ok, "trusted proxy connection %d", i+1)
	}
	for i := range 2 {
		_, ok := open("127.0.0.2")
		require.True(t, ok, "untrusted connection %d", i+1)
	}
	_, ok := open("127.0.0.2")
	require.False(t, ok, "a third from one untrusted address is closed")
}

// TestSlowClientsCannotHoldTheAPI holds 500 connections that trickle their
// headers a byte every 200 ms: the server closes them (past the per-client
// bound at once, the rest at the header timeout), and ingest from another
// address keeps answering meanwhile.
func TestSlowClientsCannotHoldTheAPI(t *testing.T) {
	t.Parallel()
	st, app, key := tenant(t, "slow")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.NewHTTPServer(api.New(api.Options{Store: st}).Handler(), api.ServerOptions{HeaderTimeout: time.Second})
	go func() { _ = srv.Serve(api.LimitListener(ln, 100)) }()
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var closedAfter []time.Duration
	stop := make(chan struct{})
	for range 500 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			go func() {
				for _, b := range []byte("POST /v1/apps HTTP/1.1\r\nHost: x\r\n") {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, _ = io.Copy(io.Discard, c) // returns when the server closes
			mu.Lock()
			closedAfter = append(closedAfter, time.Since(start))
			mu.Unlock()
		}()
	}
	// Ingest from another address while they are held.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	// Until the server has closed every slow connection (at least 20).
	allClosed := make(chan struct{})
	go func() { wg.Wait(); close(allClosed) }()
	held := func() bool {
		select {
		case <-allClosed:
			return false
		default:
			return true
		}
	}
	var slowest time.Duration
	ingests, whileHeld := 0, 0
	for i := 0; i < 20 || held(); i++ {
		if held() {
			whileHeld++
		}
		ingests++
		body := strings.NewReader(fmt.Sprintf(`{"type":"slow.test","data":{"i":%d}}`, i))
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/apps/"+app.ID+"/events", body)
		req.Header.Set("Authorization", "Bearer "+key)
		t0 := time.Now()
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		slowest = max(slowest, time.Since(t0))
	}
	<-allClosed
	close(stop)
	require.Len(t, closedAfter, 500, "the server closed every slow connection")
	latest := time.Duration(0)
	for _, d := range closedAfter {
		latest = max(latest, d)
	}
	// Bounded by the client's own 20 s read deadline, which never fired.
	require.Less(t, latest, 20*time.Second)
	require.Greater(t, whileHeld, 0, "ingest was answered while slow connections were held")
	t.Logf("500 slow connections closed within %s (header timeout 1s, 100 per client); %d of %d ingests answered while they were held, slowest %s",
		latest.Round(time.Millisecond), whileHeld, ingests, slowest.Round(time.Millisecond))
}

// TestPrunedDeliveryIsGone: a delivery ID older than the retention that is
// no longer stored answers 410 with the reason; a recent unknown one 404.
func TestPrunedDeliveryIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, key := tenant(t, "pruned")
	h := api.New(api.Options{Store: st, Retention: 30 * 24 * time.Hour}).Handler()
	get := func(id string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/apps/"+app.ID+"/deliveries/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	old := get(ids.NewAt(ids.Delivery, time.Now().Add(-31*24*time.Hour)))
	require.Equal(t, http.StatusGone, old.Code)
	require.Contains(t, old.Body.String(), "pruned")
	require.Equal(t, http.StatusNotFound, get(ids.New(ids.Delivery)).Code)

	// With a one-day retention of its own, two days old is pruned.
	twoDays := ids.NewAt(ids.Delivery, time.Now().Add(-48*time.Hour))
	require.Equal(t, http.StatusNotFound, get(twoDays).Code)
	day := 24 * time.Hour
	_, err := st.UpdateApp(ctx, app.ID, store.AppPatch{Retention: &day})
	require.NoError(t, err)
	short := get(twoDays)
	require.Equal(t, http.StatusGone, short.Code)
	require.Contains(t, short.Body.String(), "24h0m0s")
}

// tenant returns a store on its own database, an app named name in it and
// an admin API key.
func tenant(tb testing.TB, name string) (*store.Store, store.App, string) {
	tb.Helper()
	ctx := context.Background()
	st := pg.Store(tb, name)
	app, err := st.CreateApp(ctx, store.App{Name: name})
	require.NoError(tb, err)
	key := "hr_" + name + "_key_0123456789"
	require.NoError(tb, st.EnsureAdminKey(ctx, key))
	return st, app, key
}

// storeWithAdminKey is a store on a fresh database whose admin key is key.
func storeWithAdminKey(t *testing.T, name, key string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st := pg.Store(t, name)
	require.NoError(t, st.EnsureAdminKey(ctx, key))
	return st
}
