package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// awaitReplay parks the dead letter until a fresh replay (returned), a
// cancel or the retention timer (nil). The caller stops the retention timer
// with stop once the replay's cycle is recorded.
func (r *run) awaitReplay(ctx workflow.Context) (sig *ReplaySignal, stop func(), err error) {
	if len(r.queued) > 0 {
		return r.pendingReplay(), func() {}, nil
	}
	tctx, stop := workflow.WithCancel(ctx)
	retention := workflow.NewTimerWithOptions(tctx, r.set.Retention,
		workflow.TimerOptions{Summary: "dead letter kept " + r.set.Retention.String() + " for a replay"})
	expired := false
	for sig == nil && !expired && !r.canceled {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(retention, func(workflow.Future) { expired = true })
		sel.AddReceive(r.replayCh, func(c workflow.ReceiveChannel, _ bool) {
			var got ReplaySignal
			c.Receive(ctx, &got)
			if r.fresh(got) {
				sig = &got
			}
		})
		sel.AddReceive(r.cancelCh, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			r.canceled = true
		})
		sel.Select(ctx)
	}
	switch {
	case sig != nil:
		return sig, stop, nil
	case r.canceled:
		// The run ends; the row stays dead_lettered, since a cancel never
		// touches a dead letter.
		err = r.cancel(ctx)
		stop()
		return nil, stop, err
	default:
		// Retention passed; a replay after this starts a new run.
		stop()
		return r.pendingReplay(), stop, nil
	}
}

func (r *run) cancel(ctx workflow.Context) error {
	r.state.NextAttemptAt = nil
	r.setStatus(ctx, delivery.StatusCanceled)
	status, err := r.mark(ctx, delivery.StatusCanceled, "canceled: endpoint disabled or deleted")
	if err == nil && status != "" && status != delivery.StatusCanceled {
		// A 2xx or a dead letter came first; the row keeps it.
		r.setStatus(ctx, status)
	}
	return err
}

// recordLate records an attempt its activity sent but could not record
// (attempt.SendResult.Unrecorded): retried while Postgres is away, up to
// MarkTimeout, so the log shows the request and the outcome, and the
// attempt is judged once (never sent again for want of a record). A
// delivery deleted meanwhile needs no record. It answers res as judged.
func (r *run) recordLate(ctx workflow.Context, c *cycle, res attempt.SendResult) attempt.SendResult {
	if workflow.GetVersion(ctx, versionRecordLate, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res
	}
	actx := recordOptions(ctx, fmt.Sprintf("record attempt %d (sent, not yet recorded)", res.Number))
	req := sendRequest(r.in, r.set, r.state.Cycle, res.Number, c.deadline)
	if err := workflow.ExecuteActivity(actx, attempt.ActivityRecordLate, req, res).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("attempt not recorded", "delivery_id", r.in.DeliveryID, "attempt", res.Number, "err", err)
	}
	res.Unrecorded, res.KeyIDs = false, nil
	return res
}

// recordOptions are the options of an activity that writes to Postgres
// what the run decided or learned (MarkDelivery, RecordLate): retried while
// Postgres is away, up to MarkTimeout; a delivery gone is not retried.
func recordOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    MarkAttemptTimeout,
		ScheduleToCloseTimeout: MarkTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: MarkMaximumInterval,
			NonRetryableErrorTypes: []string{attempt.ErrDeliveryGone},
		},
		Summary: summary,
	})
}

// mark records a workflow-decided state in Postgres and answers the status
// the row holds; "" when the row is gone (its app was deleted), which ends
// the run without error.
func (r *run) mark(ctx workflow.Context, status delivery.Status, reason string) (delivery.Status, error) {
	actx := recordOptions(ctx, markSummary(status, reason))
	req := attempt.MarkRequest{
		DeliveryID: r.in.DeliveryID, Status: status, Reason: reason, Cycle: r.state.Cycle, ReplayID: r.replayID,
	}
	if status == delivery.StatusDeadLettered && r.state.LastAttempt != nil {
		req.LastClass = r.state.LastAttempt.Class
	}
	var res attempt.MarkResult
	err := workflow.ExecuteActivity(actx, attempt.ActivityMark, req).Get(ctx, &res)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == attempt.ErrDeliveryGone {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("record %s: %w", status, err)
	}
	if res.Status == "" {
		// Histories recorded before MarkDelivery answered a status.
		res.Status = status
	}
	return res.Status, nil
}

// setStatus changes the status and the State search attribute.
func (r *run) setStatus(ctx workflow.Context, status delivery.Status) {
	r.state.Status = status
	_ = workflow.UpsertTypedSearchAttributes(ctx, SAState.ValueSet(string(status)))
	r.showDetails(ctx)
}
