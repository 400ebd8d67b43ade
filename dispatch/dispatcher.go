// Package dispatch carries outbox rows to Temporal: a workflow start per
// new delivery, a signal-with-start per replay, a signal per cancel. It is
// the only package between the outbox and the engine.
package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/ids"
	"hookrelay/internal/coalesce"
	"hookrelay/metrics"
	"hookrelay/outbox"
	"hookrelay/workflows"
)

// Dispatcher defaults.
const (
	BatchDefault = 200
	// PollIntervalDefault bounds how long a row can wait when its NOTIFY
	// was skipped or lost.
	PollIntervalDefault = 250 * time.Millisecond
	// CarrierSizeDefault is the most first attempts one carrier workflow
	// takes (at most workflows.CarrierSizeMax).
	CarrierSizeDefault = workflows.CarrierSizeMax
	// CarrierMinDefault is the fewest new deliveries a round must find to
	// carry them; a round with fewer starts one DeliveryWorkflow each.
	CarrierMinDefault = 2
	// linger is how long after a round that claimed rows the dispatcher
	// looks for the earliest row left: ingest wakes the dispatcher only
	// when no unleased row would be claimed before its own, so a row whose
	// ingest overlapped the round (and saw its rows still unleased) is
	// found by that look instead of waiting for the poll. A look, not a
	// round: at everyday rates a round per event would cost a claim
	// statement per event.
	linger = 10 * time.Millisecond
	// heldWait is how often a dispatcher whose sender holds HeldMax rows
	// looks again.
	heldWait = 10 * time.Millisecond
	// startConcurrency bounds concurrent workflow starts per batch.
	startConcurrency = 32
)

// Dispatcher drains the outbox into Temporal: a workflow start per new
// delivery, a signal-with-start per replay. Rows are claimed with FOR
// UPDATE SKIP LOCKED, so several dispatchers can run; a row is deleted only
// after Temporal accepted it, and starts are idempotent by workflow ID.
type Dispatcher struct {
	Pool   *pgxpool.Pool
	Client client.Client
	// Batch is the number of rows claimed per round. Defaults to BatchDefault.
	Batch int
	// PollInterval is the safety-net poll when no NOTIFY arrives. Defaults
	// to PollIntervalDefault.
	PollInterval time.Duration
	// LocalActivity is passed to every workflow.
	LocalActivity bool
	// TaskQueue defaults to workflows.TaskQueue.
	TaskQueue string
	// NoEagerStart turns off eager workflow start (the starter's own worker
	// running the first workflow task without a poll round trip).
	NoEagerStart bool
	// CarrierSize is the most new deliveries one CarrierWorkflow carries;
	// 1 turns carriers off (one DeliveryWorkflow per delivery). Defaults to
	// CarrierSizeDefault; SetCarrierSize changes it while running.
	CarrierSize int
	// CarrierMin is the fewest new deliveries a round must find to carry
	// them. Defaults to CarrierMinDefault.
	CarrierMin int
	// Sender makes first attempts straight from the outbox, each at its own
	// due time, under a lease on its start row (see first.go); only a
	// delivery whose first attempt did not succeed gets a workflow. Nil
	// carries first attempts in CarrierWorkflows instead.
	Sender *activities.Activities
	// firsts tracks first attempts in progress; firstDone and
	// firstHandedOff count those that ended the delivery and those handed
	// to a DeliveryWorkflow.
	firsts                    sync.WaitGroup
	firstDone, firstHandedOff atomic.Int64
	// carrying turns the Sender off while running (see UseCarriers).
	carrying atomic.Bool
	// AppShare is how many first attempts of one app the Sender makes at
	// once. Defaults to AppShareDefault.
	AppShare int
	// HeldMax bounds the start rows the Sender holds at once. Defaults to
	// HeldMaxDefault.
	HeldMax int
	// held counts the start rows the Sender holds; lanes bound each app's;
	// doneRows deletes the rows of ended first attempts in shared
	// statements.
	held     atomic.Int64
	lanes    lanes
	doneRows *coalesce.Coalescer[int64, struct{}]
	// carrierSize is CarrierSize, changeable while running.
	carrierSize atomic.Int64
	// started and carried count new deliveries started in their own
	// workflow and in carriers.
	started, carried atomic.Int64
	// Logger receives dispatch failures. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives the dispatcher's series; nil records nothing.
	Metrics *metrics.Sender
}

// SetCarrierSize changes CarrierSize while the dispatcher runs (the bench
// measures both shapes on one server).
func (d *Dispatcher) SetCarrierSize(n int) {
	d.carrierSize.Store(int64(min(max(n, 1), workflows.CarrierSizeMax)))
}

// UseCarriers carries first attempts in CarrierWorkflows (on) or makes
// them with the Sender (off) from the next round on (the bench measures
// both on one server).
func (d *Dispatcher) UseCarriers(on bool) { d.carrying.Store(on) }

// Counts returns how many new deliveries were started in their own
// DeliveryWorkflow, how many in carriers, and how many first attempts a
// sender made (direct) since the dispatcher began.
func (d *Dispatcher) Counts() (own, carried, direct int64) {
	return d.started.Load(), d.carried.Load(), d.firstDone.Load() + d.firstHandedOff.Load()
}

