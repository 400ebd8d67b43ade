package integration

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/store"
	"hookrelay/workflows"
)

// orderedData is the data of the test's ordered events.
type orderedData struct {
	Key string `json:"key"`
	I   int    `json:"i"`
}

// orderedReceipt is one request of an ordered test's receiver.
type orderedReceipt struct {
	orderedData
	Sequence string
	Status   int
}

// orderedReceiver answers 500 to the first fails[key/i] requests of an
// event and 200 to the rest, and records every request in arrival order.
type orderedReceiver struct {
	rc    *probe
	mu    sync.Mutex
	fails map[orderedData]int
	got   []orderedReceipt
}

func (o *orderedReceiver) respond(n int, w http.ResponseWriter, r *http.Request) {
	var env struct{ Data orderedData }
	// The probe read the body: its receipt's copy is decoded.
	_ = json.Unmarshal(o.rc.receipts()[n-1].Body, &env)
	o.mu.Lock()
	defer o.mu.Unlock()
	status := http.StatusOK
	if o.fails[env.Data] > 0 {
		o.fails[env.Data]--
		status = http.StatusInternalServerError
	}
	o.got = append(o.got, orderedReceipt{orderedData: env.Data, Sequence: r.Header.Get(delivery.HeaderSequence), Status: status})
	w.WriteHeader(status)
}

// orderedSetup is a harness, an app and an orderedReceiver that fails the
// requests fails counts.
func orderedSetup(t *testing.T, fails map[orderedData]int) (*harness, *orderedReceiver, string) {
	t.Helper()
	h := newHarness(t)
	o := &orderedReceiver{fails: fails}
	o.rc = newReceiver(t, o.respond)
	return h, o, h.createApp()
}

// order is key's event numbers and webhook-sequence headers in arrival
// order.
func (o *orderedReceiver) order(key string) (is []int, seqs []string) {
	for _, r := range o.receipts(key) {
		is, seqs = append(is, r.I), append(seqs, r.Sequence)
	}
	return is, seqs
}

func (o *orderedReceiver) receipts(key string) []orderedReceipt {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []orderedReceipt
	for _, g := range o.got {
		if g.Key == key {
			out = append(out, g)
		}
	}
	return out
}

// sendKeyed publishes an event with an ordering key.
func (h *harness) sendKeyed(appID, key string, i int) eventResp {
	h.t.Helper()
	var ev eventResp
	body := map[string]any{"type": "ledger.entry", "data": orderedData{Key: key, I: i}, "ordering_key": key}
	require.Equal(h.t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/events", body, &ev))
	require.Len(h.t, ev.Deliveries, 1)
	return ev
}

// TestFIFODeliversOneKeyInAcceptanceOrder: five events of one key reach a
// receiver that fails the first event twice in acceptance order, each only
// after the one before succeeded, numbered 1..5 (the same on every retry);
// a second key is not held by the first.
func TestFIFODeliversOneKeyInAcceptanceOrder(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "cust-1", I: 1}: 2})
	// Retries far enough apart that the second key's two deliveries surely
	// end between them.
	ep := h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "4s", "4s"}})
	var got map[string]any
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/endpoints/"+ep.ID, nil, &got))
	require.Equal(t, "fifo", got["ordering"])

	var dlvs []string
	for i := 1; i <= 5; i++ {
		dlvs = append(dlvs, h.sendKeyed(appID, "cust-1", i).Deliveries[0].ID)
	}
	other := []string{h.sendKeyed(appID, "cust-2", 1).Deliveries[0].ID, h.sendKeyed(appID, "cust-2", 2).Deliveries[0].ID}
	for _, id := range append(dlvs, other...) {
		h.waitDelivery(appID, id, 60*time.Second, delivery.StatusSucceeded)
	}

	one := o.receipts("cust-1")
	order, seqs := o.order("cust-1")
	require.Equal(t, []int{1, 1, 1, 2, 3, 4, 5}, order, "acceptance order, each after the one before succeeded")
	require.Equal(t, []string{"1", "1", "1", "2", "3", "4", "5"}, seqs, "webhook-sequence, the same on every retry")
	require.Equal(t, http.StatusOK, one[2].Status)

	two := o.receipts("cust-2")
	require.Len(t, two, 2)
	require.Equal(t, "1", two[0].Sequence)
	require.Equal(t, "2", two[1].Sequence)
	// cust-2 did not wait for cust-1's first event, which took two retries.
	o.mu.Lock()
	firstOK := -1
	lastTwo := -1
	for i, g := range o.got {
		if g.Key == "cust-1" && g.I == 1 && g.Status == http.StatusOK {
			firstOK = i
		}
		if g.Key == "cust-2" {
			lastTwo = i
		}
	}
	o.mu.Unlock()
	require.Less(t, lastTwo, firstOK, "a second key is not held by the first")
}

