package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/internal/tracing"
	"hookrelay/outbox"
	"hookrelay/workflows"
)

// sendEach sends rows on their own, concurrently, and returns the IDs of
// those Temporal accepted.
func (d *Dispatcher) sendEach(ctx context.Context, rows []outbox.Row) ([]int64, error) {
	var mu sync.Mutex
	var sent []int64
	var errs []error
	sem := make(chan struct{}, startConcurrency)
	var wg sync.WaitGroup
	for _, it := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := d.send(ctx, it)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			sent = append(sent, it.ID)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return sent, fmt.Errorf("%d of %d rows not dispatched: %w", len(errs), len(rows), errs[0])
	}
	return sent, nil
}

// carry starts a CarrierWorkflow for each stamped batch (workflow ID = the
// batch's name, so a batch started before is rejected as a duplicate) and
// returns the names of those that run or ran.
func (d *Dispatcher) carry(ctx context.Context, rows []outbox.Row) ([]string, error) {
	batches := map[string][]workflows.Input{}
	var order []string
	for _, it := range rows {
		if _, ok := batches[it.CarrierID]; !ok {
			order = append(order, it.CarrierID)
			batches[it.CarrierID] = nil
		}
		if !it.Stale() {
			batches[it.CarrierID] = append(batches[it.CarrierID], d.input(it))
		}
	}
	var started []string
	var errs []error
	for _, id := range order {
		in := batches[id]
		if len(in) == 0 {
			// Every delivery of the batch was canceled or deleted.
			started = append(started, id)
			continue
		}
		deliveryIDs := make([]string, len(in))
		for i, x := range in {
			deliveryIDs[i] = x.DeliveryID
		}
		carrier := workflows.CarrierInput{Deliveries: in}
		sctx, span := d.tracedCarrier(ctx, rows, id, len(in))
		_, err := d.Client.ExecuteWorkflow(sctx, client.StartWorkflowOptions{
			ID:                    id,
			StaticSummary:         workflows.CarrierSummary(carrier),
			StaticDetails:         workflows.CarrierDetails(carrier),
			TaskQueue:             cmp.Or(d.TaskQueue, workflows.TaskQueue),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			EnableEagerStart:      !d.NoEagerStart,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SADeliveries.ValueSet(deliveryIDs)),
		}, workflows.CarrierWorkflowName, carrier)
		span.End()
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		if err != nil && !errors.As(err, &already) && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			errs = append(errs, fmt.Errorf("start carrier %s: %w", id, err))
			continue
		}
		d.carried.Add(int64(len(in)))
		started = append(started, id)
	}
	return started, errors.Join(errs...)
}

// tracedCarrier is the dispatch span of carrier id's start: under the
// trace of its first traced row, linking the other rows' traces. Off, it
// returns ctx and a no-op span.
func (d *Dispatcher) tracedCarrier(ctx context.Context, rows []outbox.Row, id string, n int) (context.Context, trace.Span) {
	if d.Tracing == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	var parent context.Context
	var links []trace.SpanContext
	for _, it := range rows {
		if it.CarrierID != id || it.Traceparent == "" {
			continue
		}
		rctx := d.Tracing.Restore(ctx, it.Traceparent, it.Tracestate)
		if parent == nil {
			parent = rctx
			continue
		}
		links = append(links, trace.SpanContextFromContext(rctx))
	}
	if parent == nil {
		parent = ctx
	}
	return d.Tracing.StartLinked(parent, tracing.SpanDispatch, links, tracing.Deliveries(n))
}

// input is the workflow input of a row's delivery.
func (d *Dispatcher) input(it outbox.Row) workflows.Input {
	return workflows.Input{
		DeliveryID: it.DeliveryID, AppID: it.AppID, EventID: it.EventID, EventType: it.EventType, EndpointID: it.EndpointID,
		EndpointHost: workflows.EndpointHost(it.EndpointURL), AppName: it.AppName, Settings: it.Settings, Cycle: max(it.Cycle, 1), AcceptedAt: it.CreatedAt,
		Sequence: it.Sequence, Sequencer: sequencerOf(it),
	}
}

// sequencerOf is the workflow ID of the sequencer of row's delivery, ""
// for an unordered delivery.
func sequencerOf(row outbox.Row) string {
	if row.Sequence == 0 {
		return ""
	}
	return workflows.SequencerID(row.EndpointID, row.OrderingKey)
}

