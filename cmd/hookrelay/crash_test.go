package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hookrelay/webhook"
)

// counter is a receiver that verifies signatures and counts receipts per
// event ID.
type counter struct {
	mu       sync.Mutex
	verifier *webhook.Verifier
	got      map[string]int
	delay    time.Duration
	// gate, when set, holds every request until it is closed; inflight
	// counts the requests held.
	gate     chan struct{}
	inflight atomic.Int64
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	v := c.verifier
	c.mu.Unlock()
	if v == nil || v.Verify(r.Header, body) != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	time.Sleep(c.delay)
	if c.gate != nil {
		c.inflight.Add(1)
		<-c.gate
		c.inflight.Add(-1)
	}
	c.mu.Lock()
	c.got[r.Header.Get("webhook-id")]++
	c.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (c *counter) distinct() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dups := 0
	for _, n := range c.got {
		dups += n - 1
	}
	return len(c.got), dups
}

type crashRig struct {
	t       *testing.T
	dataDir string
	rc      *counter
	srv     *httptest.Server
	key     string
}

func newCrashRig(t *testing.T, delay time.Duration) *crashRig {
	base := stackDir(t, "hookrelay-crash-")
	rc := &counter{got: map[string]int{}, delay: delay}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return &crashRig{t: t, dataDir: filepath.Join(base, "data"), rc: rc, srv: srv}
}

func (r *crashRig) call(p *devProc, method, path string, body any, out any) int {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, "http://"+p.api+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+r.key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(r.t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// setup starts the stack, creates an app and an endpoint at the counter,
// and publishes n events.
func (r *crashRig) setup(n int) (*devProc, string) {
	return r.setupWith(n, 1)
}

// setupWith is setup publishing from clients concurrent clients.
func (r *crashRig) setupWith(n, clients int) (*devProc, string) {
	p := startDev(r.t, r.dataDir, false)
	raw, err := os.ReadFile(filepath.Join(r.dataDir, "admin-key"))
	require.NoError(r.t, err)
	r.key = strings.TrimSpace(string(raw))
	var app struct{ ID string }
	require.Equal(r.t, 201, r.call(p, "POST", "/v1/apps", map[string]any{"name": "crash"}, &app))
	var ep struct{ Secret string }
	require.Equal(r.t, 201, r.call(p, "POST", "/v1/apps/"+app.ID+"/endpoints", map[string]any{
		"url": r.srv.URL + "/hook", "retry_schedule": []string{"0s", "1s", "2s", "5s", "10s", "30s"}, "deadline": "10m"}, &ep))
	v, err := webhook.NewVerifier(ep.Secret)
	require.NoError(r.t, err)
	r.rc.mu.Lock()
	r.rc.verifier = v
	r.rc.mu.Unlock()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				require.Equal(r.t, 202, r.call(p, "POST", "/v1/apps/"+app.ID+"/events", map[string]any{"type": "payment.succeeded", "data": map[string]any{"i": i}}, nil))
			}
		}()
	}
	wg.Wait()
	return p, app.ID
}

