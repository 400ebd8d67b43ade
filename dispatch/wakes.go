package dispatch

import (
	"sync"
	"time"

	"hookrelay/store"
)

// SequenceWakesPerSecond bounds the sequencers one dispatcher signals (with
// start) each second. A sequencer that starts costs about what a delivery's
// workflow does, so a burst of thousands of new ordering keys (each its own
// sequence) starts its sequencers at this pace, a bounded share of the
// machine, while every other app's deliveries go on; the keys' rows stay
// leased to their sequences meanwhile (SequenceLease). A key with many
// events needs one wake for all of them.
const SequenceWakesPerSecond = 16

// sequenceWakes is a dispatcher's queue of sequences to signal: each round
// adds the sequences of the ordered rows it claimed that no run holds,
// once each, in the order found; take hands out at most
// SequenceWakesPerSecond of them per second. The zero value is empty.
type sequenceWakes struct {
	mu     sync.Mutex
	keys   []store.SequenceKey
	queued map[store.SequenceKey]bool
	// window is the start of the current second; used, its wakes so far.
	window time.Time
	used   int
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

// take removes and returns the keys at the front that now's second still
// has room for; next is when the next second begins, when keys are left
// (zero otherwise).
func (q *sequenceWakes) take(now time.Time) (keys []store.SequenceKey, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Sub(q.window) >= time.Second {
		q.window, q.used = now, 0
	}
	n := min(len(q.keys), SequenceWakesPerSecond-q.used)
	keys = append(keys, q.keys[:n]...)
	q.keys = q.keys[n:]
	q.used += n
	for _, k := range keys {
		delete(q.queued, k)
	}
	if len(q.keys) > 0 {
		next = q.window.Add(time.Second)
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
