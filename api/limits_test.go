package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/ids"
	"hookrelay/store"
)

// TestFailedAuthIsRateLimited: past the limit a client address gets a bare
// 429 with Retry-After, even with a valid key; another address is still
// served; no failure is logged with the key.
func TestFailedAuthIsRateLimited(t *testing.T) {
	ctx := context.Background()
	st, err := pg.Store(ctx, "auth")
	require.NoError(t, err)
	t.Cleanup(st.Pool().Close)
	const good = "hr_good_key_0123456789"
	require.NoError(t, st.EnsureAdminKey(ctx, good))
	var logs bytes.Buffer
	h := api.New(api.Options{Store: st, AuthFailuresPerMinute: 5, Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Handler()
	call := func(from, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/apps", nil)
		req.RemoteAddr = from + ":4242"
		req.Header.Set("X-Forwarded-For", "203.0.113.9") // not trusted
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 5 {
		rec := call("192.0.2.1", fmt.Sprintf("hr_wrong_guess_%d", i))
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.NotContains(t, rec.Body.String(), "detail", "a bare 401")
	}
	rec := call("192.0.2.1", good)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "over the limit, even a valid key waits")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Equal(t, http.StatusOK, call("192.0.2.2", good).Code, "another address is served")
	require.Equal(t, http.StatusUnauthorized, call("192.0.2.2", "").Code)
	require.Contains(t, logs.String(), "authentication failed")
	require.NotContains(t, logs.String(), "hr_wrong_guess")
	require.NotContains(t, logs.String(), "hr_wrong")
}

// TestSlowClientsCannotHoldTheAPI holds 500 connections that trickle their
// headers a byte every 200 ms: the server closes them (past the per-client
// bound at once, the rest at the header timeout), and ingest from another
// address keeps answering meanwhile.
func TestSlowClientsCannotHoldTheAPI(t *testing.T) {
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
	st, err := pg.Store(ctx, name)
	require.NoError(tb, err)
	tb.Cleanup(st.Pool().Close)
	app, err := st.CreateApp(ctx, store.App{Name: name})
	require.NoError(tb, err)
	key := "hr_" + name + "_key_0123456789"
	require.NoError(tb, st.EnsureAdminKey(ctx, key))
	return st, app, key
}
