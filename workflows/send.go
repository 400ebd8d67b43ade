package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// send runs SendSigned with Temporal retries off. A regular activity may not
// start after the latest moment it could still finish before the deadline.
func (r *run) send(ctx workflow.Context, number int, deadline, slot time.Time) (attempt.SendResult, error) {
	req := sendRequest(r.in, r.set, r.state.Cycle, number, deadline)
	req.Slot = slot
	noRetry := &temporal.RetryPolicy{MaximumAttempts: 1}
	timeout := r.set.RequestTimeout + RecordSlack
	var fut workflow.Future
	if r.localFirst(number) {
		// The run's first task makes attempt 1 (see Input.FirstLocal).
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: timeout, RetryPolicy: noRetry, Summary: sendSummary(r.in, r.state.Cycle, number),
		})
		fut = workflow.ExecuteLocalActivity(lctx, attempt.ActivitySend, req)
	} else if r.in.LocalActivity && workflow.GetVersion(ctx, versionAsyncSend, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: timeout, RetryPolicy: noRetry, Summary: sendSummary(r.in, r.state.Cycle, number),
		})
		fut = workflow.ExecuteLocalActivity(lctx, attempt.ActivitySend, req)
	} else {
		toStart := max(deadline.Add(-r.set.RequestTimeout).Sub(workflow.Now(ctx)), time.Second)
		// The activity's time also covers its wait for a place in its
		// endpoint's share (a timeout is not compared on replay).
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: timeout + attempt.ShareWaitMax, ScheduleToStartTimeout: toStart, RetryPolicy: noRetry,
			Summary: sendSummary(r.in, r.state.Cycle, number),
		})
		fut = workflow.ExecuteActivity(actx, attempt.ActivitySend, req)
	}
	var res attempt.SendResult
	err := fut.Get(ctx, &res)
	r.attempted(ctx, number, res, err)
	return res, err
}

// localFirst reports whether attempt number is the local first attempt of
// a run started with Input.FirstLocal.
func (r *run) localFirst(number int) bool {
	return r.in.FirstLocal && number == 1 && r.in.Progress == nil && r.in.Resume == nil && r.state.Cycle == max(r.in.Cycle, 1)
}

// sendRequest is attempt n of a cycle that must end by deadline.
func sendRequest(in Input, set delivery.Settings, cycle, n int, deadline time.Time) attempt.SendRequest {
	return attempt.SendRequest{
		DeliveryID: in.DeliveryID, EndpointID: in.EndpointID, Cycle: cycle, Number: n, Timeout: set.RequestTimeout, Settings: set, Deadline: deadline,
	}
}
