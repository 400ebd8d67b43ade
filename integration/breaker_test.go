package integration

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/config"
	"hookrelay/delivery"
)

// TestSilentEndpointIsHeldThenProbed: on the real stack, in sender mode, once
// --breaker-misses requests in a row to an endpoint got no answer, the
// failed first attempts wait in the outbox (no workflow) and the
// deliveries accepted for it meanwhile send nothing and record nothing
// (held, pending) until the cool-down ends; then a probe finds it
// answering again and every delivery succeeds, each attempt recorded
// exactly as it went out.
func TestSilentEndpointIsHeldThenProbed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, inMode(config.FirstAttemptsSender), func(hc *harnessConfig) { hc.configure = func(c *config.Config) { c.BreakerMisses = 3 } })
	appID := h.createApp()
	var up atomic.Bool
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if up.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		<-r.Context().Done()
	})
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"0s", "1s", "2s", "4s", "8s", "16s"},
		"request_timeout": "1s", "deadline": "5m"})
	rc.setSecrets(ep.Secret)
	publish := func(n int) (events, dlvs []string) {
		for i := range n {
			ev := h.send(appID, "payment.succeeded", map[string]any{"i": i})
			require.Len(t, ev.Deliveries, 1)
			events, dlvs = append(events, ev.ID), append(dlvs, ev.Deliveries[0].ID)
		}
		return events, dlvs
	}
	attempts := func(dlvs []string) int {
		var n int
		require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM attempts WHERE delivery_id = ANY($1)`, dlvs).Scan(&n))
		return n
	}
	heard := func(events []string) int {
		n, seen := 0, rc.byID()
		for _, id := range events {
			n += seen[id]
		}
		return n
	}
	firstEvents, firstDlvs := publish(5)
	// The breaker opens as the third timeout comes back. The failed first
	// attempts from then on wait in the outbox with their outcome (their
	// retries would be held): no workflow until a probe may go.
	require.Eventually(t, func() bool { return attempts(firstDlvs) == 5 }, time.Minute, 20*time.Millisecond)
	noRun := 0
	for _, id := range firstDlvs {
		if _, err := h.client.DescribeWorkflowExecution(context.Background(), id, ""); err != nil {
			noRun++
		}
	}
	require.GreaterOrEqual(t, noRun, 3, "failed first attempts to a held endpoint started their workflows")
	secondEvents, secondDlvs := publish(5)
	require.Never(t, func() bool { return heard(secondEvents) > 0 }, 3*time.Second, 50*time.Millisecond,
		"a delivery accepted while its endpoint was held was sent")
	require.Zero(t, attempts(secondDlvs), "a held first attempt was recorded")
	for _, id := range secondDlvs {
		require.Equal(t, delivery.StatusPending, h.waitDelivery(appID, id, time.Second, delivery.StatusPending).Status)
	}
	up.Store(true)
	for i, id := range append(firstDlvs, secondDlvs...) {
		d := h.waitDelivery(appID, id, 2*time.Minute, delivery.StatusSucceeded)
		ev := append(firstEvents, secondEvents...)[i]
		require.Equal(t, rc.byID()[ev], d.AttemptCount, "delivery %s: the log is not the wire", id)
	}
	require.Positive(t, heard(secondEvents))
}
