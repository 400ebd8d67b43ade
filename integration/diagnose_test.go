package integration

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// Bounds of a failed test's workflow trail.
const (
	// trailWorkflows is how many of the harness's workflows (the first
	// page visibility lists: running ones first) a failed test's log shows.
	trailWorkflows = 12
	// trailEvents is how many of each one's last history events it shows.
	trailEvents = 30
)

// workflowTrail is what a failed test's log shows of the workflows on the
// harness's task queue: each one's latest run's last events, with their
// times, so a delivery or a sequence that did not move says where it
// stopped (a timer, a signal not sent, an activity retrying).
func (h *harness) workflowTrail() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("TaskQueue = '%s'", h.queue), PageSize: trailWorkflows,
	})
	if err != nil {
		return "workflows not listed: " + err.Error()
	}
	var b strings.Builder
	for _, ex := range resp.GetExecutions() {
		id, run := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
		fmt.Fprintf(&b, "%s (run %s, %s):\n", id, run, ex.GetStatus())
		var events []string
		it := h.client.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				events = append(events, "history not read: "+err.Error())
				break
			}
			events = append(events, e.GetEventTime().AsTime().UTC().Format("15:04:05.000")+" "+trailEvent(e))
		}
		for _, e := range events[max(0, len(events)-trailEvents):] {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	return b.String()
}

// trailEvent names a history event with what tells it apart: the
// activity, the signal, the timer's wait, the failure.
func trailEvent(e *historypb.HistoryEvent) string {
	name := strings.TrimPrefix(e.GetEventType().String(), "EVENT_TYPE_")
	switch {
	case e.GetActivityTaskScheduledEventAttributes() != nil:
		return name + " " + e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
	case e.GetActivityTaskStartedEventAttributes() != nil:
		return fmt.Sprintf("%s attempt %d", name, e.GetActivityTaskStartedEventAttributes().GetAttempt())
	case e.GetActivityTaskFailedEventAttributes() != nil:
		return name + ": " + e.GetActivityTaskFailedEventAttributes().GetFailure().GetMessage()
	case e.GetWorkflowTaskFailedEventAttributes() != nil:
		a := e.GetWorkflowTaskFailedEventAttributes()
		return fmt.Sprintf("%s %s: %s", name, a.GetCause(), a.GetFailure().GetMessage())
	case e.GetWorkflowExecutionSignaledEventAttributes() != nil:
		return name + " " + e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
	case e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes() != nil:
		a := e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes()
		return name + " " + a.GetSignalName() + " to " + a.GetWorkflowExecution().GetWorkflowId()
	case e.GetTimerStartedEventAttributes() != nil:
		return name + " " + e.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration().String()
	case e.GetWorkflowExecutionStartedEventAttributes() != nil:
		return name + " (first task after " + e.GetWorkflowExecutionStartedEventAttributes().GetFirstWorkflowTaskBackoff().AsDuration().String() + ")"
	}
	return name
}
