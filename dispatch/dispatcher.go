// Package dispatch carries outbox rows to Temporal: a workflow start per
// new delivery, a signal-with-start per replay, a signal per cancel. It is
// the only package between the outbox and the engine.
package dispatch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"hookrelay/activities"
	"hookrelay/ids"
	"hookrelay/internal/coalesce"
	"hookrelay/internal/slots"
	"hookrelay/internal/tracing"
	"hookrelay/metrics"
	"hookrelay/outbox"
	"hookrelay/store"
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
	// Mode is how first attempts are made; "" is ModeWorkflow. SetMode
	// changes it while running.
	Mode Mode
	// Sender is the worker's activities: in ModeSender it makes first
	// attempts straight from the outbox, each at its own due time, under a
	// lease on its start row (see first.go); in ModeWorkflow its
	// LocalFirsts chooses the local first attempts. Nil falls back to
	// ModeCarrier.
	Sender *activities.Activities
	// Sequencer makes the first attempts of ordered deliveries in
	// RunSequence, the sequencers' activity. Defaults to nil: RunSequence
	// fails (a worker that runs sequencers must set it).
	Sequencer *activities.Activities
	// bells ring this process's sequencer runs (see RunSequence).
	bells bells
	// seqWakes are the sequences waiting for their sequencer's signal.
	seqWakes sequenceWakes
	// rounds holds the rounds asked for (NOTIFY, Wake, the looks), made on
	// first use.
	rounds     *wakeup
	roundsOnce sync.Once
	// firsts tracks first attempts in progress; firstDone and
	// firstHandedOff count those that ended the delivery and those handed
	// to a DeliveryWorkflow, firstHeld the rows held back with nothing
	// sent (see Held), taken the rows Take sent on (see Taken).
	firsts                                      sync.WaitGroup
	firstDone, firstHandedOff, firstHeld, taken atomic.Int64
	// mode is Mode, changeable while running (see SetMode).
	mode atomic.Pointer[Mode]
	// runCtx is Run's context while it runs, nil otherwise (see Take).
	runMu  sync.RWMutex
	runCtx context.Context
	// AppShare is how many first attempts of one app the Sender makes at
	// once. Defaults to AppShareDefault.
	AppShare int
	// HeldMax bounds the start rows the Sender holds at once. Defaults to
	// HeldMaxDefault.
	HeldMax int
	// WorkflowAppShare is how many runs of one app may be between their
	// start and their first attempt's beginning at once in ModeWorkflow:
	// one app's flood then never fills Temporal's task queue ahead of
	// another app's runs. Defaults to WorkflowAppShareDefault.
	WorkflowAppShare int
	// wlanes are ModeWorkflow's per-app places; open holds the place of
	// each run started, until FirstBegun or its lapse.
	wlanes *slots.Keyed
	openMu sync.Mutex
	open   map[string]*openFirst
	// AppHeldMax bounds the start rows of one app held at once, so one
	// app's flood of rows not yet due never fills HeldMax: another app's
	// rows, replays and cancels are claimed meanwhile. Defaults to
	// HeldMax / AppHeldShare.
	AppHeldMax int
	// appHeld counts each app's held start rows (see holdApp).
	appMu   sync.Mutex
	appHeld map[string]int
	// held counts the start rows the Sender holds, and the places a round
	// or a Take reserved for the rows it is about to give it (reserve),
	// never more than HeldMax together; lanes bound each app's
	// first attempts in progress (see AppShareDefault): a flood from one
	// app queues in its own lane and never delays another app's attempts;
	// doneRows deletes the rows of ended first attempts, and heldRows
	// leases the rows of held-back ones until their recheck, in shared
	// statements: when an endpoint stops answering, the attempts waiting
	// for its share are held back together, and one statement holds
	// them all instead of each taking a connection of the pool.
	held     atomic.Int64
	lanes    *slots.Keyed
	doneRows *coalesce.Coalescer[int64, struct{}]
	// heldRowsNow reads, just before a workflow-mode start, whether each
	// row's endpoint was paused since its claim (heldNow).
	heldRowsNow *coalesce.Coalescer[int64, bool]
	heldRows    *coalesce.Coalescer[heldRow, struct{}]
	// carrierSize is CarrierSize, changeable while running.
	carrierSize atomic.Int64
	// started and carried count new deliveries started in their own
	// workflow and in carriers; local those of started whose first attempt
	// was a local activity (Input.FirstLocal).
	started, carried, local atomic.Int64
	// Logger receives dispatch failures. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives the dispatcher's series; nil records nothing.
	Metrics *metrics.Sender
	// Tracing continues each new delivery's trace from its outbox row;
	// nil is tracing off.
	Tracing *tracing.Tracing
}

