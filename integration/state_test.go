package integration

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	enums "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"

	"hookrelay/delivery"
	"hookrelay/internal/app"
	"hookrelay/store"
)

// The delivery state machine on the real stack: each test pins one path
// that once lost a record, left a workflow running or reported a wrong
// figure.

func (h *harness) patchEndpoint(appID, epID string, body map[string]any) {
	h.t.Helper()
	require.Equal(h.t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+epID, body, nil))
}

// replayRange replays an endpoint's dead letters of the last hour.
func (h *harness) replayRange(appID, epID string) (int, map[string]any) {
	var out map[string]any
	code := h.do("POST", "/v1/apps/"+appID+"/endpoints/"+epID+"/replay",
		map[string]any{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}, &out)
	return code, out
}

// cancelDispatched waits until the outbox has handed the delivery's cancel
// to its workflow (no row of it is left).
func (h *harness) cancelDispatched(id string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		var n int
		require.NoError(h.t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE delivery_id = $1`, id).Scan(&n))
		return n == 0
	}, 20*time.Second, 20*time.Millisecond, "cancel of %s dispatched", id)
}

// cancelQueued waits until the delivery's cancel is in the outbox (it is
// handed to its owner after the start a sender holds).
func (h *harness) cancelQueued(id string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		var n int
		require.NoError(h.t, h.store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM outbox WHERE delivery_id = $1 AND kind = 'cancel'`, id).Scan(&n))
		return n > 0
	}, 20*time.Second, 20*time.Millisecond, "cancel of %s queued", id)
}

// workflowOpen reports whether the delivery's latest run is still running
// (false when it has none: its first attempt succeeded in the sender).
func (h *harness) workflowOpen(id string) bool {
	h.t.Helper()
	resp, err := h.client.DescribeWorkflowExecution(context.Background(), id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return false
	}
	require.NoError(h.t, err)
	return resp.WorkflowExecutionInfo.Status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// TestDisableKeepsDeadLetters: disabling an endpoint leaves its dead letters
// dead-lettered with their reason; they replay once it is enabled again.
func TestDisableKeepsDeadLetters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	var healthy atomic.Bool
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	})
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s"}})
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	dead := h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusDeadLettered)
	require.NotNil(t, dead.DeadLetterReason)

	h.patchEndpoint(appID, ep.ID, map[string]any{"disabled": true})
	// The disable queues no cancel for a dead letter (a cancel would go
	// through the outbox), so nothing can change it.
	var queued int
	require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE delivery_id = $1`, dlv).Scan(&queued))
	require.Zero(t, queued)
	after := h.waitDelivery(appID, dlv, time.Second, delivery.StatusDeadLettered)
	require.Equal(t, *dead.DeadLetterReason, *after.DeadLetterReason)
	require.True(t, h.workflowOpen(dlv), "the dead letter stays parked, replayable")
	code, _ := h.replayRange(appID, ep.ID)
	require.Equal(t, http.StatusConflict, code, "no replay into a disabled endpoint")
	require.Equal(t, http.StatusConflict, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlv+"/replay", nil, nil))

	healthy.Store(true)
	h.patchEndpoint(appID, ep.ID, map[string]any{"disabled": false})
	code, out := h.replayRange(appID, ep.ID)
	require.Equal(t, http.StatusAccepted, code)
	require.EqualValues(t, 1, out["replayed"])
	d := h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
	require.Equal(t, 2, d.Cycle)
	require.Nil(t, d.DeadLetterReason)
}

// TestCancelGoesThroughTheOutbox: a disable while the worker process is
// down is kept in the outbox and ends the delivery canceled once it is back;
// the API process sends no signal.
func TestCancelGoesThroughTheOutbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "1h"}})
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	require.Eventually(t, func() bool { return len(h.attempts(appID, dlv)) == 1 }, 10*time.Second, 20*time.Millisecond)

	h.stopWorker()
	h.patchEndpoint(appID, ep.ID, map[string]any{"disabled": true})
	var d store.Delivery
	h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlv, nil, &d)
	require.Equal(t, delivery.StatusCanceled, d.Status, "canceled at once in Postgres")
	require.Equal(t, store.ReasonEndpointDisabled, *d.DeadLetterReason)
	require.Nil(t, h.api.Dispatcher, "the API process runs no dispatcher")
	var kind string
	require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT kind FROM outbox WHERE delivery_id = $1`, dlv).Scan(&kind))
	require.Equal(t, "cancel", kind, "the cancel waits in the outbox")
	for _, e := range h.history(dlv).Events {
		require.NotEqual(t, enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, e.EventType, "no signal sent by the API process")
	}
	require.True(t, h.workflowOpen(dlv))

	h.startWorker()
	require.Eventually(t, func() bool { return !h.workflowOpen(dlv) }, 20*time.Second, 50*time.Millisecond)
	d = h.waitDelivery(appID, dlv, time.Second, delivery.StatusCanceled)
	require.Nil(t, d.NextAttemptAt)
	require.Len(t, h.attempts(appID, dlv), 1, "nothing more was sent")
}

