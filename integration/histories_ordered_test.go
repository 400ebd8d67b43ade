package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enums "go.temporal.io/api/enums/v1"

	"hookrelay/delivery"
	"hookrelay/workflows"
)

// TestHistoriesOfOrderedPaths drives ordered deliveries down the
// sequencer's paths on the real server and replays each run's history with
// today's code (recording it when asked; see keepHistory): a sequence sent
// straight through that ends; a head handed to its own workflow, which
// tells the sequencer when it succeeds; a dead letter (skip) whose replay
// waits its turn in the sequence; a dead letter that blocks its sequence
// until its replay.
func TestHistoriesOfOrderedPaths(t *testing.T) {
	h, o, appID := orderedSetup(t, map[orderedData]int{{Key: "flaky", I: 1}: 1, {Key: "dead", I: 1}: 1, {Key: "blocked", I: 1}: 1})
	ep := h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "1s"}}).ID
	sequencerEnded := func(key string) {
		require.Eventually(t, func() bool { return !h.workflowOpen(workflows.SequencerID(ep, key)) }, 30*time.Second, 50*time.Millisecond)
	}

	var straight []string
	for i := 1; i <= 3; i++ {
		straight = append(straight, h.sendKeyed(appID, "straight", i).Deliveries[0].ID)
	}
	for _, id := range straight {
		h.waitDelivery(appID, id, 20*time.Second, delivery.StatusSucceeded)
	}
	sequencerEnded("straight")
	h.keepHistory("v14-sequencer-local-run-sends-and-ends", workflows.SequencerID(ep, "straight"), "")

	handed := h.sendKeyed(appID, "flaky", 1).Deliveries[0].ID
	behind := h.sendKeyed(appID, "flaky", 2).Deliveries[0].ID
	h.waitDelivery(appID, behind, 20*time.Second, delivery.StatusSucceeded)
	require.Eventually(t, func() bool { return !h.workflowOpen(handed) }, 20*time.Second, 50*time.Millisecond)
	sequencerEnded("flaky")
	h.keepHistory("v6-ordered-hand-off-then-success", handed, "")
	h.keepHistory("v6-sequencer-waits-for-hand-off", workflows.SequencerID(ep, "flaky"), "")

	// A dead letter (its only attempt fails) the sequence skips, then its
	// replay.
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep, map[string]any{"retry_schedule": []string{"0s"}}, nil))
	dead := h.sendKeyed(appID, "dead", 1).Deliveries[0].ID
	next := h.sendKeyed(appID, "dead", 2).Deliveries[0].ID
	h.waitDelivery(appID, dead, 20*time.Second, delivery.StatusDeadLettered)
	h.waitDelivery(appID, next, 20*time.Second, delivery.StatusSucceeded)
	first := h.runID(dead)
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dead+"/replay", nil, nil))
	h.waitDelivery(appID, dead, 20*time.Second, delivery.StatusSucceeded)
	require.Eventually(t, func() bool { return !h.workflowOpen(dead) }, 20*time.Second, 50*time.Millisecond)
	sequencerEnded("dead")
	h.keepHistory("v6-ordered-dead-letter-skipped", dead, first)
	h.keepHistory("v6-ordered-replay-in-its-sequence", dead, "")
	h.keepHistory("v6-sequencer-sends-a-replay", workflows.SequencerID(ep, "dead"), "")
	is, _ := o.order("dead")
	require.Equal(t, []int{1, 2, 1}, is, "the dead letter, the one behind it, then the replay")

	// A dead letter that blocks its sequence: the sequencer waits for the
	// replay's wake (or an hour) until the replay.
	blockApp := h.createApp()
	blocking := h.createEndpoint(blockApp, map[string]any{"url": o.rc.URL(), "ordering": "fifo", "fifo_on_dead_letter": "block",
		"retry_schedule": []string{"0s"}}).ID
	blocked := []string{h.sendKeyed(blockApp, "blocked", 1).Deliveries[0].ID, h.sendKeyed(blockApp, "blocked", 2).Deliveries[0].ID}
	appID = blockApp
	h.waitDelivery(appID, blocked[0], 20*time.Second, delivery.StatusDeadLettered)
	require.Eventually(t, func() bool {
		// The sequencer's only version marker: it chose the blocked
		// sequence's wait.
		for _, e := range h.history(workflows.SequencerID(blocking, "blocked")).Events {
			if e.EventType == enums.EVENT_TYPE_MARKER_RECORDED {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "the blocked sequencer waits for the replay")
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+blocked[0]+"/replay", nil, nil))
	h.waitDelivery(appID, blocked[1], 20*time.Second, delivery.StatusSucceeded)
	require.Eventually(t, func() bool { return !h.workflowOpen(workflows.SequencerID(blocking, "blocked")) }, 30*time.Second, 50*time.Millisecond)
	h.keepHistory("v14-sequencer-blocked-then-replayed", workflows.SequencerID(blocking, "blocked"), "")
}