// TestFIFOReplayWaitsForTheSequence: a replay of an ordered delivery asked
// while a later one retries in its own workflow is sent only after that one
// succeeded, with its original webhook-sequence, and before a newer
// delivery accepted after the replay was asked.
func TestFIFOReplayWaitsForTheSequence(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "k", I: 2}: 2})
	h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "3s", "3s"}})
	first := h.sendKeyed(appID, "k", 1).Deliveries[0].ID
	h.waitDelivery(appID, first, 30*time.Second, delivery.StatusSucceeded)
	second := h.sendKeyed(appID, "k", 2).Deliveries[0].ID
	// Delivery 2 failed once and retries in its own workflow: replay 1.
	require.Eventually(t, func() bool { return len(o.receipts("k")) == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+first+"/replay", nil, nil))
	third := h.sendKeyed(appID, "k", 3).Deliveries[0].ID
	for _, id := range []string{first, second, third} {
		h.waitDelivery(appID, id, 60*time.Second, delivery.StatusSucceeded)
	}
	require.Eventually(t, func() bool { return len(o.receipts("k")) == 6 }, 30*time.Second, 20*time.Millisecond)
	order, seqs := o.order("k")
	require.Equal(t, []int{1, 2, 2, 2, 1, 3}, order, "the replay waits for the delivery ahead, and goes before a newer one")
	require.Equal(t, []string{"1", "2", "2", "2", "1", "3"}, seqs)
}

// TestFIFODisableCancelsTheWholeSequence: disabling a fifo endpoint while
// its head waits for a retry cancels the head and the deliveries behind it,
// which are never sent.
func TestFIFODisableCancelsTheWholeSequence(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "k", I: 1}: 100})
	ep := h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "1h"}, "deadline": "2h"})
	var dlvs, evs []string
	for i := 1; i <= 3; i++ {
		ev := h.sendKeyed(appID, "k", i)
		dlvs, evs = append(dlvs, ev.Deliveries[0].ID), append(evs, ev.ID)
	}
	require.Eventually(t, func() bool { return len(o.receipts("k")) == 1 }, 30*time.Second, 50*time.Millisecond)
	// The deliveries behind the head say whom they wait for.
	for i, id := range dlvs {
		var d store.Delivery
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries/"+id, nil, &d))
		require.NotNil(t, d.Sequence)
		require.Equal(t, int64(i+1), *d.Sequence)
		if i == 0 {
			require.Nil(t, d.WaitingFor)
			continue
		}
		require.Equal(t, delivery.StatusPending, d.Status)
		require.NotNil(t, d.WaitingFor)
		require.Equal(t, dlvs[i-1], *d.WaitingFor)
		require.Zero(t, d.AttemptCount)
	}
	var ev map[string]any
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/events/"+evs[0], nil, &ev))
	require.Equal(t, "k", ev["ordering_key"])
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"disabled": true}, nil))
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 30*time.Second, delivery.StatusCanceled)
	}
	// Nothing behind the head was sent, and the sequencer ended with its
	// sequence empty.
	require.Eventually(t, func() bool {
		d, err := h.client.DescribeWorkflowExecution(t.Context(), "sequencer/"+ep.ID+"/k", "")
		return err == nil && d.WorkflowExecutionInfo.GetCloseTime() != nil
	}, 30*time.Second, 100*time.Millisecond)
	got := o.receipts("k")
	require.Len(t, got, 1)
	require.Equal(t, 1, got[0].I)

	// Enabled again, a canceled delivery that never went out is replayed
	// at once (its start row, still leased to the sequencer, is stale) and
	// sent with its number.
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"disabled": false}, nil))
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlvs[1]+"/replay", nil, nil))
	h.waitDelivery(appID, dlvs[1], 30*time.Second, delivery.StatusSucceeded)
	order, seqs := o.order("k")
	require.Equal(t, []int{1, 2}, order)
	require.Equal(t, []string{"1", "2"}, seqs)
}