// TestSuccessDuringCancelStaysSucceeded: a receiver that answers 200 only
// once the endpoint's disable reached the workflow mid-request delivered
// the event.
func TestSuccessDuringCancelStaysSucceeded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	inRequest, release := make(chan struct{}, 1), make(chan struct{})
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		inRequest <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s"}})
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	<-inRequest
	h.patchEndpoint(appID, ep.ID, map[string]any{"disabled": true})
	h.cancelQueued(dlv)
	h.waitDelivery(appID, dlv, time.Second, delivery.StatusDelivering) // the request is open
	close(release)
	require.Eventually(t, func() bool { return !h.workflowOpen(dlv) }, 20*time.Second, 50*time.Millisecond)
	d := h.waitDelivery(appID, dlv, time.Second, delivery.StatusSucceeded)
	require.Equal(t, 200, *d.LastAttempt.StatusCode)
	require.Nil(t, d.DeadLetterReason)
	require.Len(t, rc.receipts(), 1)
}

// TestDeleteAppEndsItsWorkflows: a delivery waiting for its retry and a
// parked dead letter both close within seconds of the app's delete, and
// nothing is sent after the delete returned.
func TestDeleteAppEndsItsWorkflows(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("dead") != "" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	h.createEndpoint(appID, map[string]any{"url": rc.URL(), "event_types": []string{"a.retry"}, "retry_schedule": []string{"0s", "3s", "3s"}})
	h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?dead=1", "event_types": []string{"a.dead"}, "retry_schedule": []string{"0s"}})
	retrying := h.send(appID, "a.retry", map[string]any{}).Deliveries[0].ID
	dead := h.send(appID, "a.dead", map[string]any{}).Deliveries[0].ID
	h.waitDelivery(appID, dead, 20*time.Second, delivery.StatusDeadLettered)
	require.Eventually(t, func() bool { return len(h.attempts(appID, retrying)) == 1 }, 10*time.Second, 20*time.Millisecond)

	require.Equal(t, http.StatusNoContent, h.do("DELETE", "/v1/apps/"+appID, nil, nil))
	sent := len(rc.receipts())
	start := time.Now()
	for _, id := range []string{retrying, dead} {
		require.Eventually(t, func() bool { return !h.workflowOpen(id) }, 10*time.Second, 50*time.Millisecond, id)
	}
	t.Logf("both workflows closed %s after the delete", time.Since(start).Round(time.Millisecond))
	// A closed workflow schedules no attempt, and one already running finds
	// no row and sends nothing.
	require.Equal(t, sent, len(rc.receipts()), "no attempt after the delete")
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/apps/"+appID+"/deliveries/"+retrying, nil, nil))
}

// TestStatsAreHonest: an unsubscribed event is not in the denominator, and
// a replay is counted apart without moving the first-cycle figures.
func TestStatsAreHonest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	h.createEndpoint(appID, map[string]any{"url": rc.URL(), "event_types": []string{"order.paid"}})
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	h.send(appID, "nobody.listens", map[string]any{})
	h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
	stats := func() store.Stats {
		var st store.Stats
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/stats", nil, &st))
		// The hourly bars hold the one delivery once, whatever its cycle.
		require.Len(t, st.Hourly, store.HourlyStatsHours)
		total := map[delivery.Status]int{}
		for _, hc := range st.Hourly {
			for s, n := range hc.ByStatus {
				total[s] += n
			}
		}
		require.Equal(t, map[delivery.Status]int{delivery.StatusSucceeded: 1}, total)
		st.Hourly = nil
		return st
	}
	require.Equal(t, store.Stats{Events: 1, Deliveries: 1, FirstAttemptSuccess: 1, EffectiveDeliveryRate: 1}, stats())

	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlv+"/replay", nil, nil))
	require.Eventually(t, func() bool { return len(h.attempts(appID, dlv)) == 2 }, 20*time.Second, 20*time.Millisecond)
	h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
	require.Equal(t, store.Stats{Events: 1, Deliveries: 1, FirstAttemptSuccess: 1, EffectiveDeliveryRate: 1, Replayed: 1, ReplaySuccess: 1}, stats())
}

