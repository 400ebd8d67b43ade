package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"hookrelay/outbox"
	"hookrelay/store"
	"hookrelay/workflows"
)

// Bounds of the look for ended sequences at the front of the wake queue:
// wakeCheckChunk keys a statement, at most wakeCheckRounds statements a
// round.
const (
	wakeCheckChunk  = 256
	wakeCheckRounds = 8
)

// SequenceWakesPerSecond bounds the sequencers one dispatcher signals (with
// start) each second, one every 1/16 s. A sequencer that starts costs about what a delivery's
// workflow does, so a burst of thousands of new ordering keys (each its own
// sequence) starts its sequencers at this pace, a bounded share of the
// machine, while every other app's deliveries go on; the keys' rows stay
// leased to their sequences meanwhile (SequenceLease). A key with many
// events needs one wake for all of them.
const SequenceWakesPerSecond = 16

// wakeEvery is the pace of SequenceWakesPerSecond: one wake each, spread
// over the second rather than all at its start, so the sequencers' starts
// never come in a burst.
const wakeEvery = time.Second / SequenceWakesPerSecond

// sequenceWakes is a dispatcher's queue of sequences to signal: each round
// adds the sequences of the ordered rows it claimed that no run holds,
// once each, in a lane per app in the order found; take hands them out one
// per wakeEvery, taking the apps' lanes in turn, so an app with thousands of
// new keys queued delays another app's next key by one wake per app with
// keys waiting, not by its whole queue. The zero value is empty.
type sequenceWakes struct {
	mu sync.Mutex
	// lanes are the apps' queues; order the apps with keys waiting, in
	// turn from turn.
	lanes  map[string][]store.SequenceKey
	order  []string
	turn   int
	queued map[store.SequenceKey]string // key → its app
	// last is when the last key was handed out.
	last time.Time
}

// sequenceWake is a queued sequence and its app.
type sequenceWake struct {
	App string
	store.SequenceKey
}

// add queues app's keys not queued yet, at the back of its lane.
func (q *sequenceWakes) add(app string, keys ...store.SequenceKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued == nil {
		q.queued, q.lanes = map[store.SequenceKey]string{}, map[string][]store.SequenceKey{}
	}
	for _, k := range keys {
		if _, ok := q.queued[k]; ok {
			continue
		}
		q.queued[k] = app
		if len(q.lanes[app]) == 0 {
			// A lane that starts again goes last in the turn: just before
			// the lane whose turn it is, after every lane already waiting.
			q.order = slices.Insert(q.order, q.turn, app)
			if len(q.order) > 1 {
				q.turn++
			}
		}
		q.lanes[app] = append(q.lanes[app], k)
	}
}

// take removes and returns the key at the front of the lane whose turn it
// is, when wakeEvery passed since the last one (none otherwise); next is
// when the next may go, when keys are left (zero otherwise).
func (q *sequenceWakes) take(now time.Time) (wakes []sequenceWake, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queued) > 0 && now.Sub(q.last) >= wakeEvery {
		app := q.order[q.turn]
		k := q.lanes[app][0]
		wakes = append(wakes, sequenceWake{App: app, SequenceKey: k})
		q.remove(k)
		if len(q.lanes[app]) > 0 {
			q.turn++
		}
		if len(q.order) > 0 {
			q.turn %= len(q.order)
		} else {
			q.turn = 0
		}
		q.last = now
	}
	if len(q.queued) > 0 {
		next = q.last.Add(wakeEvery)
	}
	return wakes, next
}

// dueChecks is how many statements may look for ended sequences at the
// front now: wakeCheckRounds when a key may be handed out at now, none
// otherwise (no wake is spent before the next is due).
func (q *sequenceWakes) dueChecks(now time.Time) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queued) > 0 && now.Sub(q.last) >= wakeEvery {
		return wakeCheckRounds
	}
	return 0
}

// front returns up to n keys in the order take would hand them out,
// leaving them queued.
func (q *sequenceWakes) front(n int) []store.SequenceKey {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []store.SequenceKey
	for depth := 0; len(out) < min(n, len(q.queued)); depth++ {
		for i := range q.order {
			lane := q.lanes[q.order[(q.turn+i)%len(q.order)]]
			if depth < len(lane) && len(out) < n {
				out = append(out, lane[depth])
			}
		}
	}
	return out
}