// Name names the dispatcher among a process's services.
func (*Dispatcher) Name() string { return "dispatcher" }

// Run dispatches until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.carrierSize.Load() == 0 {
		d.SetCarrierSize(cmp.Or(d.CarrierSize, CarrierSizeDefault))
	}
	batch := cmp.Or(max(d.Batch, 0), BatchDefault)
	poll := cmp.Or(max(d.PollInterval, 0), PollIntervalDefault)
	// First attempts in progress finish (their requests run to their own
	// timeout); those not yet due go back to the outbox.
	d.doneRows = coalesce.New(d.deleteRows)
	defer d.doneRows.Close()
	d.heldRows = coalesce.New(d.holdRows)
	defer d.heldRows.Close()
	d.heldRowsNow = coalesce.New(d.heldNow)
	defer d.heldRowsNow.Close()
	defer d.firsts.Wait()
	d.lanes = slots.New(cmp.Or(d.AppShare, AppShareDefault))
	d.wlanes = slots.New(cmp.Or(d.WorkflowAppShare, WorkflowAppShareDefault))
	defer d.running(ctx)()
	w := d.waker()
	go d.listen(ctx, w)
	backoff := time.Duration(0)
	// owed: a round ended with its look for overlapping ingests not made
	// (another round was asked for first).
	owed := false
	swept := time.Now()
	for {
		if time.Since(swept) >= HeldSweepInterval {
			swept = time.Now()
			if n, err := store.ReleaseHeld(ctx, d.Pool); err != nil {
				d.Logger.Warn("held rows not swept; the next sweep tries again", "err", err)
			} else if n > 0 {
				d.Logger.Info("released rows held for an endpoint no longer paused", "rows", n)
				w.request(time.Now())
			}
		}
		// The round's places among the sender's HeldMax are taken before
		// it claims, and given back once its first attempts hold their own
		// (sendFirsts): Take's ingests share the bound.
		places := d.reserve(batch)
		if places == 0 {
			// The sender holds its bound: claim nothing until some rows end.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(heldWait):
			}
			continue
		}
		w.take()
		n, err := d.dispatch(ctx, places)
		d.held.Add(-int64(places))
		if n > 0 || err != nil {
			d.Metrics.Round(err)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			d.Logger.Warn("outbox dispatch failed; will retry", "err", err, "retry_in", backoff)
		case n > 0 || owed:
			backoff = 0
			// Rows whose ingest overlapped this round saw its rows still
			// unleased and woke nobody (see outbox.Publish); once that
			// overlap has passed, ask for a round by the earliest row left
			// (at once when the batch left rows behind). A round asked for
			// meanwhile runs at once, and the look is owed after it; after
			// a round of lingerLoaded rows or more, only once the linger
			// has passed.
			lingered := false
			if n >= lingerLoaded {
				lingered = sleepCtx(ctx, linger)
			} else {
				lingered = w.sleep(ctx, time.Now().Add(linger), 0)
			}
			if !lingered {
				return nil
			}
			if owed = w.due(); owed {
				break
			}
			if at, ok, err := store.NextOutboxClaim(ctx, d.Pool); err != nil {
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

// dispatch handles one batch and returns how many rows it claimed. New
// deliveries found together (at least CarrierMin) go to carrier workflows
// of at most CarrierSize; every other row is sent on its own.
func (d *Dispatcher) dispatch(ctx context.Context, batch int) (int, error) {
	// Rows of one delivery are handled in order: only its oldest row is
	// claimed per round, so a cancel is signaled before a later replay.
	// The round's writes go out with its COMMIT.
	round, items, err := store.BeginRound(ctx, d.Pool, batch)
	if err != nil {
		return 0, err
	}
	defer round.Close()
	if len(items) == 0 {
		// Sequences still queued for their wake go now if they may.
		return 0, d.signalWakes(ctx)
	}
	var singles, fresh, ordered []outbox.Row
	var done, leaseIDs []int64
	var firsts []first
	var leaseUntil []time.Time
	var heldN int64 // counted in Held once the round's leases commit
	// The app places firsts took (holdApp) go back unless the round
	// commits and its first attempts take them over (sendFirsts).
	handed := false
	defer func() {
		if !handed {
			for _, f := range firsts {
				d.releaseApp(f.row.AppID)
			}
		}
	}()
	stamped := map[string]bool{}
	now := time.Now()
	mode := d.current()
	sender := mode == ModeSender
	for _, it := range items {
		switch {
		case it.CarrierID != "":
			stamped[it.CarrierID] = true
			continue
		case it.Stale():
			done = append(done, it.ID)
			continue
		case it.Ordered():
			// Its sequencer sends it, in sequence order (see wake); the
			// row stays leased to it until sent.
			ordered = append(ordered, it)
			leaseIDs, leaseUntil = append(leaseIDs, it.ID), append(leaseUntil, now.Add(SequenceLease))
			continue
		}
		var held time.Time
		if it.Kind == outbox.KindStart && sender { // a failed one may take the probe
			held = d.heldBack(it, now, nil, it.Outcome != nil)
		}
		switch {
		case !held.IsZero():
			// Its endpoint stopped answering: the row waits in the outbox
			// for the breaker's probe, in this round's lease.
			leaseIDs, leaseUntil = append(leaseIDs, it.ID), append(leaseUntil, held)
			heldN++
		case it.Kind == outbox.KindStart && mode != ModeCarrier && it.Outcome == nil:
			f, ok := planFirst(it, now)
			if !ok {
				singles = append(singles, it)
				continue
			}
			if !d.holdApp(it.AppID) {
				// Its app holds its share of rows: this one waits in the
				// outbox for a later round.
				leaseIDs, leaseUntil = append(leaseIDs, it.ID), append(leaseUntil, now.Add(appFullWait))
				continue
			}
			f.workflow = mode == ModeWorkflow
			firsts = append(firsts, f)
			leaseIDs, leaseUntil = append(leaseIDs, it.ID), append(leaseUntil, f.leaseUntil(now))
		case it.Kind == outbox.KindStart && mode == ModeCarrier && it.Outcome == nil:
			fresh = append(fresh, it)
		default:
			singles = append(singles, it)
		}
	}
	size := int(d.carrierSize.Load())
	if size <= 1 || len(fresh) < cmp.Or(d.CarrierMin, CarrierMinDefault) {
		// Too few to carry: each goes as in ModeWorkflow, its own
		// DeliveryWorkflow started at its due time (a run started now
		// would wait on a timer and make the attempt a task later).
		for _, it := range fresh {
			f, ok := planFirst(it, now)
			if !ok || d.Sender == nil {
				singles = append(singles, it)
				continue
			}
			if !d.holdApp(it.AppID) {
				leaseIDs, leaseUntil = append(leaseIDs, it.ID), append(leaseUntil, now.Add(appFullWait))
				continue
			}
			f.workflow = true
			firsts = append(firsts, f)
			leaseIDs, leaseUntil = append(leaseIDs, it.ID), append(leaseUntil, f.leaseUntil(now))
		}
		fresh = nil
	}
	round.Lease(leaseIDs, leaseUntil)
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
	round.Stamp(stampIDs, stampNames)
	// A batch stamped before (a dispatcher that died before deleting it) is
	// read whole, so it restarts with exactly its rows.
	if len(stamped) > 0 {
		again, err := round.CarrierRows(ctx, slices.Collect(maps.Keys(stamped)))
		if err != nil {
			return 0, err
		}
		carried = append(carried, again...)
	}
	sent, sendErr := d.sendEach(ctx, singles)
	round.Done(append(done, sent...))
	if err := round.Commit(ctx); err != nil {
		return 0, err
	}
	d.firstHeld.Add(heldN)
	handed = true
	d.sendFirsts(ctx, firsts)
	wakeErr := d.wake(ctx, ordered)
	started, carryErr := d.carry(ctx, carried)
	if len(started) > 0 {
		if err := store.DoneCarriers(ctx, d.Pool, started); err != nil {
			return 0, err
		}
	}
	if err := errors.Join(sendErr, wakeErr, carryErr); err != nil {
		return len(items), err
	}
	return len(items), nil
}