// TestNextAttemptFromPostgres: with no worker running, the single view and
// the list still answer when the next attempt is due.
func TestNextAttemptFromPostgres(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "1h"}})
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	require.Eventually(t, func() bool { return len(h.attempts(appID, dlv)) == 1 }, 10*time.Second, 20*time.Millisecond)
	h.stopWorker()

	var d store.Delivery
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlv, nil, &d))
	require.NotNil(t, d.NextAttemptAt, "answered from Postgres")
	require.WithinDuration(t, time.Now().Add(time.Hour), *d.NextAttemptAt, 7*time.Minute, "1 h ± 10 % jitter")
	var list struct {
		Data []store.Delivery `json:"data"`
	}
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries", nil, &list))
	require.Len(t, list.Data, 1)
	require.NotNil(t, list.Data[0].NextAttemptAt)
	require.True(t, d.NextAttemptAt.Equal(*list.Data[0].NextAttemptAt))
}

// TestReplayedManyTimesStaysBounded: each replay's cycle is a new run, so
// the current run's history does not grow with the number of replays.
func TestReplayedManyTimesStaysBounded(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) })
	h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s"}})
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	const replays = 10
	var lengths []int
	for i := 0; i <= replays; i++ {
		require.Eventually(t, func() bool {
			var d store.Delivery
			h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlv, nil, &d)
			return d.Status == delivery.StatusDeadLettered && d.Cycle == i+1
		}, 20*time.Second, 20*time.Millisecond, "cycle %d", i+1)
		lengths = append(lengths, len(h.history(dlv).Events))
		if i < replays {
			require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlv+"/replay", nil, nil))
		}
	}
	t.Logf("history events of the current run after each cycle: %v", lengths)
	require.Len(t, h.attempts(appID, dlv), replays+1, "Postgres keeps every cycle's attempt")
	// One cycle's run takes 11–20 events (how the server batches its tasks
	// varies); cycles kept in one run would add about 10 each, 100 here.
	require.LessOrEqual(t, slices.Max(lengths), 40, "bounded: %v", lengths)
	var d store.Delivery
	h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlv, nil, &d)
	require.Len(t, d.Replays, replays)
}

// TestEnvironmentChangeReplacesTheSecret: test and live never share a
// secret; the new one is shown once and is the only one that signs.
func TestEnvironmentChangeReplacesTheSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "environment": "test"})
	var moved endpointResp
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"environment": "live"}, &moved))
	require.NotEmpty(t, moved.Secret)
	require.NotEqual(t, ep.Secret, moved.Secret)
	var again endpointResp
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"environment": "live", "description": "x"}, &again))
	require.Empty(t, again.Secret, "no change of environment, no new secret")

	rc.setSecrets(moved.Secret)
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
	got := rc.receipts()
	require.Len(t, got, 1)
	require.True(t, got[0].StdValid && got[0].XValid, "signed with the new secret")
	rc.setSecrets(ep.Secret)
	require.False(t, rc.recheck(0), "the old secret does not sign")
	require.Equal(t, 1, strings.Count(got[0].Header.Get("webhook-signature"), "v1,"), "one signature: every old secret was revoked")
}

// history returns the history of a workflow's run ("" for the latest).
func (h *harness) history(id string, runID ...string) *historypb.History {
	h.t.Helper()
	iter := h.client.GetWorkflowHistory(context.Background(), id, strings.Join(runID, ""), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(h.t, err)
		hist.Events = append(hist.Events, e)
	}
	return hist
}

