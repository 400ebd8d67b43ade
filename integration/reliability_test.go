package integration

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/delivery"
	"hookrelay/store"
)

// sendMany publishes n events and returns their delivery IDs.
func (h *harness) sendMany(appID, typ string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		ev := h.send(appID, typ, map[string]any{"i": i})
		require.Len(h.t, ev.Deliveries, 1)
		out = append(out, ev.Deliveries[0].ID)
	}
	return out
}

// burst publishes n events from 16 concurrent clients, event i of type
// typ(i), and returns the delivery ID of each (in order of i).
func (h *harness) burst(appID string, n int, typ func(i int) string) []string {
	out := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ev := h.send(appID, typ(i), map[string]any{"i": i})
			require.Len(h.t, ev.Deliveries, 1)
			out[i] = ev.Deliveries[0].ID
		}()
	}
	wg.Wait()
	return out
}

// settle waits until every delivery is succeeded or dead-lettered and
// returns how many succeeded.
func (h *harness) settle(appID string, dlvs []string, timeout time.Duration) int {
	ok := 0
	for _, id := range dlvs {
		if h.waitDelivery(appID, id, timeout, delivery.StatusSucceeded, delivery.StatusDeadLettered).Status == delivery.StatusSucceeded {
			ok++
		}
	}
	return ok
}

// reportRow logs one line of the README's Reliability table.
func reportRow(t *testing.T, scenario string, sent, delivered, dups int) {
	t.Logf("reliability | %s | %d | %d | %d | %d | %.2f%%", scenario, sent, delivered, sent-delivered, dups, 100*float64(delivered)/float64(sent))
}

func dupCount(byID map[string]int) int {
	n := 0
	for _, c := range byID {
		n += c - 1
	}
	return n
}

func slow(d time.Duration) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(d)
		w.WriteHeader(http.StatusOK)
	}
}

// inFlight publishes n events to a slow receiver and returns once a tenth
// of them arrived, so the rest are queued or in flight.
func (h *harness) inFlight(n int) (string, *probe, []string) {
	appID := h.createApp()
	rc := newReceiver(h.t, slow(20*time.Millisecond))
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "1s", "2s", "5s", "10s", "20s"}, "deadline": "5m"})
	rc.setSecrets(ep.Secret)
	dlvs := h.sendMany(appID, "payment.succeeded", n)
	require.Eventually(h.t, func() bool { return len(rc.byID()) >= n/10 }, 30*time.Second, 10*time.Millisecond)
	return appID, rc, dlvs
}

func TestPostgresRestartMidRun(t *testing.T) {
	if pg.Cluster == nil {
		t.Skip("HOOKRELAY_DATABASE_URL is an external server; it cannot be restarted here")
	}
	h := newHarness(t)
	const n = 200
	appID, rc, dlvs := h.inFlight(n)

	require.NoError(t, pg.Cluster.Stop())
	// While Postgres is down the API answers 503 with Retry-After, not 500.
	var p api.Problem
	code := h.do("POST", "/v1/apps/"+appID+"/events", map[string]any{"type": "payment.succeeded", "data": map[string]any{}}, &p)
	require.Equal(t, http.StatusServiceUnavailable, code, p.Detail)
	code = h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlvs[0], nil, &p)
	require.Equal(t, http.StatusServiceUnavailable, code)
	// The outage lasts 2 s, attempts and claims failing meanwhile, and the
	// API answers 503 throughout it.
	require.Never(t, func() bool {
		return h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlvs[0], nil, &p) != http.StatusServiceUnavailable
	}, 2*time.Second, 200*time.Millisecond)
	require.NoError(t, pg.Cluster.Start(context.Background()))

	delivered := h.settle(appID, dlvs, 3*time.Minute)
	byID := rc.byID()
	reportRow(t, "Postgres restarted mid-run", n, delivered, dupCount(byID))
	require.Equal(t, n, delivered)
	require.Len(t, byID, n)
}

func TestTemporalOutageMidRun(t *testing.T) {
	h := newHarness(t)
	const n = 300
	appID, rc, dlvs := h.inFlight(n)
	// Temporal unreachable for the outage's length: workers, dispatcher and
	// API all lose it.
	h.proxy.Close()
	time.Sleep(3 * time.Second)
	require.NoError(t, h.proxy.Open())
	delivered := h.settle(appID, dlvs, 3*time.Minute)
	byID := rc.byID()
	reportRow(t, "Temporal unreachable for 3 s mid-run", n, delivered, dupCount(byID))
	require.Equal(t, n, delivered)
}

func TestHostileReceiverFlaky(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	rng := rand.New(rand.NewPCG(7, 11))
	var mu = make(chan struct{}, 1)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu <- struct{}{}
		roll := rng.IntN(100)
		<-mu
		switch {
		case roll < 10:
			w.WriteHeader(http.StatusServiceUnavailable)
		case roll < 20:
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case roll < 30:
			select {
			case <-time.After(800 * time.Millisecond):
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "200ms", "500ms", "1s", "2s", "3s"},
		"request_timeout": "500ms", "deadline": "30s"})
	rc.setSecrets(ep.Secret)
	const n = 300
	dlvs := h.sendMany(appID, "payment.succeeded", n)
	delivered := h.settle(appID, dlvs, 2*time.Minute)
	var st store.Stats
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/stats?last=1000", nil, &st))
	reportRow(t, "receiver failing 30 % (5xx, resets, timeouts)", n, delivered, dupCount(rc.byID()))
	t.Logf("stats: %+v", st)
	require.GreaterOrEqual(t, st.EffectiveDeliveryRate, 0.99)
	require.Equal(t, delivered, st.FirstAttemptSuccess+st.RetrySuccess)
}

