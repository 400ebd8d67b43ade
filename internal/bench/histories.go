package bench

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// HistoryCost is what one mode's run cost in Temporal: every workflow
// started during it (delivery workflows, carriers), read back from
// visibility and history after the run.
type HistoryCost struct {
	Workflows     int `json:"workflows"`
	Events        int `json:"history_events"`
	WorkflowTasks int `json:"workflow_tasks"`
	// PerDelivery are Events and WorkflowTasks per delivered event.
	EventsPerDelivery float64 `json:"history_events_per_delivery"`
	TasksPerDelivery  float64 `json:"workflow_tasks_per_delivery"`
}

// histories counts the workflows started in [from, to), their history
// events and their completed workflow tasks, per delivery of delivered.
func histories(ctx context.Context, c client.Client, from, to time.Time, delivered int) (HistoryCost, error) {
	var h HistoryCost
	query := fmt.Sprintf("StartTime >= %q AND StartTime < %q", from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return h, fmt.Errorf("list workflows: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			h.Workflows++
			it := c.GetWorkflowHistory(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return h, fmt.Errorf("history of %s: %w", ex.GetExecution().GetWorkflowId(), err)
				}
				h.Events++
				if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
					h.WorkflowTasks++
				}
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if delivered > 0 {
		h.EventsPerDelivery = float64(h.Events) / float64(delivered)
		h.TasksPerDelivery = float64(h.WorkflowTasks) / float64(delivered)
	}
	return h, nil
}