// TestPauseHoldsEverything: 500 events accepted while the endpoint is
// paused stay pending with nothing sent; after resume all are delivered; a
// delivery waiting for its retry when the pause began sends nothing either.
func TestPauseHoldsEverything(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	var failFirst atomic.Bool
	failFirst.Store(true)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 && failFirst.Load() {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "2s", "2s"}})
	retrying := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	require.Eventually(t, func() bool { return len(rc.receipts()) == 1 }, 10*time.Second, 20*time.Millisecond)
	h.patchEndpoint(appID, ep.ID, map[string]any{"paused": true})

	const n = 500
	ids := h.burst(appID, n, func(int) string { return "order.paid" })
	// The retry due 2 s after the first attempt comes, finds the endpoint
	// paused and moves to the next recheck: nothing may go out.
	first := h.attempts(appID, retrying)[0].StartedAt
	require.Eventually(t, func() bool {
		var d store.Delivery
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries/"+retrying, nil, &d))
		return d.NextAttemptAt != nil && d.NextAttemptAt.After(first.Add(10*time.Second))
	}, 20*time.Second, 50*time.Millisecond, "the due retry found the endpoint paused")
	require.Len(t, rc.receipts(), 1, "nothing sent while paused")
	var pending int
	require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE status = 'pending'`).Scan(&pending))
	require.Equal(t, n, pending)

	h.patchEndpoint(appID, ep.ID, map[string]any{"paused": false})
	for _, id := range append(ids, retrying) {
		h.waitDelivery(appID, id, time.Minute, delivery.StatusSucceeded)
	}
	require.GreaterOrEqual(t, len(rc.receipts()), n+2)
}

// TestRateLimitAcrossWorkers: 2,000 replays to an endpoint limited to
// 50/s, carried by two worker processes, leave at no more than 50/s on
// average, at most 52 in any one-second window, and none is lost. The
// windows are read from the attempts' recorded start times, the moment
// each request left, and have two tokens of slack for a worker woken a
// little after its slot. Arrival times at the receiver, which shares this
// loaded process, add its own scheduling delays (one pause of the process
// stamps the requests that came during it together: 53 in a window was
// seen once in CI); they are logged, not checked.
func TestRateLimitAcrossWorkers(t *testing.T) {
	h := newHarness(t)
	second, err := app.Start(context.Background(), h.cfg, h.logger.With("process", "worker-2"), app.RoleWorker, h.opts)
	require.NoError(t, err)
	t.Cleanup(second.Close)
	appID := h.createApp()
	var healthy atomic.Bool
	var mu sync.Mutex
	var arrivals []time.Time
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
	})
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s"}})
	const n, rate = 2000, 50
	h.burst(appID, n, func(int) string { return "order.paid" })
	var dead int
	require.Eventually(t, func() bool {
		require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE status = 'dead_lettered'`).Scan(&dead))
		return dead == n
	}, 6*time.Minute, 100*time.Millisecond) // 2,000 workflows: a loaded 2-core machine needs minutes

	h.patchEndpoint(appID, ep.ID, map[string]any{"rate_limit": rate})
	healthy.Store(true)
	code, out := h.replayRange(appID, ep.ID)
	require.Equal(t, http.StatusAccepted, code)
	require.EqualValues(t, n, out["replayed"])
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrivals) >= n
	}, 6*time.Minute, 200*time.Millisecond)
	var succeeded int
	require.Eventually(t, func() bool {
		require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE status = 'succeeded'`).Scan(&succeeded))
		return succeeded == n
	}, time.Minute, 100*time.Millisecond, "none lost")
	mu.Lock()
	arrived := append([]time.Time(nil), arrivals...)
	mu.Unlock()
	rows, err := h.store.Pool().Query(context.Background(), `
		SELECT a.started_at FROM attempts a JOIN deliveries d ON d.id = a.delivery_id
		WHERE d.endpoint_id = $1 AND a.cycle = 2 ORDER BY a.started_at`, ep.ID)
	require.NoError(t, err)
	times, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(t, err)
	require.Len(t, times, n, "one request per replay")
	most := mostInASecond(times)
	took := times[len(times)-1].Sub(times[0])
	t.Logf("%d replays at a limit of %d/s over two workers: at most %d left in any 1 s window (%d arrived); %s from first to last (%.1f/s)",
		len(times), rate, most, mostInASecond(arrived), took.Round(time.Millisecond), float64(len(times))/took.Seconds())
	require.LessOrEqual(t, most, rate+2)
	require.GreaterOrEqual(t, took, time.Duration(float64(len(times)-1-rate)/rate*float64(time.Second)), "no faster than the limit on average")
}

// TestMaxInFlightBoundsConcurrency: an endpoint with max_in_flight 2 never
// sees more than two requests at once, and every one of 20 events is still
// delivered. The receiver holds the first requests until two are in flight,
// so the burst meets the bound full, then answers at once.
func TestMaxInFlightBoundsConcurrency(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	var now, most atomic.Int32
	saturated := make(chan struct{})
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, _ *http.Request) {
		cur := now.Add(1)
		defer now.Add(-1)
		for {
			m := most.Load()
			if cur <= m || most.CompareAndSwap(m, cur) {
				break
			}
		}
		<-saturated
	})
	h.createEndpoint(appID, map[string]any{"url": rc.URL(), "max_in_flight": 2})
	const n = 20
	ids := h.burst(appID, n, func(int) string { return "order.paid" })
	require.Eventually(t, func() bool { return now.Load() == 2 }, time.Minute, 5*time.Millisecond, "two requests held")
	close(saturated)
	for _, id := range ids {
		h.waitDelivery(appID, id, time.Minute, delivery.StatusSucceeded)
	}
	var attempts int
	require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM attempts`).Scan(&attempts))
	t.Logf("%d events, max_in_flight 2: at most %d requests at once; %d receipts, %d attempts recorded",
		n, most.Load(), len(rc.receipts()), attempts)
	require.LessOrEqual(t, most.Load(), int32(2))
	require.Equal(t, int32(2), most.Load(), "the bound is used, not undercut")
	require.Equal(t, n, attempts, "a busy endpoint costs no attempt")
}

// mostInASecond is the most of times in any one-second window.
func mostInASecond(times []time.Time) int {
	times = slices.Clone(times)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i, j := 0, 0; j < len(times); j++ {
		for times[j].Sub(times[i]) >= time.Second {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}