// Run dispatches until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.carrierSize.Load() == 0 {
		d.SetCarrierSize(cmp.Or(d.CarrierSize, CarrierSizeDefault))
	}
	batch := d.Batch
	if batch <= 0 {
		batch = BatchDefault
	}
	poll := d.PollInterval
	if poll <= 0 {
		poll = PollIntervalDefault
	}
	// First attempts in progress finish (their requests run to their own
	// timeout); those not yet due go back to the outbox.
	d.doneRows = coalesce.New(d.deleteRows)
	defer d.doneRows.Close()
	defer d.firsts.Wait()
	d.lanes = lanes{share: cmp.Or(d.AppShare, AppShareDefault), open: map[string]int{}, wait: map[string][]chan struct{}{}}
	heldMax := int64(cmp.Or(d.HeldMax, HeldMaxDefault))
	w := &wakeup{signal: make(chan struct{}, 1)}
	go d.listen(ctx, w)
	backoff := time.Duration(0)
	for {
		room := heldMax - d.held.Load()
		if room <= 0 {
			// The sender holds its bound: claim nothing until some rows end.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(heldWait):
			}
			continue
		}
		w.take()
		n, err := d.dispatch(ctx, int(min(int64(batch), room)))
		if n > 0 || err != nil {
			d.Metrics.Round(err)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			d.Logger.Warn("outbox dispatch failed; will retry", "err", err, "retry_in", backoff)
		case n > 0:
			backoff = 0
			// Rows whose ingest overlapped this round saw its rows still
			// unleased and woke nobody (see Publish); once that overlap has
			// passed, ask for a round by the earliest row left (at once when
			// the batch left rows behind).
			if !sleepCtx(ctx, linger) {
				return nil
			}
			if at, ok, err := outbox.NextClaim(ctx, d.Pool); err != nil {
				d.Logger.Warn("next claim not read; the poll takes the rows", "err", err)
			} else if ok {
				w.request(at)
			}
		default:
			backoff = 0
		}
		wait := poll
		if backoff > 0 {
			wait = backoff
		}
		if !w.sleep(ctx, time.Now().Add(wait), backoff) {
			return nil
		}
	}
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// wakeup holds the earliest time a NOTIFY asked for a round (zero: none):
// rows whose first attempts are due later wait in the outbox, so one round
// claims many.
type wakeup struct {
	mu     sync.Mutex
	at     time.Time
	signal chan struct{}
}

