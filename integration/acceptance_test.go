package integration

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/inbox"
	"hookrelay/receiver"
)

// refReceiver is `hookrelay receiver` in-process on its own database, with
// the headers of every request recorded on the way in.
type refReceiver struct {
	pool *pgxpool.Pool
	srv  *httptest.Server
	mu   sync.Mutex
	rc   *receiver.Receiver
	hdrs []http.Header
}

// newRefReceiver serves a receiver URL; start the receiver itself with the
// endpoint's secret once the endpoint exists.
func newRefReceiver(t *testing.T) *refReceiver {
	t.Helper()
	pool := pg.Pool(t, "receiver", false)
	r := &refReceiver{pool: pool}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		rc := r.rc
		if req.URL.Path == "/webhook" {
			r.hdrs = append(r.hdrs, req.Header.Clone())
		}
		r.mu.Unlock()
		rc.Handler().ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *refReceiver) start(t *testing.T, secret, fail string, sleep time.Duration) {
	t.Helper()
	rc, err := receiver.New(context.Background(), receiver.Config{Secrets: []string{secret}, Pool: r.pool, Fail: fail, FailTimes: 1, Sleep: sleep, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = rc.Worker().Run(wctx) }()
	r.mu.Lock()
	r.rc = rc
	r.mu.Unlock()
}

func (r *refReceiver) stats(t *testing.T) receiver.Stats {
	r.mu.Lock()
	rc := r.rc
	r.mu.Unlock()
	st, err := rc.Stats(context.Background())
	require.NoError(t, err)
	return st
}

// TestSeedAcceptance runs the first seed's four local checks, plus replay,
// against the real stack and the reference receiver.
func TestSeedAcceptance(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	type check struct {
		name           string
		fail           string
		sleep          time.Duration
		schedule       []string
		codes          []any // per attempt: status code or nil (timeout)
		accepted, dups int
		midCheck       func(t *testing.T, r *refReceiver)
	}
	checks := []check{
		{name: "502 is retried and delivered", fail: receiver.Fail502, schedule: []string{"0s", "1100ms"}, codes: []any{502, 204}, accepted: 1},
		{name: "timeout before the response is retried; the duplicate is absorbed", fail: receiver.FailSleep, sleep: 1500 * time.Millisecond,
			schedule: []string{"0s", "1100ms"}, codes: []any{nil, 204}, accepted: 1, dups: 1},
		{name: "failed business write leaves no mark; the retry completes it", fail: receiver.FailRollback, schedule: []string{"0s", "3s"}, codes: []any{500, 204}, accepted: 1,
			midCheck: func(t *testing.T, r *refReceiver) {
				var seen, orders int
				require.NoError(t, r.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM webhook_inbox_seen), (SELECT count(*) FROM receiver_orders)`).Scan(&seen, &orders))
				require.Zero(t, seen, "no dedupe mark after the rolled-back attempt")
				require.Zero(t, orders)
			}},
		{name: "delivered normally", fail: receiver.FailNone, schedule: []string{"0s"}, codes: []any{204}, accepted: 1},
	}
	for i, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			r := newRefReceiver(t)
			typ := "seed.check" + string(rune('a'+i))
			ep := h.createEndpoint(appID, map[string]any{"url": r.srv.URL + "/webhook", "event_types": []string{typ},
				"retry_schedule": c.schedule, "request_timeout": "1s", "deadline": "1m"})
			r.start(t, ep.Secret, c.fail, c.sleep)
			ev := h.send(appID, typ, map[string]any{"order": i})
			dlv := ev.Deliveries[0].ID
			if c.midCheck != nil {
				require.Eventually(t, func() bool { return len(h.attempts(appID, dlv)) >= 1 }, 10*time.Second, 20*time.Millisecond)
				c.midCheck(t, r)
			}
			d := h.waitDelivery(appID, dlv, 30*time.Second, delivery.StatusSucceeded)
			atts := h.attempts(appID, dlv)
			// Every simulated failure leaves a record: request time, status
			// code, attempt count, final state.
			require.Equal(t, len(c.codes), d.AttemptCount)
			require.Len(t, atts, len(c.codes))
			for j, want := range c.codes {
				a := atts[len(atts)-1-j] // newest first
				require.False(t, a.StartedAt.IsZero())
				require.Equal(t, j+1, a.Number)
				if want == nil {
					require.Nil(t, a.StatusCode, "attempt %d", j+1)
					require.Contains(t, a.Error, "timeout")
				} else {
					require.NotNil(t, a.StatusCode, "attempt %d: %s", j+1, a.Error)
					require.Equal(t, want, *a.StatusCode, "attempt %d", j+1)
				}
			}
			require.Eventually(t, func() bool { return r.stats(t).SideEffects == 1 }, 10*time.Second, 20*time.Millisecond)
			st := r.stats(t)
			require.Equal(t, len(c.codes), st.Received, "received = attempts that reached it")
			require.Equal(t, c.accepted, st.Accepted)
			require.Equal(t, c.dups, st.Duplicates)
			require.Equal(t, 1, st.BusinessEffects, "one business effect per event")
			require.Equal(t, 1, st.SideEffects, "one external side effect per event")
			require.Empty(t, st.Rejected)
		})
	}

	t.Run("a replay after success is absorbed with 2xx and keeps the event ID", func(t *testing.T) {
		r := newRefReceiver(t)
		ep := h.createEndpoint(appID, map[string]any{"url": r.srv.URL + "/webhook", "event_types": []string{"seed.replay"}})
		r.start(t, ep.Secret, receiver.FailNone, 0)
		ev := h.send(appID, "seed.replay", map[string]any{"order": 42})
		dlv := ev.Deliveries[0].ID
		h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
		nextSecond(t) // the replay's timestamp is a later second
		require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlv+"/replay", nil, nil))
		require.Eventually(t, func() bool { return r.stats(t).Duplicates == 1 }, 20*time.Second, 20*time.Millisecond)
		d := h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
		require.Len(t, d.Replays, 1)
		st := r.stats(t)
		require.Equal(t, 2, st.Received)
		require.Equal(t, 1, st.BusinessEffects)
		atts := h.attempts(appID, dlv)
		require.Len(t, atts, 2)
		for _, a := range atts {
			require.Equal(t, 204, *a.StatusCode, "the duplicate still gets 2xx")
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		require.Len(t, r.hdrs, 2)
		require.Equal(t, r.hdrs[0].Get("webhook-id"), r.hdrs[1].Get("webhook-id"), "same event ID")
		require.NotEqual(t, r.hdrs[0].Get("webhook-timestamp"), r.hdrs[1].Get("webhook-timestamp"), "fresh timestamp")
		require.NotEqual(t, r.hdrs[0].Get("webhook-signature"), r.hdrs[1].Get("webhook-signature"), "fresh signature")
	})

	t.Run("a forged request is rejected and never marks the ID seen", func(t *testing.T) {
		r := newRefReceiver(t)
		r.start(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", receiver.FailNone, 0)
		req, _ := http.NewRequest("POST", r.srv.URL+"/webhook", nil)
		req.Header.Set("webhook-id", "evt_forged")
		req.Header.Set("webhook-timestamp", "1")
		req.Header.Set("webhook-signature", "v1,AAAA")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		st := r.stats(t)
		require.Equal(t, 1, st.Rejected["stale"])
		var seen int
		require.NoError(t, r.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_inbox_seen`).Scan(&seen))
		require.Zero(t, seen)
	})
}