func TestHostileReceiverBodies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	var written atomic.Int64
	drip := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for i := 0; i < 100; i++ {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	hugeDone := make(chan struct{}, 1)
	huge := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		defer func() { hugeDone <- struct{}{} }()
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 64<<10)
		for i := 0; i < 800; i++ { // 50 MiB
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	epD := h.createEndpoint(appID, map[string]any{"url": drip.URL(), "event_types": []string{"t.drip"}, "retry_schedule": []string{"0s"}, "request_timeout": "1s"})
	epH := h.createEndpoint(appID, map[string]any{"url": huge.URL(), "event_types": []string{"t.huge"}, "retry_schedule": []string{"0s"}, "request_timeout": "5s"})
	drip.setSecrets(epD.Secret)
	huge.setSecrets(epH.Secret)

	evD := h.send(appID, "t.drip", map[string]any{})
	d := h.waitDelivery(appID, evD.Deliveries[0].ID, 20*time.Second, delivery.StatusDeadLettered)
	a := d.LastAttempt
	require.Contains(t, a.Error, "timeout", "a dripping response is cut at the request timeout")
	require.Less(t, a.DurationMS, int64(1900))

	evH := h.send(appID, "t.huge", map[string]any{})
	d = h.waitDelivery(appID, evH.Deliveries[0].ID, 20*time.Second, delivery.StatusSucceeded)
	require.Len(t, []rune(d.LastAttempt.ResponseExcerpt), 2048, "2 KiB excerpt stored (NUL bytes replaced)")
	select { // the receiver's handler ended: its writes failed once the body was cut
	case <-hugeDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the receiver kept writing")
	}
	require.Less(t, written.Load(), int64(8<<20), "the 50 MiB body is cut after the 64 KiB read cap")
	t.Logf("huge body: receiver managed to write %d bytes of 50 MiB", written.Load())
}

func TestProductionTargets(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *harnessConfig) { c.production = true })
	appID := h.createApp()
	for _, u := range []string{"http://example.com/hook", "https://127.0.0.1/hook", "https://[::1]/hook", "https://10.0.0.1/hook",
		"https://169.254.169.254/latest/meta-data", "https://localhost/hook", "file:///etc/passwd", "gopher://example.com/"} {
		var p api.Problem
		require.Equal(t, http.StatusUnprocessableEntity, h.do("POST", "/v1/apps/"+appID+"/endpoints", map[string]any{"url": u}, &p), u)
		require.Equal(t, []string{"url"}, p.Fields, u)
		t.Logf("refused %s: %s", u, p.Detail)
	}

	// A hostname that resolves to loopback passes creation and is refused
	// at dial time: nothing is sent.
	host, _ := os.Hostname()
	addrs, _ := net.LookupHost(host)
	if len(addrs) == 0 || !net.ParseIP(addrs[0]).IsLoopback() {
		t.Skipf("hostname %q does not resolve to loopback here", host)
	}
	ln, accepted := countingListener(t)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	h.createEndpoint(appID, map[string]any{"url": "https://" + host + ":" + port + "/hook"})
	ev := h.send(appID, "payment.succeeded", map[string]any{})
	d := h.waitDelivery(appID, ev.Deliveries[0].ID, 20*time.Second, delivery.StatusDeadLettered)
	require.Contains(t, d.LastAttempt.Error, "not allowed (loopback)")
	require.Contains(t, *d.DeadLetterReason, "permanent")
	require.Zero(t, accepted.Load(), "no connection reached the loopback target")
}

// countingListener listens on a free loopback port until t ends, counting
// (and closing) every connection it accepts: a target that must see none.
func countingListener(t *testing.T) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	accepted := &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln, accepted
}

func TestBackpressure(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) { c.maxBacklog = 50 })
	appID := h.createApp()
	rc := newReceiver(t, nil)
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL()})
	rc.setSecrets(ep.Secret)
	h.proxy.Close() // the dispatcher cannot drain
	var accepted []string
	shed := 0
	// One event each 10 ms until ingest sheds: the backlog watcher counts
	// the outbox every backlogInterval, so the pace, not an order, is what
	// the pause sets.
	for i := 0; i < 200 && shed == 0; i++ {
		req, _ := http.NewRequest("POST", h.url+"/v1/apps/"+appID+"/events", strings.NewReader(fmt.Sprintf(`{"type":"payment.succeeded","data":{"i":%d}}`, i)))
		req.Header.Set("Authorization", "Bearer "+h.adminKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusAccepted:
			accepted = append(accepted, "ok")
		case http.StatusTooManyRequests:
			shed++
			require.Equal(t, "1", resp.Header.Get("Retry-After"))
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 1, shed, "ingest sheds once the backlog passes its bound")
	require.GreaterOrEqual(t, len(accepted), 50)
	require.NoError(t, h.proxy.Open())
	require.Eventually(t, func() bool { return len(rc.byID()) == len(accepted) }, time.Minute, 50*time.Millisecond, "everything accepted is delivered")
	t.Logf("backpressure: %d accepted before shedding at a bound of 50, all delivered", len(accepted))
}