// request asks for a round by at.
func (w *wakeup) request(at time.Time) {
	w.mu.Lock()
	if w.at.IsZero() || at.Before(w.at) {
		w.at = at
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// take clears the request a round is about to serve.
func (w *wakeup) take() {
	w.mu.Lock()
	w.at = time.Time{}
	w.mu.Unlock()
}

func (w *wakeup) next() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// sleep waits until until or the earliest requested round, whichever is
// first (never shorter than backoff after a failure); false when ctx ended.
func (w *wakeup) sleep(ctx context.Context, until time.Time, backoff time.Duration) bool {
	for {
		at := until
		if r := w.next(); !r.IsZero() && r.Before(at) {
			at = r
		}
		wait := time.Until(at)
		if wait <= 0 {
			wait = backoff
		}
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-w.signal:
			t.Stop()
			// A new request: wait again, for it if it is earlier.
		case <-t.C:
			return true
		}
	}
}

// listen turns NOTIFYs into requests for a round (by the time a payload
// names, or now); it reconnects after failures.
func (d *Dispatcher) listen(ctx context.Context, w *wakeup) {
	for ctx.Err() == nil {
		err := func() error {
			conn, err := d.Pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "LISTEN "+outbox.Channel); err != nil {
				return err
			}
			for {
				n, err := conn.Conn().WaitForNotification(ctx)
				if err != nil {
					conn.Conn().Close(context.Background()) //nolint:errcheck // discard the listening conn
					return err
				}
				at := time.Now()
				if ms, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
					at = time.UnixMilli(ms)
				}
				w.request(at)
			}
		}()
		if ctx.Err() != nil {
			return
		}
		d.Logger.Debug("outbox listener reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// dispatch handles one batch and returns how many rows it claimed. New
// deliveries found together (at least CarrierMin) go to carrier workflows
// of at most CarrierSize; every other row is sent on its own.
func (d *Dispatcher) dispatch(ctx context.Context, batch int) (int, error) {
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after commit
	// Rows of one delivery are handled in order: only its oldest row is
	// claimed per round, so a cancel is signaled before a later replay.
	items, err := outbox.Claim(ctx, tx, batch)
	if err != nil {
		return 0, err
	}
	if len(items) == 0 {
		return 0, nil
	}
	var singles, fresh []outbox.Row
	var done []int64
	var firsts []first
	var leaseIDs []int64
	var leaseUntil []time.Time
	stamped := map[string]bool{}
	now := time.Now()
	sender := d.Sender != nil && !d.carrying.Load()
	for _, it := range items {
		switch {
		case it.CarrierID != "":
			stamped[it.CarrierID] = true
		case it.Stale():
			done = append(done, it.ID)
		case it.Kind == outbox.KindStart && sender && it.Outcome == nil:
			f, ok := planFirst(it, now)
			if !ok {
				singles = append(singles, it)
				continue
			}
			firsts = append(firsts, f)
			leaseIDs, leaseUntil = append(leaseIDs, it.ID), append(leaseUntil, f.leaseUntil(now))
		case it.Kind == outbox.KindStart && !sender && it.Outcome == nil:
			fresh = append(fresh, it)
		default:
			singles = append(singles, it)
		}
	}
	if err := outbox.Lease(ctx, tx, leaseIDs, leaseUntil); err != nil {
		return 0, err
	}
	size := int(d.carrierSize.Load())
	if size <= 1 || len(fresh) < cmp.Or(d.CarrierMin, CarrierMinDefault) {
		singles, fresh = append(singles, fresh...), nil
	}
	// Name each new batch before its carrier starts (committed below).
	var carried []outbox.Row
	var stampIDs []int64
	var stampNames []string
	for batch := range slices.Chunk(fresh, size) {
		id := ids.New(ids.Carrier)
		for _, it := range batch {
			it.CarrierID = id
			carried = append(carried, it)
			stampIDs, stampNames = append(stampIDs, it.ID), append(stampNames, id)
		}
	}
	if err := outbox.Stamp(ctx, tx, stampIDs, stampNames); err != nil {
		return 0, err
	}
	// A batch stamped before (a dispatcher that died before deleting it) is
	// read whole, so it restarts with exactly its rows.
	if len(stamped) > 0 {
		again, err := outbox.CarrierRows(ctx, tx, slices.Collect(maps.Keys(stamped)))
		if err != nil {
			return 0, err
		}
		carried = append(carried, again...)
	}
	sent, sendErr := d.sendEach(ctx, singles)
	if err := outbox.Done(ctx, tx, append(done, sent...)); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit dispatched rows: %w", err)
	}
	d.sendFirsts(ctx, firsts)
	started, carryErr := d.carry(ctx, carried)
	if len(started) > 0 {
		if err := outbox.DoneCarriers(ctx, d.Pool, started); err != nil {
			return 0, err
		}
	}
	if err := errors.Join(sendErr, carryErr); err != nil {
		return len(items), err
	}
	return len(items), nil
}

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
		_, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                    id,
			TaskQueue:             cmp.Or(d.TaskQueue, workflows.TaskQueue),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			EnableEagerStart:      !d.NoEagerStart,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SADeliveries.ValueSet(deliveryIDs)),
		}, workflows.CarrierWorkflowName, workflows.CarrierInput{Deliveries: in})
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

// input is the workflow input of a row's delivery.
func (d *Dispatcher) input(it outbox.Row) workflows.Input {
	return workflows.Input{
		DeliveryID: it.DeliveryID, AppID: it.AppID, EventID: it.EventID, EventType: it.EventType, EndpointID: it.EndpointID,
		Settings: it.Settings, Cycle: max(it.Cycle, 1), AcceptedAt: it.CreatedAt, LocalActivity: d.LocalActivity,
	}
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
	if it.Kind == outbox.KindReplay {
		opts := client.StartWorkflowOptions{ID: in.DeliveryID, TaskQueue: cmp.Or(d.TaskQueue, workflows.TaskQueue)}
		// A running (dead-lettered) workflow gets the signal and continues
		// as the next cycle; a completed one is started again as that cycle.
		// Either way the cycle runs with the endpoint's current settings and
		// this replay's ID, so a row dispatched twice runs once.
		in.Cycle++
		in.ReplayID = it.ID
		settings := in.Settings
		opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		opts.TypedSearchAttributes = searchAttributes(in, delivery.StatusDelivering)
		sig := workflows.ReplaySignal{By: it.RequestedBy, ReplayID: it.ID, Settings: &settings, RequestedAt: it.CreatedAt}
		_, err := d.Client.SignalWithStartWorkflow(ctx, in.DeliveryID, workflows.SignalReplay, sig, opts, workflows.WorkflowName, in)
		if err != nil {
			return fmt.Errorf("replay %s: %w", in.DeliveryID, err)
		}
		return nil
	}
	return d.start(ctx, it, nil)
}

// start starts a new delivery's DeliveryWorkflow; resume is its first
// attempt's outcome when a sender made it (nil: the workflow makes it, or
// the row's recorded outcome when a sender recorded one before it died).
func (d *Dispatcher) start(ctx context.Context, it outbox.Row, resume *activities.SendOutcome) error {
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
	// Reject a second run: a delivery whose workflow already completed must
	// not be sent again because its outbox row was seen twice.
	opts := client.StartWorkflowOptions{
		ID:                    in.DeliveryID,
		TaskQueue:             cmp.Or(d.TaskQueue, workflows.TaskQueue),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		EnableEagerStart:      !d.NoEagerStart,
		TypedSearchAttributes: searchAttributes(in, status),
	}
	_, err := d.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return fmt.Errorf("start %s: %w", in.DeliveryID, err)
	}
	d.started.Add(1)
	return nil
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
