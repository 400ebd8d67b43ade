package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
// once each, in the order found; take hands them out one per wakeEvery.
// The zero value is empty.
type sequenceWakes struct {
	mu     sync.Mutex
	keys   []store.SequenceKey
	queued map[store.SequenceKey]bool
	// last is when the last key was handed out.
	last time.Time
}

// add queues keys not queued yet, at the back.
func (q *sequenceWakes) add(keys ...store.SequenceKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued == nil {
		q.queued = map[store.SequenceKey]bool{}
	}
	for _, k := range keys {
		if !q.queued[k] {
			q.queued[k] = true
			q.keys = append(q.keys, k)
		}
	}
}

// take removes and returns the key at the front when wakeEvery passed since
// the last one (none otherwise); next is when the next may go, when keys
// are left (zero otherwise).
func (q *sequenceWakes) take(now time.Time) (keys []store.SequenceKey, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.keys) > 0 && now.Sub(q.last) >= wakeEvery {
		keys = append(keys, q.keys[0])
		q.keys = q.keys[1:]
		delete(q.queued, keys[0])
		q.last = now
	}
	if len(q.keys) > 0 {
		next = q.last.Add(wakeEvery)
	}
	return keys, next
}

// front returns up to n keys at the front, leaving them queued.
func (q *sequenceWakes) front(n int) []store.SequenceKey {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]store.SequenceKey(nil), q.keys[:min(n, len(q.keys))]...)
}

// drop removes keys from the queue.
func (q *sequenceWakes) drop(keys []store.SequenceKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	gone := map[store.SequenceKey]bool{}
	for _, k := range keys {
		if q.queued[k] {
			gone[k] = true
			delete(q.queued, k)
		}
	}
	if len(gone) == 0 {
		return
	}
	kept := q.keys[:0]
	for _, k := range q.keys {
		if !gone[k] {
			kept = append(kept, k)
		}
	}
	q.keys = kept
}

// len is how many keys wait.
func (q *sequenceWakes) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys)
}

// wake queues the sequences rows belong to (sequenceWakes), once per
// sequence, but for those a run holds (which statement for the round tells):
// that run reads the rows before it lets go, so it gets no signal (each
// would cost its sequencer a workflow task), only this process's bell. Then
// it signals what the queue allows now (signalWakes).
func (d *Dispatcher) wake(ctx context.Context, rows []outbox.Row) error {
	var keys []store.SequenceKey
	seen := map[store.SequenceKey]bool{}
	for _, it := range rows {
		k := store.SequenceKey{EndpointID: it.EndpointID, OrderingKey: it.OrderingKey}
		if !seen[k] {
			seen[k] = true
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
				d.seqWakes.add(k)
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
	// wakes (an app deleted with thousands of keys queued).
	for range wakeCheckRounds {
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
	keys, next := d.seqWakes.take(time.Now())
	for _, k := range keys {
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
			d.seqWakes.add(k)
			next = time.Now().Add(time.Second)
		}
	}
	if !next.IsZero() {
		d.Wake(next)
	}
	return errors.Join(errs...)
}
