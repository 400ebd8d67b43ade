package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"hookrelay/config"
	"hookrelay/delivery"
	"hookrelay/store"
	"hookrelay/workflows"
)

// keepHistory replays the history of a run with today's workflow code and,
// when HOOKRELAY_RECORD_HISTORIES names a directory (workflows/testdata),
// saves it there as name.json unless that file exists: a recorded history
// is never overwritten, so a change of the command sequence that breaks it
// fails workflows.TestReplayRecordedHistories.
func (h *harness) keepHistory(name, id, runID string) {
	h.t.Helper()
	hist := h.history(id, runID)
	replayer := sdkworker.NewWorkflowReplayer()
	replayer.RegisterWorkflow(workflows.DeliveryWorkflow)
	replayer.RegisterWorkflow(workflows.CarrierWorkflow)
	replayer.RegisterWorkflow(workflows.SequencerWorkflow)
	require.NoError(h.t, replayer.ReplayWorkflowHistory(nil, hist), "%s: %d events", name, len(hist.Events))
	dir := os.Getenv("HOOKRELAY_RECORD_HISTORIES")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, name+".json")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		h.t.Logf("%s exists; not overwritten", path)
		return
	}
	raw, err := protojson.Marshal(hist)
	require.NoError(h.t, err)
	require.NoError(h.t, os.WriteFile(path, raw, 0o644))
	h.t.Logf("recorded %s (%d events)", path, len(hist.Events))
}

// requireDelayedHandOff checks that delivery id's run started with a
// first-task delay and waited on no timer: the retry of its sender's failed
// first attempt was due when the run began.
func (h *harness) requireDelayedHandOff(id string) {
	h.t.Helper()
	hist := h.history(id)
	start := hist.Events[0].GetWorkflowExecutionStartedEventAttributes()
	require.NotNil(h.t, start, "a started event")
	require.Positive(h.t, start.GetFirstWorkflowTaskBackoff().AsDuration(), "the retry's wait is the run's start delay")
	for _, e := range hist.Events {
		require.NotEqual(h.t, enums.EVENT_TYPE_TIMER_STARTED, e.GetEventType(), "no timer: the run began when the retry was due")
		if m := e.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "Version" {
			for _, p := range m.GetDetails()["change-id"].GetPayloads() {
				require.NotContains(h.t, string(p.GetData()), "send-async", "a new run makes every attempt a regular activity without asking")
			}
		}
		if u := e.GetUpsertWorkflowSearchAttributesEventAttributes(); u != nil {
			state := u.GetSearchAttributes().GetIndexedFields()[workflows.SAState.GetName()]
			require.NotEqual(h.t, `"delivering"`, string(state.GetData()), "the start set HookrelayState delivering; the run does not say it again")
		}
	}
}

// runID is the ID of the delivery's latest run.
func (h *harness) runID(id string) string {
	h.t.Helper()
	resp, err := h.client.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(h.t, err)
	return resp.WorkflowExecutionInfo.Execution.RunId
}

