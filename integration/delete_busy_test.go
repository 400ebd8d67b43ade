package integration

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeleteAppWhileItsKeysDrain: an app deleted while its many ordered
// keys' first attempts are being sent and recorded (every sequencer slot
// busy) is deleted at the first try (204, no deadlock between the delete's
// cascade and the records), and nothing of it is sent afterwards.
func TestDeleteAppWhileItsKeysDrain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc := newReceiver(t, nil)
	appID := h.createApp()
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "ordering": "fifo", "retry_schedule": []string{"0s", "1s"}})
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"paused": true}, nil))
	const keys = 8000
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := c; i < keys; i += 8 {
				body := map[string]any{"type": "ledger.entry", "data": map[string]any{"i": i}, "ordering_key": fmt.Sprintf("k%d", i)}
				require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/events", body, nil))
			}
		})
	}
	wg.Wait()
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"paused": false}, nil))
	require.Eventually(t, func() bool { return len(rc.receipts()) >= 400 }, 60*time.Second, 50*time.Millisecond, "the keys drain")
	var p problemBody
	require.Equal(t, http.StatusNoContent, h.do("DELETE", "/v1/apps/"+appID, nil, &p), p.Detail)
	require.NotContains(t, h.logs.String(), "deadlock", "the delete took no retry")
	// Requests claimed before the delete may still arrive within the
	// contract's bound (under a second); then nothing more.
	last := -1
	require.Eventually(t, func() bool {
		n := len(rc.receipts())
		settled := n == last
		last = n
		return settled
	}, 10*time.Second, time.Second)
	require.Never(t, func() bool { return len(rc.receipts()) > last }, 3*time.Second, 100*time.Millisecond, "nothing is sent once the delete settled")
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/apps/"+appID, nil, nil))
}