// TestFIFOSurvivesAWorkerRestart: a worker process (worker and dispatcher)
// stopped mid-sequence and started again loses no delivery and breaks no
// order: the sequence's state lives in Temporal and the outbox.
func TestFIFOSurvivesAWorkerRestart(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "k", I: 2}: 1})
	h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "2s", "1s"}})
	var dlvs []string
	for i := 1; i <= 3; i++ {
		dlvs = append(dlvs, h.sendKeyed(appID, "k", i).Deliveries[0].ID)
	}
	// Event 2 failed once and waits 2 s for its retry: stop everything.
	require.Eventually(t, func() bool { return len(o.receipts("k")) == 2 }, 30*time.Second, 20*time.Millisecond)
	h.stopWorker()
	for i := 4; i <= 5; i++ {
		dlvs = append(dlvs, h.sendKeyed(appID, "k", i).Deliveries[0].ID)
	}
	h.startWorker()
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 60*time.Second, delivery.StatusSucceeded)
	}
	order, seqs := o.order("k")
	require.Equal(t, []int{1, 2, 2, 3, 4, 5}, order)
	require.Equal(t, []string{"1", "2", "2", "3", "4", "5"}, seqs)
}

// TestFIFOBlockHoldsUntilRelease: with fifo_on_dead_letter block, the
// deliveries behind a dead letter wait (and say so) until it is released;
// with skip (TestFIFODeliversOneKeyInAcceptanceOrder's endpoint) they
// would have gone on.
func TestFIFOBlockHoldsUntilRelease(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "k", I: 1}: 100})
	ep := h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "fifo_on_dead_letter": "block", "retry_schedule": []string{"0s"}})
	var got map[string]any
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/endpoints/"+ep.ID, nil, &got))
	require.Equal(t, "block", got["fifo_on_dead_letter"])
	var dlvs []string
	for i := 1; i <= 3; i++ {
		dlvs = append(dlvs, h.sendKeyed(appID, "k", i).Deliveries[0].ID)
	}
	h.waitDelivery(appID, dlvs[0], 30*time.Second, delivery.StatusDeadLettered)
	// Still blocked a while later: nothing behind the dead letter moved.
	require.Never(t, func() bool { return len(o.receipts("k")) > 1 }, 2*time.Second, 100*time.Millisecond)
	var d store.Delivery
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlvs[1], nil, &d))
	require.Equal(t, delivery.StatusPending, d.Status)
	require.NotNil(t, d.WaitingFor)
	require.Equal(t, dlvs[0], *d.WaitingFor, "the blocking dead letter")

	// Only a blocking dead letter can be released, once.
	require.Equal(t, http.StatusConflict, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlvs[1]+"/release", nil, nil))
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlvs[0]+"/release", nil, nil))
	require.Equal(t, http.StatusConflict, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlvs[0]+"/release", nil, nil))
	for _, id := range dlvs[1:] {
		h.waitDelivery(appID, id, 30*time.Second, delivery.StatusSucceeded)
	}
	order, _ := o.order("k")
	require.Equal(t, []int{1, 2, 3}, order)
	require.Equal(t, delivery.StatusDeadLettered, h.waitDelivery(appID, dlvs[0], time.Second, delivery.StatusDeadLettered).Status, "released, still a dead letter")

	// The audit log names the release.
	var audit struct{ Data []map[string]any }
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/audit-log", nil, &audit))
	found := false
	for _, a := range audit.Data {
		if a["route"] == "/v1/apps/:app/deliveries/:dlv/release" {
			found = true
		}
	}
	require.True(t, found, "release audited")
}

// TestFIFOBlockReplayUnblocksAtOnce: in block mode the blocking dead
// letter's own replay is what unblocks the sequence (contract section 14):
// it is sent as soon as it is asked, and the deliveries behind it go once it
// succeeded, not after the sequencer's minute-long check.
func TestFIFOBlockReplayUnblocksAtOnce(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "k", I: 1}: 1})
	h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "fifo_on_dead_letter": "block", "retry_schedule": []string{"0s"}})
	var dlvs []string
	for i := 1; i <= 3; i++ {
		dlvs = append(dlvs, h.sendKeyed(appID, "k", i).Deliveries[0].ID)
	}
	h.waitDelivery(appID, dlvs[0], 30*time.Second, delivery.StatusDeadLettered)
	// The sequencer settles on the blocking dead letter: nothing behind it
	// goes.
	require.Never(t, func() bool { return len(o.receipts("k")) > 1 }, 2*time.Second, 100*time.Millisecond)
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlvs[0]+"/replay", nil, nil))
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 15*time.Second, delivery.StatusSucceeded)
	}
	order, _ := o.order("k")
	require.Equal(t, []int{1, 1, 2, 3}, order)
}

