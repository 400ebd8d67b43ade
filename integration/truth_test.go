package integration

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/config"
	"hookrelay/delivery"
	"hookrelay/store"
)

// The delivery log tells the truth, and tenants do not share limits: each
// test here pins one path on the real stack (Postgres, the embedded
// Temporal server, receivers on 127.0.0.1).

// TestFinalStateNeverChanges disables an endpoint while an event's first
// request (answered after 3 s) is on the wire,
// and reads the delivery every 100 ms to its end: it says delivering while
// the request is open, and once it says succeeded or canceled it never
// says anything else.
func TestFinalStateNeverChanges(t *testing.T) {
	for _, code := range []int{http.StatusOK, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			h := newHarness(t)
			appID := h.createApp()
			open := make(chan struct{}, 1)
			rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				open <- struct{}{}
				select {
				case <-time.After(3 * time.Second):
				case <-r.Context().Done():
				}
				w.WriteHeader(code)
			})
			ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "1s", "1s", "1s", "1s", "1s"}})
			dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
			<-open // the request is on the wire
			h.patchEndpoint(appID, ep.ID, map[string]any{"disabled": true})
			var seen []string
			var final delivery.Status
			for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				var d store.Delivery
				require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlv, nil, &d))
				if now := fmt.Sprintf("%s/%d", d.Status, d.AttemptCount); len(seen) == 0 || seen[len(seen)-1] != now {
					seen = append(seen, now)
				}
				if final != "" {
					require.Equal(t, final, d.Status, "a final status changed: %v", seen)
				}
				if !d.Status.InFlight() {
					final = d.Status
					require.Equal(t, 1, d.AttemptCount, "the request that went out is recorded when the status is final: %v", seen)
				}
			}
			want := delivery.StatusSucceeded
			if code != http.StatusOK {
				want = delivery.StatusCanceled
			}
			require.Equal(t, want, final, "statuses seen: %v", seen)
			require.Len(t, rc.receipts(), 1, "nothing sent after the disable")
			t.Logf("status/attempts read every 100 ms from the disable, changes only: %v", seen)
		})
	}
}

// TestCancelReachesHeldFirstAttempts disables an endpoint while the sender
// holds its deliveries' first attempts (due 2 s after acceptance) and
// enables it again before they are due: none is sent, every one is
// canceled with no attempt.
func TestCancelReachesHeldFirstAttempts(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"2s", "1s"}})
	const n = 24
	dlvs := h.burst(appID, n, func(int) string { return "order.paid" })
	require.Eventually(t, func() bool {
		var leased int
		require.NoError(t, h.store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM outbox WHERE delivery_id = ANY ($1) AND leased_until > now()`, dlvs).Scan(&leased))
		return leased == n
	}, 5*time.Second, 10*time.Millisecond, "the sender holds every first attempt")
	h.patchEndpoint(appID, ep.ID, map[string]any{"disabled": true})
	h.patchEndpoint(appID, ep.ID, map[string]any{"disabled": false})
	// Each row ends when its first attempt falls due and finds the delivery
	// canceled (its cancel row follows it).
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, h.store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM outbox WHERE delivery_id = ANY ($1)`, dlvs).Scan(&n))
		return n == 0
	}, 20*time.Second, 20*time.Millisecond, "every held first attempt ended")
	for _, id := range dlvs {
		d := h.waitDelivery(appID, id, 10*time.Second, delivery.StatusCanceled)
		require.Zero(t, d.AttemptCount, id)
	}
	require.Empty(t, rc.receipts(), "a canceled delivery is never sent")
}

// flaky answers a request by a hash of its webhook ID and its count: a
// third fail with 500, some with 429 (with and without Retry-After), the
// rest succeed.
func flaky(seen map[string]int, mu *sync.Mutex) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		f := fnv.New32a()
		fmt.Fprintf(f, "%s/%d/%s", id, n, r.URL.Path)
		switch v := f.Sum32() % 12; {
		case v < 4:
			w.WriteHeader(http.StatusInternalServerError)
		case v == 4:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case v == 5:
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}
}

