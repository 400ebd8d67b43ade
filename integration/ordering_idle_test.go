package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/workflows"
)

// TestIdleKeysLeaveNothingRunningAndArePruned: 300 ordering keys, one event
// each, are delivered; once they go idle no sequencer runs and no hold is
// left, and once their deliveries are past the app's retention the prune
// leaves no row of their sequences: nothing grows with keys that were used
// once.
func TestIdleKeysLeaveNothingRunningAndArePruned(t *testing.T) {
	h, o, appID := orderedSetup(t, nil)
	ep := h.createEndpoint(appID, map[string]any{"url": o.rc.URL(), "ordering": "fifo"}).ID
	const keys = 300
	var dlvs []string
	for i := range keys {
		dlvs = append(dlvs, h.sendKeyed(appID, fmt.Sprintf("k%03d", i), 1).Deliveries[0].ID)
	}
	start := time.Now()
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 2*time.Minute, delivery.StatusSucceeded)
	}
	t.Logf("%d keys delivered in %s", keys, time.Since(start).Round(time.Millisecond))
	require.Eventually(t, func() bool {
		for i := range keys {
			if h.workflowOpen(workflows.SequencerID(ep, fmt.Sprintf("k%03d", i))) {
				return false
			}
		}
		return true
	}, time.Minute, 500*time.Millisecond, "every sequencer ended")
	ctx := context.Background()
	count := func(table string) int {
		var n int
		require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}
	require.Zero(t, count("sequence_holds"), "no hold left")
	require.Equal(t, keys, count("sequences"), "each key's counter, kept while its deliveries are")

	p, err := h.store.Prune(ctx, time.Now().Add(h.cfg.Retention+time.Hour), h.cfg.Retention)
	require.NoError(t, err)
	require.Equal(t, keys, p.Sequences)
	require.Zero(t, count("sequences"), "past the retention nothing of the idle keys is left")
	require.Zero(t, count("outbox"))
}
