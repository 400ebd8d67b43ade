package dispatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"hookrelay/store"
)

func wakeKey(app string, i int) store.SequenceKey {
	return store.SequenceKey{EndpointID: "ep-" + app, OrderingKey: fmt.Sprintf("%s-%d", app, i)}
}

// wakeInvariants checks the queue's internal consistency.
func wakeInvariants(t *testing.T, q *sequenceWakes) {
	t.Helper()
	n := 0
	seen := map[store.SequenceKey]bool{}
	for app, lane := range q.lanes {
		if len(lane) == 0 {
			t.Fatalf("empty lane %s kept", app)
		}
		if !slices.Contains(q.order, app) {
			t.Fatalf("lane %s not in order %v", app, q.order)
		}
		for _, k := range lane {
			if seen[k] {
				t.Fatalf("key %v twice", k)
			}
			seen[k] = true
			if q.queued[k] != app {
				t.Fatalf("key %v queued under %q, in lane %q", k, q.queued[k], app)
			}
		}
		n += len(lane)
	}
	if len(q.queued) != n {
		t.Fatalf("lanes hold %d, queued %d", n, len(q.queued))
	}
	if len(q.order) != len(q.lanes) {
		t.Fatalf("order %v vs %d lanes", q.order, len(q.lanes))
	}
	if len(q.order) > 0 && (q.turn < 0 || q.turn >= len(q.order)) {
		t.Fatalf("turn %d out of %d", q.turn, len(q.order))
	}
}

// TestWakesRandomAgainstModel: random add/take/drop against a set
// model: no key lost or duplicated, front(n) is exactly what take hands out.
func TestWakesRandomAgainstModel(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		var q sequenceWakes
		model := map[store.SequenceKey]bool{}
		now := time.Unix(1000, 0)
		for step := range 200 {
			switch r.IntN(4) {
			case 0, 1:
				app := fmt.Sprintf("a%d", r.IntN(4))
				var ks []store.SequenceKey
				for range r.IntN(4) {
					k := wakeKey(app, r.IntN(12))
					ks = append(ks, k)
				}
				q.add(app, ks...)
				for _, k := range ks {
					// a key carries its app in EndpointID, so it is never
					// added under two apps.
					model[k] = true
				}
			case 2:
				now = now.Add(wakeEvery)
				front := q.front(1)
				w, _ := q.take(now)
				if len(model) == 0 {
					if len(w) != 0 {
						t.Fatalf("seed %d step %d: took %v from empty", seed, step, w)
					}
					continue
				}
				if len(w) != 1 {
					t.Fatalf("seed %d step %d: took %d", seed, step, len(w))
				}
				if !model[w[0].SequenceKey] {
					t.Fatalf("seed %d: took unqueued %v", seed, w[0])
				}
				if front[0] != w[0].SequenceKey {
					t.Fatalf("seed %d step %d: front %v, take %v", seed, step, front[0], w[0])
				}
				delete(model, w[0].SequenceKey)
			case 3:
				var ks []store.SequenceKey
				for range r.IntN(5) {
					app := fmt.Sprintf("a%d", r.IntN(4))
					ks = append(ks, wakeKey(app, r.IntN(12)))
				}
				q.drop(ks)
				for _, k := range ks {
					delete(model, k)
				}
			}
			wakeInvariants(t, &q)
			if q.len() != len(model) {
				t.Fatalf("seed %d step %d: len %d model %d", seed, step, q.len(), len(model))
			}
			// front(all) lists exactly the model's keys, and is the take order.
			front := q.front(1 << 20)
			if len(front) != len(model) {
				t.Fatalf("seed %d: front %d model %d", seed, len(front), len(model))
			}
			cp := cloneWakes(&q)
			tn := now
			for i, k := range front {
				tn = tn.Add(wakeEvery)
				w, _ := cp.take(tn)
				if len(w) != 1 || w[0].SequenceKey != k {
					t.Fatalf("seed %d step %d: front[%d]=%v, take gives %v", seed, step, i, k, w)
				}
			}
		}
	}
}

func cloneWakes(q *sequenceWakes) *sequenceWakes {
	c := &sequenceWakes{turn: q.turn, last: q.last,
		order: slices.Clone(q.order), lanes: map[string][]store.SequenceKey{}, queued: map[store.SequenceKey]string{}}
	for a, l := range q.lanes {
		c.lanes[a] = slices.Clone(l)
	}
	for k, a := range q.queued {
		c.queued[k] = a
	}
	return c
}

// TestWakesNoStarvation: app A has a backlog; before each wake
// another app queues one new key (a lane starting again). A lane that
// starts again waits behind every lane already waiting: between two of A's
// wakes no app is woken twice, and A is never passed over for good.
func TestWakesNoStarvation(t *testing.T) {
	var q sequenceWakes
	now := time.Unix(1000, 0)
	for i := range 100 {
		q.add("A", wakeKey("A", i))
	}
	q.add("B0", wakeKey("B0", 0))
	servedA := 0
	since := map[string]bool{}
	for i := range 50 {
		now = now.Add(wakeEvery)
		w, _ := q.take(now)
		if len(w) != 1 {
			t.Fatalf("wake %d: %v", i, w)
		}
		if w[0].App == "A" {
			servedA++
			clear(since)
		} else if since[w[0].App] {
			t.Fatalf("wake %d: %s woken twice since A's last", i, w[0].App)
		} else {
			since[w[0].App] = true
		}
		// Another app's single new key arrives before the next wake.
		q.add(fmt.Sprintf("B%d", i+1), wakeKey(fmt.Sprintf("B%d", i+1), 0))
	}
	// Each wake of A lets one more B lane wait (the rotation grows by one),
	// so A's k-th wake comes after about k(k+1)/2 others: 9 in 50.
	if servedA < 8 {
		t.Fatalf("A was woken %d times in 50 wakes", servedA)
	}
}