// TestHistoriesOfEveryPath drives a delivery down every path of the state
// machine on the real server and replays each run's history with today's
// code (recording it when asked; see keepHistory).
func TestHistoriesOfEveryPath(t *testing.T) {
	h := newHarness(t, inMode(config.FirstAttemptsSender))
	appID := h.createApp()
	// The query string picks the behaviour: ?code=N answers N; ?flaky=1
	// answers 502 then 200; ?throttle=1 answers 429 (Retry-After: 1), then
	// 200; ?slow=1 answers 200 once released (after its endpoint's disable
	// reached the workflow).
	var mu sync.Mutex
	seen := map[string]int{}
	release := make(chan struct{})
	count := func(query string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[query]
	}
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		seen[r.URL.RawQuery]++
		n := seen[r.URL.RawQuery]
		mu.Unlock()
		switch {
		case q.Get("busy") != "" && n == 2:
			// The request that holds the endpoint's one request in flight.
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		case q.Get("flaky") != "" && n == 1:
			w.WriteHeader(http.StatusBadGateway)
		case q.Get("throttle") != "" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case q.Get("slow") != "":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case q.Get("code") == "404":
			w.WriteHeader(http.StatusNotFound)
		case q.Get("code") == "503":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	// Each path has its own event type and endpoint.
	endpoint := func(typ, query string, schedule ...string) string {
		return h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?" + query, "event_types": []string{typ},
			"retry_schedule": schedule}).ID
	}
	send := func(typ string) string {
		return h.send(appID, typ, map[string]any{}).Deliveries[0].ID
	}
	wait := func(id string, want delivery.Status) {
		h.waitDelivery(appID, id, 20*time.Second, want)
		require.Eventually(t, func() bool { return !h.workflowOpen(id) || want == delivery.StatusDeadLettered }, 20*time.Second, 50*time.Millisecond)
	}

	endpoint("p.retry", "flaky=1", "0s", "1s")
	retried := send("p.retry")
	wait(retried, delivery.StatusSucceeded)
	h.keepHistory("v4-retry-then-success", retried, "")
	// v7: SendSigned's StartToClose covers a wait for the endpoint's share
	// (attempt.ShareWaitMax); the commands are those of v4, whose recorded
	// histories (the old timeout) replay with today's code.
	h.keepHistory("v7-retry-then-success", retried, "")
	// v8: the sender's failed first attempt is handed off with its retry's
	// planned time as the run's start delay: no timer, and attempt 2 not
	// before that time (the schedule's 1 s, less its 10 % jitter).
	h.keepHistory("v8-retry-then-success", retried, "")
	// v9: no send-async marker (a new run carries LocalActivity false), and
	// the delayed run keeps the HookrelayState its start set (planned-retry
	// version 2): two upserts fewer, each a visibility write. v10: the same
	// commands, each SendSigned input naming its endpoint (EndpointID), so
	// the attempt claims with its target.
	h.keepHistory("v10-retry-then-success", retried, "")
	h.requireDelayedHandOff(retried)
	tries := h.attempts(appID, retried)
	require.Len(t, tries, 2)
	slices.SortFunc(tries, func(a, b store.Attempt) int { return a.Number - b.Number })
	failedAt := tries[0].StartedAt.Add(time.Duration(tries[0].DurationMS) * time.Millisecond)
	require.GreaterOrEqual(t, tries[1].StartedAt.Sub(failedAt), 900*time.Millisecond-time.Millisecond)

	endpoint("p.throttle", "throttle=1", "0s", "1h")
	throttled := send("p.throttle")
	wait(throttled, delivery.StatusSucceeded)
	h.keepHistory("v4-throttled-then-success", throttled, "")
	h.keepHistory("v7-throttled-then-success", throttled, "")
	h.keepHistory("v8-throttled-then-success", throttled, "")
	h.keepHistory("v10-throttled-then-success", throttled, "")
	h.requireDelayedHandOff(throttled)

	deadEp := endpoint("p.dead", "code=404", "0s")
	dead := send("p.dead")
	wait(dead, delivery.StatusDeadLettered)
	first := h.runID(dead)
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dead+"/replay", nil, nil))
	require.Eventually(t, func() bool { return h.runID(dead) != first && len(h.attempts(appID, dead)) == 2 }, 20*time.Second, 50*time.Millisecond)
	h.waitDelivery(appID, dead, 20*time.Second, delivery.StatusDeadLettered)
	h.keepHistory("v4-dead-letter-then-replay", dead, first)
	h.keepHistory("v10-dead-letter-then-replay", dead, first)

	// The replayed cycle's run, ended by a cancel while it is parked: the
	// endpoint is deleted.
	require.Equal(t, http.StatusNoContent, h.do("DELETE", "/v1/apps/"+appID+"/endpoints/"+deadEp, nil, nil))
	require.Eventually(t, func() bool { return !h.workflowOpen(dead) }, 20*time.Second, 50*time.Millisecond)
	h.keepHistory("v4-replayed-cycle-canceled-while-parked", dead, "")
	h.keepHistory("v10-replayed-cycle-canceled-while-parked", dead, "")

	waitingEp := endpoint("p.wait", "code=503", "0s", "1h")
	waiting := send("p.wait")
	require.Eventually(t, func() bool { return len(h.attempts(appID, waiting)) == 1 }, 20*time.Second, 50*time.Millisecond)
	h.patchEndpoint(appID, waitingEp, map[string]any{"disabled": true})
	wait(waiting, delivery.StatusCanceled)
	h.keepHistory("v4-canceled-while-waiting", waiting, "")
	h.keepHistory("v10-canceled-while-waiting", waiting, "")

	// v8: a disable while the run of a failed first attempt waits out its
	// start delay (the retry's 5 s). The signal reaches the run when the
	// delay ends; the disable itself marked the delivery canceled, and no
	// second request goes out.
	delayedEp := endpoint("p.delayed", "code=503&delayed=1", "0s", "5s")
	delayed := send("p.delayed")
	require.Eventually(t, func() bool { return len(h.attempts(appID, delayed)) == 1 && h.workflowOpen(delayed) }, 20*time.Second, 50*time.Millisecond)
	h.requireDelayedHandOff(delayed)
	h.patchEndpoint(appID, delayedEp, map[string]any{"disabled": true})
	wait(delayed, delivery.StatusCanceled)
	require.Len(t, h.attempts(appID, delayed), 1)
	require.Equal(t, 1, count("code=503&delayed=1"))
	h.keepHistory("v8-canceled-during-start-delay", delayed, "")

	// The first attempt (the sender's) fails; the second, the workflow's,
	// is on the wire when the disable comes, and its 2xx wins.
	slowEp := endpoint("p.slow", "flaky=slow&slow=1", "0s", "0s")
	slow := send("p.slow")
	require.Eventually(t, func() bool { return count("flaky=slow&slow=1") == 2 }, 20*time.Second, 20*time.Millisecond)
	h.patchEndpoint(appID, slowEp, map[string]any{"disabled": true})
	h.cancelDispatched(slow)
	close(release)
	wait(slow, delivery.StatusSucceeded)
	h.keepHistory("v4-success-during-cancel", slow, "")
	h.keepHistory("v10-success-during-cancel", slow, "")

	// Retention: a run of the same delivery under another workflow ID with
	// a 2 s retention parks its dead letter, then completes.
	other := h.createApp()
	ep := h.createEndpoint(other, map[string]any{"url": rc.URL() + "?code=404", "retry_schedule": []string{"0s"}})
	expiring := h.send(other, "p.retention", map[string]any{}).Deliveries[0].ID
	h.waitDelivery(other, expiring, 20*time.Second, delivery.StatusDeadLettered)
	run, err := h.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "retention-" + expiring, TaskQueue: h.queue},
		workflows.WorkflowName, workflows.Input{DeliveryID: expiring, AppID: other, EndpointID: ep.ID, Cycle: 1, LocalActivity: true,
			Settings: delivery.Settings{Schedule: []time.Duration{0}, Retention: 2 * time.Second}})
	require.NoError(t, err)
	var st workflows.State
	require.NoError(t, run.Get(context.Background(), &st))
	require.Equal(t, delivery.StatusDeadLettered, st.Status)
	h.keepHistory("v4-retention-expiry", run.GetID(), "")

	// A carrier: two new deliveries found in one round (queued while the
	// worker process is down); the first request fails and is handed off.
	endpoint("p.carried", "flaky=carrier", "0s", "1s")
	h.stopWorker()
	burst := []string{send("p.carried"), send("p.carried")}
	h.cfg.FirstAttempts = config.FirstAttemptsCarrier
	h.startWorker()
	h.cfg.FirstAttempts = config.FirstAttemptsSender
	for _, id := range burst {
		h.waitDelivery(appID, id, 20*time.Second, delivery.StatusSucceeded)
	}
	var carrierID string
	require.Eventually(t, func() bool {
		found := h.list(fmt.Sprintf("HookrelayDeliveries = '%s'", burst[0]))
		if len(found) == 1 {
			carrierID = found[0].Execution.WorkflowId
		}
		return carrierID != ""
	}, 10*time.Second, 100*time.Millisecond, "the burst went through a carrier")
	require.Eventually(t, func() bool { return !h.workflowOpen(carrierID) }, 10*time.Second, 50*time.Millisecond)
	h.keepHistory("v4-carrier-groups-with-hand-off", carrierID, "")
	h.keepHistory("v14-carrier-window-with-hand-off", carrierID, "")
	handedOff := 0
	for _, id := range burst {
		if _, err := h.client.DescribeWorkflowExecution(context.Background(), id, ""); err == nil {
			require.Eventually(t, func() bool { return !h.workflowOpen(id) }, 10*time.Second, 50*time.Millisecond)
			h.keepHistory("v4-handed-off-then-success", id, "")
			handedOff++
		}
	}
	require.Equal(t, 1, handedOff, "the flaky receiver failed exactly one first attempt")

	// Held attempts: the endpoint takes one request a second, so of three
	// deliveries sent at once, those whose slot was too far off were handed
	// off to wait for it (a carried rate-limited result), and the first,
	// whose first attempt fails, waits for a slot for its retry in its
	// workflow. None of those waits is an attempt.
	h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?flaky=limited", "event_types": []string{"p.limited"},
		"retry_schedule": []string{"0s", "0s"}, "rate_limit": 1})
	limited := []string{send("p.limited"), send("p.limited"), send("p.limited")}
	held := 0
	for _, id := range limited {
		h.waitDelivery(appID, id, 20*time.Second, delivery.StatusSucceeded)
		if _, err := h.client.DescribeWorkflowExecution(context.Background(), id, ""); err == nil {
			require.Eventually(t, func() bool { return !h.workflowOpen(id) }, 10*time.Second, 50*time.Millisecond)
			held++
			h.keepHistory(fmt.Sprintf("v5-rate-limited-%d", held), id, "")
		}
	}
	require.GreaterOrEqual(t, held, 2, "the flaky first delivery and at least one rate-limited one ran in a workflow")
	require.Equal(t, 4, count("flaky=limited"), "three deliveries, one retry: held attempts sent nothing")

	// A busy endpoint (v11): max_in_flight 1, and the retry of the first
	// delivery comes while the second's request holds it; the retry finds
	// it busy, sends nothing and is made again (an endpoint's breaker
	// holding an attempt returns the same result, with HeldUntil, and its
	// run waits on the same timer, longer).
	h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?flaky=busy&busy=1", "event_types": []string{"p.busy"},
		"retry_schedule": []string{"0s", "1s"}, "max_in_flight": 1})
	busy := send("p.busy")
	require.Eventually(t, func() bool { return count("flaky=busy&busy=1") == 1 }, 10*time.Second, 10*time.Millisecond)
	holder := send("p.busy")
	for _, id := range []string{busy, holder} {
		h.waitDelivery(appID, id, 20*time.Second, delivery.StatusSucceeded)
	}
	require.Eventually(t, func() bool { return !h.workflowOpen(busy) }, 10*time.Second, 50*time.Millisecond)
	sends := 0
	for _, e := range h.history(busy).Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "SendSigned" {
			sends++
		}
	}
	require.Greater(t, sends, 1, "the retry never found the endpoint busy")
	require.Len(t, h.attempts(appID, busy), 2, "a busy recheck was recorded as an attempt")
	h.keepHistory("v11-busy-then-success", busy, "")

	// The app is deleted while a retry waits: the run ends, nothing sent.
	endpoint("p.deleted", "code=503&n=2", "0s", "2s", "2s")
	deleted := send("p.deleted")
	require.Eventually(t, func() bool { return len(h.attempts(appID, deleted)) == 1 }, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, http.StatusNoContent, h.do("DELETE", "/v1/apps/"+appID, nil, nil))
	require.Eventually(t, func() bool { return !h.workflowOpen(deleted) }, 20*time.Second, 50*time.Millisecond)
	h.keepHistory("v4-app-deleted", deleted, "")
}