// send starts, replays or cancels one delivery's workflow.
func (d *Dispatcher) send(ctx context.Context, it outbox.Row) error {
	in := d.input(it)
	in.Cycle = it.Cycle
	if it.Kind == outbox.KindCancel {
		err := d.Client.SignalWorkflow(ctx, in.DeliveryID, "", workflows.SignalCancel, nil)
		var notFound *serviceerror.NotFound
		if err != nil && !errors.As(err, &notFound) {
			return fmt.Errorf("cancel %s: %w", in.DeliveryID, err)
		}
		// No running workflow: it has ended, or never started.
		return nil
	}
	if it.Kind == outbox.KindRelease {
		// A blocked sequence's head was released: its sequencer moves on.
		// No sequencer: nothing waits.
		id := workflows.SequencerID(it.EndpointID, it.OrderingKey)
		err := d.Client.SignalWorkflow(ctx, id, "", workflows.SignalEnded, workflows.Ended{DeliveryID: it.DeliveryID, Status: it.Status})
		var notFound *serviceerror.NotFound
		if err != nil && !errors.As(err, &notFound) {
			return fmt.Errorf("release %s in %s: %w", it.DeliveryID, id, err)
		}
		return nil
	}
	if it.Kind == outbox.KindReplay {
		opts := client.StartWorkflowOptions{ID: in.DeliveryID, TaskQueue: cmp.Or(d.TaskQueue, workflows.TaskQueue),
			StaticSummary: workflows.DeliverySummary(in), StaticDetails: workflows.DeliveryDetails(in)}
		// A running (dead-lettered) workflow gets the signal and continues
		// as the next cycle; a completed one is started again as that cycle.
		// Either way the cycle runs with the endpoint's current settings and
		// this replay's ID, so a row dispatched twice runs once.
		// The replay gave the row its cycle (store.ReplayDeliveries).
		in.ReplayID = it.ID
		settings := in.Settings
		opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		opts.TypedSearchAttributes = searchAttributes(in, delivery.StatusDelivering)
		sig := workflows.ReplaySignal{By: it.RequestedBy, ReplayID: it.ID, Settings: &settings, RequestedAt: it.CreatedAt, Sequencer: in.Sequencer}
		_, err := d.Client.SignalWithStartWorkflow(ctx, in.DeliveryID, workflows.SignalReplay, sig, opts, workflows.WorkflowName, in)
		if err != nil {
			return fmt.Errorf("replay %s: %w", in.DeliveryID, err)
		}
		return nil
	}
	ctx, span := d.traced(ctx, it)
	defer span.End()
	return d.start(ctx, it, nil, time.Time{})
}

// traced continues the trace row's event was published in (see
// outbox.TraceContext) with a dispatch span: the sender's first attempt
// and the workflow start (whose span Temporal's interceptor carries into
// the workflow) are its children. Off, it returns ctx and a no-op span.
func (d *Dispatcher) traced(ctx context.Context, row outbox.Row) (context.Context, trace.Span) {
	if d.Tracing == nil {
		// Not even the attributes are built.
		return ctx, trace.SpanFromContext(context.Background())
	}
	return d.Tracing.Start(d.Tracing.Restore(ctx, row.Traceparent, row.Tracestate), tracing.SpanDispatch, trace.SpanKindInternal,
		tracing.App(row.AppID), tracing.Endpoint(row.EndpointID), tracing.EventType(row.EventType), tracing.Event(row.EventID),
		tracing.Delivery(row.DeliveryID), tracing.Cycle(max(row.Cycle, 1)))
}

// start starts a new delivery's DeliveryWorkflow; resume is its first
// attempt's outcome when a sender made it (nil: the workflow makes it, or
// the row's recorded outcome when a sender recorded one before it died);
// due, when set, is when the first attempt is due, the run started then
// (Input.FirstDue).
func (d *Dispatcher) start(ctx context.Context, it outbox.Row, resume *activities.SendOutcome, due time.Time) error {
	if resume == nil {
		var err error
		if resume, err = recordedOutcome(it); err != nil {
			return err
		}
	}
	in := d.input(it)
	in.Resume = resume
	status := delivery.StatusPending
	if resume != nil {
		status = delivery.StatusDelivering
	}
	local := false
	if resume == nil && !due.IsZero() {
		in.FirstDue, status = due, delivery.StatusDelivering
		// Its place is kept no longer than its attempt could last.
		set := in.Settings.WithDefaults()
		local = !d.NoEagerStart && d.Sender != nil && d.Sender.Local.Reserve(in.EndpointID, in.DeliveryID, time.Now(), time.Now().Add(set.RequestTimeout+activities.RecordSlack))
		in.FirstLocal = local
	}
	// Reject a second run: a delivery whose workflow already completed must
	// not be sent again because its outbox row was seen twice.
	opts := client.StartWorkflowOptions{
		ID:                    in.DeliveryID,
		StaticSummary:         workflows.DeliverySummary(in),
		StaticDetails:         workflows.DeliveryDetails(in),
		TaskQueue:             cmp.Or(d.TaskQueue, workflows.TaskQueue),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		EnableEagerStart:      !d.NoEagerStart,
		TypedSearchAttributes: searchAttributes(in, status),
	}
	if delay := startDelay(it, resume, time.Now()); delay > 0 {
		// The retry's wait is the run's start delay: no timer to wait on,
		// one workflow task fewer per failed first attempt.
		opts.StartDelay, opts.EnableEagerStart = delay, false
	}
	_, err := d.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && local {
		d.Sender.Local.Cancel(in.DeliveryID)
	}
	if err != nil && !errors.As(err, &started) && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return fmt.Errorf("start %s: %w", in.DeliveryID, err)
	}
	d.started.Add(1)
	if local {
		d.local.Add(1)
	}
	return nil
}

// startDelay is how long, at now, the DeliveryWorkflow of row's failed
// first attempt (resume) waits before its first task: until its next
// attempt is due, when that is no more than StartDelayMax away. Zero: it
// starts at once (nothing to retry, a longer wait, which a timer keeps, or
// an ordered delivery: a signal, a cancel among them, reaches a delayed run
// only when its delay ends, and a sequence would wait that long for it).
func startDelay(row outbox.Row, resume *activities.SendOutcome, now time.Time) time.Duration {
	if resume == nil || resume.Result.NextAttemptAt.IsZero() || row.Ordered() {
		return 0
	}
	if d := resume.Result.NextAttemptAt.Sub(now); d <= StartDelayMax {
		return max(d, 0)
	}
	return 0
}

// searchAttributes are the attributes a delivery's workflow starts with.
func searchAttributes(in workflows.Input, status delivery.Status) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		workflows.SAState.ValueSet(string(status)),
		workflows.SAEndpoint.ValueSet(in.EndpointID),
		workflows.SAEventType.ValueSet(in.EventType),
		workflows.SAApp.ValueSet(in.AppID),
	)
}
