package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"hookrelay/config"
	"hookrelay/delivery"
)

// list answers a visibility query.
func (h *harness) list(query string) []*workflowpb.WorkflowExecutionInfo {
	h.t.Helper()
	resp, err := h.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	require.NoError(h.t, err)
	return resp.Executions
}

// TestCarriersCarryABurst: a burst of new deliveries goes out through
// carrier workflows; every first attempt is recorded once, a delivery
// that failed it goes on in its own DeliveryWorkflow, and the Temporal UI
// finds a delivery's carrier by its ID.
func TestCarriersCarryABurst(t *testing.T) {
	h := newHarness(t, inMode(config.FirstAttemptsCarrier))
	appID := h.createApp()
	rc, _ := firstFails(t)
	h.createEndpoint(appID, map[string]any{"url": rc.URL(), "event_types": []string{"burst.ok"}, "retry_schedule": []string{"0s", "1s"}})
	h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?flaky=1", "event_types": []string{"burst.flaky"}, "retry_schedule": []string{"0s", "1s"}})
	const n = 150
	dlvs := h.burst(appID, n, func(i int) string {
		if i%10 == 0 {
			return "burst.flaky"
		}
		return "burst.ok"
	})
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 30*time.Second, delivery.StatusSucceeded)
	}
	ctx := context.Background()
	var firsts, multi int
	require.NoError(t, h.store.Pool().QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE number = 1), count(*) FILTER (WHERE number > 1)
		FROM attempts WHERE cycle = 1 AND delivery_id = ANY ($1)`, dlvs).Scan(&firsts, &multi))
	require.Equal(t, n, firsts, "every first attempt recorded once")
	require.Equal(t, n/10, multi, "each flaky delivery's retry")

	var carriers int
	require.Eventually(t, func() bool {
		carriers = len(h.list("WorkflowType = 'CarrierWorkflow'"))
		return carriers > 0
	}, 10*time.Second, 100*time.Millisecond, "visibility lists the carriers")
	var carried int
	require.Eventually(t, func() bool {
		carried = 0
		for _, id := range dlvs {
			if len(h.list(fmt.Sprintf("HookrelayDeliveries = '%s'", id))) == 1 {
				carried++
			}
		}
		return carried > n/2
	}, 10*time.Second, 200*time.Millisecond)
	// Flaky deliveries went on in their own workflow, ID = delivery ID.
	own := 0
	for i := 0; i < n; i += 10 {
		if _, err := h.client.DescribeWorkflowExecution(ctx, dlvs[i], ""); err == nil {
			own++
		}
	}
	require.Equal(t, n/10, own)
	t.Logf("%d events: %d carriers carried %d first attempts; %d deliveries went on in their own workflow", n, carriers, carried, own)
}