func (r *crashRig) waitAll(n int, timeout time.Duration) (int, int) {
	deadline := time.Now().Add(timeout)
	for {
		got, dups := r.rc.distinct()
		if got >= n || time.Now().After(deadline) {
			return got, dups
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKillNineMidRun kills the whole dev process (API, worker, dispatcher,
// embedded Temporal; the private Postgres follows through its parent-death
// signal) with a few hundred events in flight, then starts it again.
func TestKillNineMidRun(t *testing.T) {
	r := newCrashRig(t, 20*time.Millisecond)
	const n = 300
	p, _ := r.setup(n)
	require.Eventually(t, func() bool { got, _ := r.rc.distinct(); return got >= 30 }, time.Minute, 10*time.Millisecond)
	pid := postmasterPID(t, filepath.Join(r.dataDir, "postgres"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited
	before, _ := r.rc.distinct()
	require.Eventually(t, func() bool { return !alive(pid) }, 30*time.Second, 50*time.Millisecond, "postgres follows its killed parent")

	p2 := startDev(t, r.dataDir, false)
	defer p2.stop(t)
	got, dups := r.waitAll(n, 3*time.Minute)
	t.Logf("reliability | kill -9 of the whole dev process after %d of %d delivered, then restart | %d | %d | %d | %d | %.2f%%", before, n, n, got, n-got, dups, 100*float64(got)/n)
	require.Equal(t, n, got, "every accepted event delivered after the crash")
}

// TestSIGTERMMidRun stops the process gracefully while attempts are in
// flight: it exits within its shutdown timeout, and what was cut short is
// retried after the restart.
func TestSIGTERMMidRun(t *testing.T) {
	r := newCrashRig(t, 1500*time.Millisecond)
	const n = 40
	p, _ := r.setup(n)
	require.Eventually(t, func() bool { got, _ := r.rc.distinct(); return got >= 3 }, time.Minute, 10*time.Millisecond)
	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.exited:
		require.NoError(t, err, p.stderr.String())
	case <-time.After(45 * time.Second):
		t.Fatal("no exit within 45 s of SIGTERM")
	}
	took := time.Since(start)
	require.Less(t, took, 30*time.Second+5*time.Second, "exits within its shutdown timeout")
	p2 := startDev(t, r.dataDir, false)
	defer p2.stop(t)
	got, dups := r.waitAll(n, 3*time.Minute)
	t.Logf("reliability | SIGTERM mid-run (exit took %s), then restart | %d | %d | %d | %d | %.2f%%", took.Round(time.Millisecond), n, got, n-got, dups, 100*float64(got)/n)
	require.Equal(t, n, got)
}

// killHolding kills the dev process p with SIGKILL while the receiver
// holds its requests, lets the held requests finish (nobody reads their
// answers) and waits for its Postgres to go.
func (r *crashRig) killHolding(p *devProc) {
	r.t.Helper()
	pid := postmasterPID(r.t, filepath.Join(r.dataDir, "postgres"))
	require.NoError(r.t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited
	close(r.rc.gate)
	require.Eventually(r.t, func() bool { return !alive(pid) }, 30*time.Second, 50*time.Millisecond)
}

// restartAndSettle starts the dev stack again on the rig's data and waits
// until all n events reached the receiver and every delivery succeeded; it
// returns a connection to its database (closed with the test), the
// receipts beyond the first and how long that took.
func (r *crashRig) restartAndSettle(n int) (db *pgx.Conn, dups int, recovered time.Duration) {
	r.t.Helper()
	restarted := time.Now()
	p2 := startDev(r.t, r.dataDir, false)
	r.t.Cleanup(func() { p2.stop(r.t) })
	got, dups := r.waitAll(n, 3*time.Minute)
	require.Equal(r.t, n, got, "every accepted event delivered after the crash")
	recovered = time.Since(restarted)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, p2.databaseURL())
	require.NoError(r.t, err)
	r.t.Cleanup(func() { db.Close(ctx) })
	require.Eventually(r.t, func() bool {
		var succeeded int
		require.NoError(r.t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'succeeded') FROM deliveries`).Scan(&succeeded))
		return succeeded == n
	}, time.Minute, 100*time.Millisecond)
	return db, dups, recovered
}

// TestKillNineWhileSendersHoldFirstAttempts kills the dev process while
// its sender holds at least 50 first attempts on the wire (the receiver
// holds every request), then starts it again: once their leases lapse the
// rows are taken again, every delivery ends delivered, and each first
// attempt is recorded once.
func TestKillNineWhileSendersHoldFirstAttempts(t *testing.T) {
	t.Setenv("HOOKRELAY_FIRST_ATTEMPTS", "sender")
	r := newCrashRig(t, 0)
	r.rc.gate = make(chan struct{})
	const n = 200
	p, _ := r.setupWith(n, 32)
	require.Eventually(t, func() bool { return r.rc.inflight.Load() >= 50 }, time.Minute, 10*time.Millisecond)
	held := r.rc.inflight.Load()
	ctx := context.Background()
	pre, err := pgx.Connect(ctx, p.databaseURL())
	require.NoError(t, err)
	var leased int
	require.NoError(t, pre.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE leased_until > now()`).Scan(&leased))
	pre.Close(ctx)
	r.killHolding(p)
	require.GreaterOrEqual(t, leased, 50, "at least 50 start rows were leased to the sender")

	db, dups, recovered := r.restartAndSettle(n)
	var firsts int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM attempts WHERE cycle = 1 AND number = 1`).Scan(&firsts))
	require.Equal(t, n, firsts, "each first attempt recorded once")
	t.Logf("reliability | kill -9 while %d first attempts were on the wire (%d start rows leased), then restart | %d | %d | %d | %d receipts beyond the first | all delivered %s after the restart",
		held, leased, n, n, 0, dups, recovered.Round(time.Millisecond))
}

// TestKillNineWhileWorkflowsHoldFirstAttempts is the kill -9 above in the
// default mode: the dev process dies while at least 50 first attempts are
// on the wire, each in its DeliveryWorkflow's first task (the receiver
// holds every request). After the restart the tasks time out and run
// again on the new worker, each claim waits for the dead request's mark to
// lapse, and every delivery ends delivered; every first attempt that a
// worker recorded is recorded once.
func TestKillNineWhileWorkflowsHoldFirstAttempts(t *testing.T) {
	r := newCrashRig(t, 0)
	r.rc.gate = make(chan struct{})
	const n = 200
	p, _ := r.setupWith(n, 32)
	require.Eventually(t, func() bool { return r.rc.inflight.Load() >= 50 }, time.Minute, 10*time.Millisecond)
	held := r.rc.inflight.Load()
	r.killHolding(p)

	db, dups, recovered := r.restartAndSettle(n)
	ctx := context.Background()
	var dupFirsts int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM (SELECT delivery_id FROM attempts WHERE cycle = 1 AND number = 1
		GROUP BY delivery_id HAVING count(*) > 1) x`).Scan(&dupFirsts))
	require.Zero(t, dupFirsts, "a first attempt recorded twice")
	t.Logf("reliability | kill -9 while %d first attempts were on the wire in their workflows, then restart | %d | %d | %d | %d receipts beyond the first | all delivered %s after the restart",
		held, n, n, 0, dups, recovered.Round(time.Millisecond))
}