// TestBurstAttemptsEqualTheWire: 500 events to two endpoints whose
// receivers fail at random; once every delivery has ended, the attempts
// Postgres holds equal the requests each receiver saw, delivery by
// delivery.
func TestBurstAttemptsEqualTheWire(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	var mu sync.Mutex
	seenA, seenB := map[string]int{}, map[string]int{}
	rcA, rcB := newReceiver(t, flaky(seenA, &mu)), newReceiver(t, flaky(seenB, &mu))
	epA := h.createEndpoint(appID, map[string]any{"url": rcA.URL(), "retry_schedule": []string{"0s", "1s", "1s", "2s"}})
	epB := h.createEndpoint(appID, map[string]any{"url": rcB.URL() + "b", "retry_schedule": []string{"1s", "1s", "1s", "2s"}})
	const n = 500
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	events := make([]eventResp, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			events[i] = h.send(appID, "order.paid", map[string]any{"i": i})
		}()
	}
	wg.Wait()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE app_id = $1 AND status = ANY ($2)`,
			appID, delivery.InFlight()).Scan(&open))
		return open == 0
	}, 2*time.Minute, 100*time.Millisecond)
	rows, err := h.store.Pool().Query(ctx, `SELECT d.event_id, d.endpoint_id, count(a.id) FROM deliveries d
		LEFT JOIN attempts a ON a.delivery_id = d.id WHERE d.app_id = $1 GROUP BY 1, 2`, appID)
	require.NoError(t, err)
	recorded := map[string]int{}
	for rows.Next() {
		var ev, ep string
		var c int
		require.NoError(t, rows.Scan(&ev, &ep, &c))
		recorded[ep+"/"+ev] = c
	}
	require.NoError(t, rows.Err())
	mu.Lock()
	defer mu.Unlock()
	total, mismatched := 0, []string{}
	for _, ev := range events {
		for ep, seen := range map[string]map[string]int{epA.ID: seenA, epB.ID: seenB} {
			total += seen[ev.ID]
			if recorded[ep+"/"+ev.ID] != seen[ev.ID] {
				mismatched = append(mismatched, fmt.Sprintf("%s/%s: %d recorded, %d sent", ep, ev.ID, recorded[ep+"/"+ev.ID], seen[ev.ID]))
			}
		}
	}
	require.Empty(t, mismatched)
	t.Logf("%d deliveries, %d requests on the wire, %d attempts recorded: equal delivery by delivery", 2*n, total, total)
}

// lateness is each first request's lateness for an app's deliveries,
// sorted.
func (h *harness) lateness(appID string) []time.Duration {
	h.t.Helper()
	out, err := h.store.FirstRequestLateness(context.Background(), appID, nil)
	require.NoError(h.t, err)
	slices.Sort(out)
	return out
}

// settledLateness waits until no delivery is in flight and returns the
// first-attempt lateness of appA's na deliveries and of appB's nb, sorted.
func (h *harness) settledLateness(appA string, na int, appB string, nb int) (la, lb []time.Duration) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		var open int
		require.NoError(h.t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE status = ANY ($1)`, delivery.InFlight()).Scan(&open))
		return open == 0
	}, 5*time.Minute, 200*time.Millisecond)
	la, lb = h.lateness(appA), h.lateness(appB)
	require.Len(h.t, la, na)
	require.Len(h.t, lb, nb)
	return la, lb
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// TestFloodDoesNotDelayAnotherApp: app A's backlog (20,000 events in sender
// mode, 2,000 in workflow mode) waits in the
// outbox (accepted while no worker ran); once a worker starts, app B's
// first attempts go out within a round or two of their due time while A's
// backlog drains: the outbox is claimed fairly across apps. Figures from
// one run decide, not a clock: B's p99 lateness must be under a quarter of
// A's median.
func TestFloodDoesNotDelayAnotherApp(t *testing.T) {
	for _, c := range []struct {
		mode  string
		flood int
	}{
		// The sender drains 20,000 in about a minute here; one workflow per
		// delivery drains about a hundred a second, so its backlog is 2,000.
		{config.FirstAttemptsSender, 20000},
		{config.FirstAttemptsWorkflow, 2000},
	} {
		t.Run(c.mode, func(t *testing.T) { floodBesideAnotherApp(t, c.mode, c.flood) })
	}
}

func floodBesideAnotherApp(t *testing.T, mode string, flood int) {
	h := newHarness(t, inMode(mode))
	appA, appB := h.createApp(), h.createApp()
	rc := newReceiver(t, nil)
	h.createEndpoint(appA, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "5s"}})
	h.createEndpoint(appB, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "5s"}})
	h.stopWorker()
	var fw sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range flood {
		sem <- struct{}{}
		fw.Go(func() {
			defer func() { <-sem }()
			h.send(appA, "flood.made", map[string]any{"i": i})
		})
	}
	fw.Wait()
	h.startWorker()
	for i := range 40 {
		h.send(appB, "order.paid", map[string]any{"i": i})
		time.Sleep(50 * time.Millisecond)
	}
	la, lb := h.settledLateness(appA, flood, appB, 40)
	t.Logf("%s mode, backlog of %d from app A: A's first-attempt lateness p50 %s p99 %s; app B's, sent meanwhile, p50 %s p99 %s",
		mode, flood, pct(la, .5), pct(la, .99), pct(lb, .5), pct(lb, .99))
	require.Less(t, pct(lb, .99), pct(la, .5)/4, "B is not queued behind A's backlog")
}