// TestFIFOReleasedDeadLettersReplayHoldsNothing: "A released dead letter
// stays a dead letter, replayable; its replay no longer holds anything"
// (contract section 14). Its replay dead-letters again: the deliveries
// accepted after it are not blocked by it. Its waits are 60 s: at 15 s it
// failed in two clean-clone CI runs on a slow machine (the replay's
// request, then the third delivery, not there yet), and passed 34 of 34
// runs alone; the cause is not known yet.
func TestFIFOReleasedDeadLettersReplayHoldsNothing(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "k", I: 1}: 100})
	h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "fifo_on_dead_letter": "block", "retry_schedule": []string{"0s"}})
	first := h.sendKeyed(appID, "k", 1).Deliveries[0].ID
	h.waitDelivery(appID, first, 30*time.Second, delivery.StatusDeadLettered)
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+first+"/release", nil, nil))
	second := h.sendKeyed(appID, "k", 2).Deliveries[0].ID
	h.waitDelivery(appID, second, 60*time.Second, delivery.StatusSucceeded)
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+first+"/replay", nil, nil))
	require.Eventually(t, func() bool { return len(o.receipts("k")) == 3 }, 60*time.Second, 20*time.Millisecond)
	h.waitDelivery(appID, first, 60*time.Second, delivery.StatusDeadLettered)
	third := h.sendKeyed(appID, "k", 3).Deliveries[0].ID
	h.waitDelivery(appID, third, 60*time.Second, delivery.StatusSucceeded)
}

// TestFIFOUnderARateLimit: a fifo endpoint's rate limit holds its heads
// (each goes to its own workflow, which waits for its slot), and the
// sequence still arrives whole and in order.
func TestFIFOUnderARateLimit(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{})
	h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "rate_limit": 2, "retry_schedule": []string{"0s", "1s"}})
	var dlvs []string
	for i := 1; i <= 6; i++ {
		dlvs = append(dlvs, h.sendKeyed(appID, "k", i).Deliveries[0].ID)
	}
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 60*time.Second, delivery.StatusSucceeded)
	}
	order, seqs := o.order("k")
	require.Equal(t, []int{1, 2, 3, 4, 5, 6}, order, "each once, in acceptance order")
	require.Equal(t, []string{"1", "2", "3", "4", "5", "6"}, seqs)
}

// TestFIFOResumeSendsTheSequenceOn: a fifo endpoint paused while its
// sequencer sends (the next head finds it paused) goes on as soon as it is
// resumed, not at the sequencer's next look a minute later.
func TestFIFOResumeSendsTheSequenceOn(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	var mu sync.Mutex
	var got []string
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-gate // the first request waits while the endpoint is paused
		}
		mu.Lock()
		got = append(got, r.Header.Get(delivery.HeaderSequence))
		mu.Unlock()
	})
	appID := h.createApp()
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "1h"}, "deadline": "2h"})
	var dlvs []string
	for i := 1; i <= 3; i++ {
		dlvs = append(dlvs, h.sendKeyed(appID, "k", i).Deliveries[0].ID)
	}
	require.Eventually(t, func() bool { return len(rc.receipts()) == 1 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"paused": true}, nil))
	close(gate)
	h.waitDelivery(appID, dlvs[0], 30*time.Second, delivery.StatusSucceeded)
	// The next head found the endpoint paused: nothing goes.
	require.Never(t, func() bool { return len(rc.receipts()) > 1 }, 2*time.Second, 100*time.Millisecond)
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"paused": false}, nil))
	for _, id := range dlvs[1:] {
		h.waitDelivery(appID, id, 20*time.Second, delivery.StatusSucceeded)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"1", "2", "3"}, got)
}

// TestFIFOAppDeletedMidSequence: deleting the app while its sequence's
// head retries and the rest wait sends nothing more, and the sequencer
// ends (its head's workflow tells it; the sequence is gone).
func TestFIFOAppDeletedMidSequence(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "k", I: 1}: 100})
	ep := h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "1h"}, "deadline": "2h"})
	for i := 1; i <= 3; i++ {
		h.sendKeyed(appID, "k", i)
	}
	require.Eventually(t, func() bool { return len(o.receipts("k")) == 1 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusNoContent, h.do("DELETE", "/v1/apps/"+appID, nil, nil))
	require.Eventually(t, func() bool { return !h.workflowOpen(workflows.SequencerID(ep.ID, "k")) }, 30*time.Second, 100*time.Millisecond,
		"the sequencer ends")
	require.Len(t, o.receipts("k"), 1, "nothing more sent")
}
