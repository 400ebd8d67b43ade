package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// CarrierWorkflowName is the registered name of CarrierWorkflow.
const CarrierWorkflowName = "CarrierWorkflow"

// Carrier bounds.
const (
	// CarrierSizeMax is the most deliveries one carrier takes: its
	// HookrelayDeliveries search attribute (a KeywordList of their IDs)
	// must stay under the server's 2 KiB value limit, and 50 local
	// activities per workflow task measured cheaper than 200.
	CarrierSizeMax = 50
	// CarrierLateness is how much later than its own first wait a carried
	// first attempt may start, so attempts due together run together.
	CarrierLateness = 50 * time.Millisecond
)

// SADeliveries lists the delivery IDs a carrier carries, so the Temporal UI
// finds a delivery's first attempt by its ID.
var SADeliveries = temporal.NewSearchAttributeKeyKeywordList("HookrelayDeliveries")

// Change IDs of CarrierWorkflow (see workflow.GetVersion).
const (
	// versionCarrierGroups sends each group of first attempts due together
	// as one SendGroup local activity instead of one SendSigned each.
	versionCarrierGroups = "carrier-groups"
	// versionCarrierDueFromAcceptance plans each carried first attempt from
	// its acceptance, not from the carrier's start.
	versionCarrierDueFromAcceptance = "carrier-due-from-acceptance"
)

// carried is one delivery in a carrier.
type carried struct {
	in       Input
	set      delivery.Settings
	deadline time.Time
	due      time.Time
	resume   *Resume
}

// firstAttempt is the request of c's first attempt.
func (c *carried) firstAttempt() attempt.SendRequest {
	return sendRequest(c.in, c.set, 1, 1, c.deadline)
}

// sendOptions runs a carrier's first attempts once (a failure is judged,
// not retried), bounded by their request timeout and recording; summary
// is the activity's line in the Temporal UI.
func sendOptions(ctx workflow.Context, requestTimeout time.Duration, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: requestTimeout + RecordSlack, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary: summary,
	})
}

// sendEach makes each first attempt of group as its own SendSigned local
// activity, all in parallel, into results and errs.
func sendEach(ctx workflow.Context, group []*carried, results []attempt.SendResult, errs []error) {
	futures := make([]workflow.Future, len(group))
	for i, c := range group {
		futures[i] = workflow.ExecuteLocalActivity(sendOptions(ctx, c.set.RequestTimeout, sendSummary(c.in, 1, 1)), attempt.ActivitySend, c.firstAttempt())
	}
	for i := range group {
		errs[i] = futures[i].Get(ctx, &results[i])
	}
}

// sendGroup makes the first attempts of group as one SendGroup local
// activity into results and errs, and reports whether it ran: when it
// failed as a whole (nothing was sent), the caller sends each on its own.
func sendGroup(ctx workflow.Context, group []*carried, results []attempt.SendResult, errs []error) bool {
	reqs := make([]attempt.SendRequest, len(group))
	timeout := time.Duration(0)
	for i, c := range group {
		reqs[i] = c.firstAttempt()
		timeout = max(timeout, c.set.RequestTimeout)
	}
	var outs []attempt.SendOutcome
	if err := workflow.ExecuteLocalActivity(sendOptions(ctx, timeout, groupSummary(len(group))), attempt.ActivitySendGroup, reqs).Get(ctx, &outs); err != nil || len(outs) != len(group) {
		return false
	}
	for i, o := range outs {
		results[i], errs[i] = o.Result, o.Err()
	}
	return true
}

// CarrierInput is a batch of new deliveries whose first attempts one
// workflow makes.
type CarrierInput struct {
	Deliveries []Input
}

// CarrierResult counts what a carrier did.
type CarrierResult struct {
	// Delivered succeeded on their first attempt; HandedOff went on in
	// their own DeliveryWorkflow; Gone had no row left.
	Delivered, HandedOff, Gone int
}

