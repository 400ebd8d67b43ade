package dispatch

import (
	"sync"
	"time"

	"hookrelay/store"
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
