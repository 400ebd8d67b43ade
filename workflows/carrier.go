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
	// must stay under the server's 2 KiB value limit, and a task of more
	// local activities costs more per delivery, not less.
	CarrierSizeMax = 50
	// CarrierLateness is how much later than its own first wait a carried
	// first attempt may start in a carrier started before
	// versionCarrierWindow, so attempts due together run together.
	CarrierLateness = 50 * time.Millisecond
	// CarrierWindow is how far past the first of its deliveries still
	// waiting a carrier's group reaches: one SendGroup local activity makes
	// each of them at its own due time, waiting in the worker, and the
	// carrier sleeps on a Temporal timer only when its next delivery is due
	// further away than that. A Temporal server fires a timer due sooner
	// than its history.timerProcessorMaxTimeShift (1 s by default) only
	// that long after the timer's creation, so a shorter timer would make
	// first attempts late.
	CarrierWindow = time.Second
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
	// versionCarrierWindow sends everything due within CarrierWindow as one
	// SendGroup whose requests each leave at their due time
	// (SendRequest.At), instead of sleeping on a timer to each group due
	// within CarrierLateness.
	versionCarrierWindow = "carrier-window"
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
// timed makes each request at its own due time (SendRequest.At), waiting
// in the worker.
func sendGroup(ctx workflow.Context, group []*carried, results []attempt.SendResult, errs []error, timed bool) bool {
	reqs := make([]attempt.SendRequest, len(group))
	timeout := time.Duration(0)
	now := workflow.Now(ctx)
	for i, c := range group {
		reqs[i] = c.firstAttempt()
		timeout = max(timeout, c.set.RequestTimeout)
		if timed {
			reqs[i].At = c.due
			timeout = max(timeout, c.due.Sub(now)+c.set.RequestTimeout)
		}
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

// nextWindow waits, on a Temporal timer, until the first of pending (sorted
// by due time) is due when that is further than CarrierWindow away, and
// returns everything due within CarrierWindow from then, whose requests
// leave at their due times, and the rest.
func nextWindow(ctx workflow.Context, pending []*carried) (group, rest []*carried, err error) {
	if wait := pending[0].due.Sub(workflow.Now(ctx)); wait > CarrierWindow {
		// ClaimLead early: each request is loaded and claimed that long
		// before its due time, which it still leaves at.
		if err := workflow.Sleep(ctx, wait-attempt.ClaimLead); err != nil {
			return nil, pending, err
		}
	}
	horizon := workflow.Now(ctx).Add(CarrierWindow)
	n := 1
	for n < len(pending) && !pending[n].due.After(horizon) {
		n++
	}
	return pending[:n], pending[n:], nil
}

// nextGroup returns the first of pending (sorted by due time) and every
// other due within CarrierLateness of it, which go together when the last
// of them is due (none early, none more than CarrierLateness late), and
// the rest: a carrier started before versionCarrierWindow, which sleeps
// until the last of the group is due.
func nextGroup(pending []*carried) (group, rest []*carried) {
	n := 1
	for n < len(pending) && !pending[n].due.After(pending[0].due.Add(CarrierLateness)) {
		n++
	}
	return pending[:n], pending[n:]
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
// at its own first wait, in SendGroup local activities that each make
// those due within CarrierWindow. Each result is judged as DeliveryWorkflow
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
	windowed := len(pending) > 0 && workflow.GetVersion(ctx, versionCarrierWindow, workflow.DefaultVersion, 1) == 1
	for len(pending) > 0 {
		var group []*carried
		var err error
		if windowed {
			group, pending, err = nextWindow(ctx, pending)
		} else {
			group, pending = nextGroup(pending)
			if wait := group[len(group)-1].due.Sub(workflow.Now(ctx)); wait > 0 {
				err = workflow.Sleep(ctx, wait)
			}
		}
		if err != nil {
			return result, err
		}
		results := make([]attempt.SendResult, len(group))
		errs := make([]error, len(group))
		if windowed || (grouped && len(group) > 1) {
			if !sendGroup(ctx, group, results, errs, windowed) {
				sendEach(ctx, group, results, errs)
			}
		} else {
			sendEach(ctx, group, results, errs)
		}
		for i, c := range group {
			res, err := results[i], errs[i]
			v := judge(res, err)
			switch {
			case v.final && v.out == outSucceeded && !res.Unrecorded:
				// (An unrecorded success goes to its own workflow, which
				// records it.)
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