// TestBacklogShedsToTheSender: a receiver whose side effects lag sheds
// webhooks with 503 + Retry-After past 100 waiting tasks; the sender's
// retries do the queueing, and every event is processed once, none lost.
func TestBacklogShedsToTheSender(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	r := newRefReceiver(t)
	ep := h.createEndpoint(appID, map[string]any{"url": r.srv.URL + "/webhook", "event_types": []string{"backlog.test"},
		"retry_schedule": []string{"0s", "1s", "1s", "2s", "2s", "3s", "3s", "5s", "5s", "5s", "5s", "5s"}, "deadline": "10m"})
	var rc *receiver.Receiver
	rc, err := receiver.New(context.Background(), receiver.Config{Secrets: []string{ep.Secret}, Pool: r.pool, MaxBacklog: 100,
		Logger: slog.New(slog.DiscardHandler), Handle: func(ctx context.Context, task inbox.Task) error {
			time.Sleep(25 * time.Millisecond) // a slow external system: 40 tasks/s
			return rc.SideEffect(ctx, task)
		}})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = rc.Worker().Run(wctx) }()
	r.mu.Lock()
	r.rc = rc
	r.mu.Unlock()

	const n = 500
	h.burst(appID, n, func(int) string { return "backlog.test" })
	require.Eventually(t, func() bool {
		st := r.stats(t)
		return st.BusinessEffects == n && st.SideEffects == n
	}, 3*time.Minute, 200*time.Millisecond)
	st := r.stats(t)
	require.Equal(t, n, st.Accepted, "each event processed once")
	r.mu.Lock()
	requests := len(r.hdrs)
	r.mu.Unlock()
	require.Greater(t, requests, n, "some were shed and retried")
	t.Logf("500 events, receiver backlog bound 100: %d requests (%d shed with 503 and retried), %d processed once, 0 lost", requests, requests-n-st.Duplicates, st.Accepted)
}