// CarrierWorkflow makes the first attempt of each of its deliveries, each
// at its own first wait (at most CarrierLateness late), as a local activity,
// all due together in parallel. Each result is judged as DeliveryWorkflow
// judges it; a delivery that did not succeed is handed to its own
// DeliveryWorkflow (workflow ID = delivery ID, Input.Resume = this attempt),
// which goes on from attempt 2, dead-letters or cancels. Almost every
// webhook succeeds on its first attempt, and that attempt then costs a
// share of one workflow instead of one of its own.
func CarrierWorkflow(ctx workflow.Context, in CarrierInput) (CarrierResult, error) {
	var result CarrierResult
	now := workflow.Now(ctx)
	var pending, direct []*carried
	// A carried first attempt is due its first wait after its acceptance,
	// as every delivery's is (before: after the carrier's start, which the
	// dispatcher makes near that due time: a first wait late).
	fromAcceptance := workflow.GetVersion(ctx, versionCarrierDueFromAcceptance, workflow.DefaultVersion, 1) == 1
	for _, d := range in.Deliveries {
		c := &carried{in: d, set: d.Settings.WithDefaults()}
		accepted := d.AcceptedAt
		if accepted.IsZero() {
			accepted = now
		}
		c.deadline = accepted.Add(c.set.Deadline)
		from := now
		if fromAcceptance {
			from = accepted
		}
		next := delivery.Plan(c.set, d.DeliveryID, 1, nil, from, c.deadline)
		if next.DeadLetter != "" {
			// No first attempt fits: its own workflow says why.
			direct = append(direct, c)
			continue
		}
		c.due = next.At
		pending = append(pending, c)
	}
	slices.SortStableFunc(pending, func(a, b *carried) int { return a.due.Compare(b.due) })
	// Each group due together is sent by one SendGroup: one statement loads
	// its targets, one records its attempts, one marker holds its results.
	grouped := len(pending) > 1 && workflow.GetVersion(ctx, versionCarrierGroups, workflow.DefaultVersion, 1) == 1
	for len(pending) > 0 {
		// Everything due within CarrierLateness of the first goes together,
		// when the last of them is due: none early, none more than
		// CarrierLateness late.
		n := 1
		for n < len(pending) && !pending[n].due.After(pending[0].due.Add(CarrierLateness)) {
			n++
		}
		group := pending[:n]
		pending = pending[n:]
		if wait := group[n-1].due.Sub(workflow.Now(ctx)); wait > 0 {
			if err := workflow.Sleep(ctx, wait); err != nil {
				return result, err
			}
		}
		results := make([]attempt.SendResult, len(group))
		errs := make([]error, len(group))
		if !grouped || len(group) == 1 || !sendGroup(ctx, group, results, errs) {
			sendEach(ctx, group, results, errs)
		}
		for i, c := range group {
			res, err := results[i], errs[i]
			v := judge(res, err)
			switch {
			case v.final && v.out == outSucceeded:
				result.Delivered++
				continue
			case v.final && v.out == outGone:
				result.Gone++
				continue
			}
			o := attempt.Outcome(res, err)
			c.resume = &o
			direct = append(direct, c)
		}
	}
	// Hand-offs: each delivery that goes on gets its own workflow.
	children := make([]workflow.ChildWorkflowFuture, len(direct))
	for i, c := range direct {
		child := c.in
		child.Resume = c.resume
		status := delivery.StatusDelivering
		if c.resume == nil {
			status = delivery.StatusPending
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            c.in.DeliveryID,
			StaticSummary:         DeliverySummary(child),
			StaticDetails:         DeliveryDetails(child),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				SAState.ValueSet(string(status)), SAEndpoint.ValueSet(c.in.EndpointID),
				SAEventType.ValueSet(c.in.EventType), SAApp.ValueSet(c.in.AppID),
			),
		})
		children[i] = workflow.ExecuteChildWorkflow(cctx, WorkflowName, child)
	}
	for i, f := range children {
		// Started is enough: the child is abandoned when the carrier ends.
		err := f.GetChildWorkflowExecution().Get(ctx, nil)
		var started *temporal.ChildWorkflowExecutionAlreadyStartedError
		if err != nil && !errors.As(err, &started) {
			return result, fmt.Errorf("hand off %s: %w", direct[i].in.DeliveryID, err)
		}
		result.HandedOff++
	}
	return result, nil
}
