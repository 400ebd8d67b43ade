package integration

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enums "go.temporal.io/api/enums/v1"

	"hookrelay/delivery"
)

// TestHistoriesOfWorkflowMode records the default mode's paths, where
// every delivery's DeliveryWorkflow makes its first attempt, started at its
// due time: a local first attempt's success (one workflow task), a slow
// endpoint's regular one, a retry, a 429, a dead letter and its replay, and
// a cancel while a retry waits. Each history is replayed with today's code
// (keepHistory) and, with HOOKRELAY_RECORD_HISTORIES, kept as v13-*.
func TestHistoriesOfWorkflowMode(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	var mu sync.Mutex
	seen := map[string]int{}
	var fixed atomic.Bool
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		seen[r.URL.RawQuery]++
		n := seen[r.URL.RawQuery]
		mu.Unlock()
		switch {
		case q.Get("slow") != "":
			time.Sleep(700 * time.Millisecond)
		case q.Get("flaky") != "" && n == 1:
			w.WriteHeader(http.StatusBadGateway)
		case q.Get("throttle") != "" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case q.Get("code") == "404" && !fixed.Load():
			w.WriteHeader(http.StatusNotFound)
		case q.Get("code") == "503":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	endpoint := func(typ, query string, schedule ...string) string {
		return h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?" + query, "event_types": []string{typ},
			"retry_schedule": schedule}).ID
	}
	send := func(typ string) string { return h.send(appID, typ, map[string]any{}).Deliveries[0].ID }
	done := func(id string, want delivery.Status) {
		t.Helper()
		h.waitDelivery(appID, id, 20*time.Second, want)
		require.Eventually(t, func() bool { return !h.workflowOpen(id) || want == delivery.StatusDeadLettered }, 20*time.Second, 50*time.Millisecond)
	}
	tasks := func(id, runID string) (completed int, local bool) {
		for _, ev := range h.history(id, runID).Events {
			switch ev.GetEventType() {
			case enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				completed++
			case enums.EVENT_TYPE_MARKER_RECORDED:
				local = true
			}
		}
		return completed, local
	}

	endpoint("w.ok", "ok=1", "0s", "1s")
	ok := send("w.ok")
	done(ok, delivery.StatusSucceeded)
	n, local := tasks(ok, "")
	require.True(t, local, "attempt 1 is a local activity")
	require.Equal(t, 1, n, "a first-attempt success is one workflow task")
	require.Len(t, h.history(ok).Events, 7)
	h.keepHistory("v13-local-success", ok, "")

	// A slow endpoint's first answer (700 ms) marks it slow: its next
	// delivery's first attempt is a regular activity, completed
	// asynchronously, which holds no workflow task slot while it waits.
	endpoint("w.slow", "slow=1", "0s", "1s")
	done(send("w.slow"), delivery.StatusSucceeded)
	slow := send("w.slow")
	done(slow, delivery.StatusSucceeded)
	n, local = tasks(slow, "")
	require.False(t, local, "a slow endpoint's first attempt is a regular activity")
	require.Equal(t, 2, n)
	h.keepHistory("v13-regular-success", slow, "")

	endpoint("w.retry", "flaky=1", "0s", "1s")
	retried := send("w.retry")
	done(retried, delivery.StatusSucceeded)
	require.Len(t, h.attempts(appID, retried), 2)
	h.keepHistory("v13-retry-then-success", retried, "")

	endpoint("w.throttle", "throttle=1", "0s", "1h")
	throttled := send("w.throttle")
	done(throttled, delivery.StatusSucceeded)
	h.keepHistory("v13-throttled-then-success", throttled, "")

	endpoint("w.dead", "code=404", "0s")
	dead := send("w.dead")
	done(dead, delivery.StatusDeadLettered)
	first := h.runID(dead)
	fixed.Store(true)
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dead+"/replay", nil, nil))
	done(dead, delivery.StatusSucceeded)
	require.NotEqual(t, first, h.runID(dead), "the replay's cycle is the next run")
	h.keepHistory("v13-dead-letter-then-replay", dead, first)
	h.keepHistory("v13-replayed-cycle-success", dead, "")

	waitingEp := endpoint("w.wait", "code=503", "0s", "1h")
	waiting := send("w.wait")
	require.Eventually(t, func() bool { return len(h.attempts(appID, waiting)) == 1 }, 20*time.Second, 50*time.Millisecond)
	h.patchEndpoint(appID, waitingEp, map[string]any{"disabled": true})
	done(waiting, delivery.StatusCanceled)
	h.keepHistory("v13-canceled-while-waiting", waiting, "")
}