// drop removes keys from the queue.
func (q *sequenceWakes) drop(keys []store.SequenceKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range keys {
		if _, ok := q.queued[k]; ok {
			q.remove(k)
		}
	}
	if len(q.order) == 0 {
		q.turn = 0
	} else {
		q.turn %= len(q.order)
	}
}

// remove takes queued key k out of its lane, and the lane out of the
// turns when it empties (the turn stays on the lane that followed it).
func (q *sequenceWakes) remove(k store.SequenceKey) {
	app := q.queued[k]
	delete(q.queued, k)
	lane := q.lanes[app]
	i := slices.Index(lane, k)
	lane = slices.Delete(lane, i, i+1)
	if len(lane) > 0 {
		q.lanes[app] = lane
		return
	}
	delete(q.lanes, app)
	at := slices.Index(q.order, app)
	q.order = slices.Delete(q.order, at, at+1)
	if at < q.turn {
		q.turn--
	}
}

// len is how many keys wait.
func (q *sequenceWakes) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// wake queues the sequences rows belong to (sequenceWakes), once per
// sequence, but for those a run holds (which statement for the round tells):
// that run reads the rows before it lets go, so it gets no signal (each
// would cost its sequencer a workflow task), only this process's bell. Then
// it signals what the queue allows now (signalWakes).
func (d *Dispatcher) wake(ctx context.Context, rows []outbox.Row) error {
	var keys []store.SequenceKey
	apps := map[store.SequenceKey]string{}
	for _, it := range rows {
		k := store.SequenceKey{EndpointID: it.EndpointID, OrderingKey: it.OrderingKey}
		if _, seen := apps[k]; !seen {
			apps[k] = it.AppID
			keys = append(keys, k)
		}
	}
	var errs []error
	if len(keys) > 0 {
		held, err := store.SequencesHeld(ctx, d.Pool, keys)
		if err != nil {
			// Each is signaled: a signal to a running sequencer costs it a
			// workflow task, never a row.
			errs = append(errs, err)
		}
		for _, k := range keys {
			if held[k] {
				d.bells.wake(workflows.SequencerID(k.EndpointID, k.OrderingKey))
			} else {
				d.seqWakes.add(apps[k], k)
			}
		}
	}
	return errors.Join(append(errs, d.signalWakes(ctx))...)
}

// signalWakes signals (with start) the sequencers the wake queue hands out
// now, on the sequencers' task queue, but those whose sequence has no open
// delivery left (it ended meanwhile, or its app was deleted), and asks for a
// round when the next second lets more go. A sequencer Temporal did not
// take is queued again.
func (d *Dispatcher) signalWakes(ctx context.Context) error {
	var errs []error
	// The sequences at the front that ended leave the queue first, a
	// statement per wakeCheckChunk of them, so they take no second's
	// wakes (an app deleted with thousands of keys queued): looked for
	// when a wake may go, not in every round.
	for range d.seqWakes.dueChecks(time.Now()) {
		front := d.seqWakes.front(wakeCheckChunk)
		if len(front) == 0 {
			break
		}
		open, err := store.SequencesOpen(ctx, d.Pool, front)
		if err != nil {
			// Each is signaled: a sequencer of an ended sequence ends at
			// once.
			errs = append(errs, err)
			break
		}
		var ended []store.SequenceKey
		for _, k := range front {
			if !open[k] {
				ended = append(ended, k)
			}
		}
		d.seqWakes.drop(ended)
		if len(ended) < len(front) {
			break
		}
	}
	wakes, next := d.seqWakes.take(time.Now())
	for _, k := range wakes {
		id := workflows.SequencerID(k.EndpointID, k.OrderingKey)
		opts := client.StartWorkflowOptions{
			ID:            id,
			TaskQueue:     workflows.SequencerQueue(cmp.Or(d.TaskQueue, workflows.TaskQueue)),
			StaticSummary: "sequence " + strconv.Quote(k.OrderingKey) + " of endpoint " + k.EndpointID,
			// A sequencer that ended (its sequence emptied) starts again.
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}
		in := workflows.SequencerInput{EndpointID: k.EndpointID, OrderingKey: k.OrderingKey}
		if _, err := d.Client.SignalWithStartWorkflow(ctx, id, workflows.SignalWake, nil, opts, workflows.SequencerWorkflowName, in); err != nil {
			errs = append(errs, fmt.Errorf("wake %s: %w", id, err))
			d.seqWakes.add(k.App, k.SequenceKey)
			next = time.Now().Add(time.Second)
		}
	}
	if !next.IsZero() {
		d.Wake(next)
	}
	return errors.Join(errs...)
}