// TestLiveFloodDoesNotDelayAnotherAppInOneProcess: where the API and the
// worker share a process, ingest hands rows due at once to its own
// sender, with no round. App A floods an endpoint that answers each
// request after 2 s, from 8 clients, while app B sends 40 events, each
// once the one before arrived: A's first attempts queue for their share, so A's ingests stop
// handing rows off and A's rows wait for the rounds, which take every
// app's rows in turn; B's rows are still handed off and go out on time.
// Figures from one run decide, not a clock: B's p99 lateness must be
// under a quarter of A's median, and at least B's 40 rows went through
// the hand-off.
func TestLiveFloodDoesNotDelayAnotherAppInOneProcess(t *testing.T) {
	h := newHarness(t, func(hc *harnessConfig) { hc.oneProcess = true })
	appA, appB := h.createApp(), h.createApp()
	slow := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	fast := newReceiver(t, nil)
	h.createEndpoint(appA, map[string]any{"url": slow.URL(), "retry_schedule": []string{"0s", "5s"}})
	h.createEndpoint(appB, map[string]any{"url": fast.URL(), "retry_schedule": []string{"0s", "5s"}})
	handoffs := func() float64 { return scrape(t, h.url+"/metrics")("hookrelay_dispatcher_handoffs_total") }
	const flood = 3000
	var fw sync.WaitGroup
	sem := make(chan struct{}, 8)
	fw.Go(func() {
		for i := range flood {
			sem <- struct{}{}
			fw.Go(func() {
				defer func() { <-sem }()
				h.send(appA, "flood.made", map[string]any{"i": i})
			})
		}
	})
	// B sends once A's first attempts queue for their share.
	require.Eventually(t, func() bool { return len(slow.receipts()) >= 400 }, time.Minute, 20*time.Millisecond)
	before := handoffs()
	for i := range 40 { // each once the one before arrived, through A's flood
		h.send(appB, "order.paid", map[string]any{"i": i})
		require.Eventually(t, func() bool { return len(fast.receipts()) > i }, time.Minute, time.Millisecond)
	}
	handed := handoffs() - before
	fw.Wait()
	la, lb := h.settledLateness(appA, flood, appB, 40)
	t.Logf("live flood of %d from app A to a 2 s endpoint: A's first-attempt lateness p50 %s p99 %s; app B's, sent meanwhile, p50 %s p99 %s; %v rows handed off while B sent",
		flood, pct(la, .5), pct(la, .99), pct(lb, .5), pct(lb, .99), handed)
	require.GreaterOrEqual(t, handed, 40.0, "B's rows were handed to the sender")
	require.Less(t, pct(lb, .99), pct(la, .5)/4, "B is not queued behind A's flood")
}

// TestBacklogBoundIsPerApp: with no worker, an app past its outbox bound is
// answered 429 with Retry-After; another app's ingest is still 202.
func TestBacklogBoundIsPerApp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(hc *harnessConfig) { hc.maxBacklog = 10 })
	appA, appB := h.createApp(), h.createApp()
	rc := newReceiver(t, nil)
	h.createEndpoint(appA, map[string]any{"url": rc.URL()})
	h.createEndpoint(appB, map[string]any{"url": rc.URL()})
	h.stopWorker()
	shed := 0
	for i := 0; i < 100 && shed == 0; i++ {
		req, err := http.NewRequest("POST", h.url+"/v1/apps/"+appA+"/events", strings.NewReader(`{"type":"order.paid","data":{}}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+h.adminKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			shed++
			require.NotEmpty(t, resp.Header.Get("Retry-After"))
			continue
		}
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, 1, shed, "app A sheds past its own bound")
	h.send(appB, "order.paid", map[string]any{}) // 202: B's backlog is its own
}

// TestBadKeysBehindAProxyDoNotStopOthers: behind a trusted proxy, one
// producer's stream of bad keys makes that producer's bad requests 429;
// another producer's valid requests, and even the first producer's valid
// ones, are still accepted.
func TestBadKeysBehindAProxyDoNotStopOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(hc *harnessConfig) { hc.trustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	appID := h.createApp()
	rc := newReceiver(t, nil)
	h.createEndpoint(appID, map[string]any{"url": rc.URL()})
	post := func(key, client string) int {
		req, err := http.NewRequest("POST", h.url+"/v1/apps/"+appID+"/events", strings.NewReader(`{"type":"order.paid","data":{}}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Forwarded-For", client)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	codes := map[int]int{}
	for range 200 {
		codes[post("hr_admin_wrong", "203.0.113.5")]++
	}
	require.Positive(t, codes[http.StatusTooManyRequests], "the failing producer is limited: %v", codes)
	require.Equal(t, http.StatusAccepted, post(h.adminKey, "203.0.113.6"), "another producer behind the same proxy")
	require.Equal(t, http.StatusUnauthorized, post("hr_admin_wrong", "203.0.113.6"), "another producer's own failures are its own")
	require.Equal(t, http.StatusAccepted, post(h.adminKey, "203.0.113.5"), "a valid key is never refused for others' failures")
	t.Logf("200 bad keys from one producer behind the proxy: %v", codes)
}
