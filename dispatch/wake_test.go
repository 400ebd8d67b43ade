package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
	"hookrelay/workflows"
)

// TestLingerEndsForARoundAskedNow: the linger after a round ends as soon
// as a NOTIFY asks for a round now (that round runs at once); a round
// asked for later does not end it.
func TestLingerEndsForARoundAskedNow(t *testing.T) {
	t.Parallel()
	w := &wakeup{signal: make(chan struct{}, 1)}
	ctx := context.Background()

	w.request(time.Now().Add(time.Hour))
	ended := make(chan bool)
	go func() { ended <- w.sleep(ctx, time.Now().Add(time.Hour), 0) }()
	select {
	case <-ended:
		t.Fatal("a round asked for in an hour ended the linger")
	case <-time.After(50 * time.Millisecond):
	}
	require.False(t, w.due())
	w.request(time.Now())
	require.True(t, <-ended, "a round asked for now ends the linger")
	require.True(t, w.due())
	w.take()
	require.False(t, w.due())
}

// TestWakeClaimsARowNoNotifyAnnounced: a row that became claimable with no
// NOTIFY (its publish counted on a round that had already claimed) waits
// for the poll, here an hour, unless this process's API asks for a round
// by its claim time (Wake); then the dispatcher takes it.
func TestWakeClaimsARowNoNotifyAnnounced(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	ctx := context.Background()
	_, ids := f.app(t, "woken", 1)
	// Leased, the row is not claimable: the first rounds find nothing.
	_, err := f.st.Pool().Exec(ctx, `UPDATE outbox SET leased_until = now() + interval '1 hour'`)
	require.NoError(t, err)
	f.d.PollInterval = time.Hour
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.d.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	started := func() bool {
		f.fc.mu.Lock()
		defer f.fc.mu.Unlock()
		return slices.Contains(f.fc.starts, ids[0])
	}
	require.Never(t, started, 300*time.Millisecond, 20*time.Millisecond, "a leased row was started")

	// Claimable now, announced by no NOTIFY: no round comes for it.
	var claimBy time.Time
	require.NoError(t, f.st.Pool().QueryRow(ctx, `UPDATE outbox SET leased_until = NULL RETURNING claim_by`).Scan(&claimBy))
	require.Never(t, started, 300*time.Millisecond, 20*time.Millisecond, "a round came with no NOTIFY, no poll and no Wake")

	f.d.Wake(claimBy)
	require.Eventually(t, started, 10*time.Second, 20*time.Millisecond, "Wake asked for the round that takes it")
}

// TestWakeSignalsABoundedNumberOfSequencesPerSecond: a round that claims
// the rows of more ordered keys than SequenceWakesPerSecond signals that
// many sequencers, on the sequencers' own task queue, and queues the
// others, their rows still leased to their sequences; later rounds signal
// the rest, no key twice.
func TestWakeSignalsABoundedNumberOfSequencesPerSecond(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	ctx := context.Background()
	app, err := f.st.CreateApp(ctx, store.App{Name: "ordered"})
	require.NoError(t, err)
	_, _, err = f.st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "http://127.0.0.1:9/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second, Ordering: delivery.OrderingFIFO})
	require.NoError(t, err)
	keys := SequenceWakesPerSecond + 10
	for i := range keys {
		_, err := outbox.PublishNow(ctx, f.st.Pool(), app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: fmt.Sprintf("k%03d", i)})
		require.NoError(t, err)
	}
	signaled := func() map[string]int {
		f.fc.mu.Lock()
		defer f.fc.mu.Unlock()
		n := map[string]int{}
		for _, s := range f.fc.signals {
			n[s]++
		}
		return n
	}
	start := time.Now()
	_, err = f.d.dispatch(ctx, 10*keys)
	require.NoError(t, err)
	require.Len(t, signaled(), 1, "one wake now")
	require.Equal(t, keys-1, f.d.seqWakes.len(), "the other keys wait in the queue")
	f.fc.mu.Lock()
	require.Equal(t, workflows.SequencerQueue(workflows.TaskQueue), f.fc.lastQueue, "sequencers run on their own task queue")
	f.fc.mu.Unlock()
	var leased int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE leased_until > now() + interval '5 minutes'`).Scan(&leased))
	require.Equal(t, keys, leased, "every row stays leased to its sequence")

	require.Eventually(t, func() bool {
		_, err := f.d.dispatch(ctx, 10*keys)
		require.NoError(t, err)
		return len(signaled()) == keys
	}, 10*time.Second, 20*time.Millisecond, "later rounds signal the rest")
	require.GreaterOrEqual(t, time.Since(start), time.Duration(keys-1)*wakeEvery, "one every wakeEvery")
	for s, n := range signaled() {
		require.Equal(t, 1, n, "%s signaled once", s)
	}

	// Queued keys whose sequences ended meanwhile (here: their app was
	// deleted) leave the queue unsignaled, taking no second's wakes.
	gone, err := f.st.CreateApp(ctx, store.App{Name: "gone"})
	require.NoError(t, err)
	_, _, err = f.st.CreateEndpoint(ctx, store.Endpoint{AppID: gone.ID, URL: "http://127.0.0.1:9/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second, Ordering: delivery.OrderingFIFO})
	require.NoError(t, err)
	for i := range 3 * SequenceWakesPerSecond {
		_, err := outbox.PublishNow(ctx, f.st.Pool(), gone.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: fmt.Sprintf("g%03d", i)})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, err := f.d.dispatch(ctx, 10*keys)
		require.NoError(t, err)
		return f.d.seqWakes.len() > 0
	}, 10*time.Second, 50*time.Millisecond, "the gone app's keys queue")
	before := len(signaled())
	require.NoError(t, f.st.DeleteApp(ctx, gone.ID))
	require.Eventually(t, func() bool {
		require.NoError(t, f.d.signalWakes(ctx))
		return f.d.seqWakes.len() == 0
	}, time.Second, 10*time.Millisecond, "ended sequences left the queue when the next wake was due")
	require.Equal(t, before, len(signaled()), "and were not signaled")
}

// TestSequenceWakesHandOutAPaceOfSequencesPerSecond: the queue hands out
// one key per wakeEvery, in the order queued, says when the next may go
// while keys wait, and queues a key once.
func TestSequenceWakesHandOutAPaceOfSequencesPerSecond(t *testing.T) {
	t.Parallel()
	var q sequenceWakes
	var keys []store.SequenceKey
	for i := range 3 {
		keys = append(keys, store.SequenceKey{EndpointID: "ep_1", OrderingKey: fmt.Sprint(i)})
	}
	q.add("app_1", keys...)
	q.add("app_1", keys[0])
	require.Equal(t, len(keys), q.len(), "a key queued once")
	t0 := time.Now()
	got, next := q.take(t0)
	require.Equal(t, keys[:1], wakeKeys(got))
	require.Equal(t, "app_1", got[0].App)
	require.Equal(t, t0.Add(wakeEvery), next)
	got, next = q.take(t0.Add(wakeEvery / 2))
	require.Empty(t, got, "not before wakeEvery")
	require.Equal(t, t0.Add(wakeEvery), next)
	got, _ = q.take(t0.Add(wakeEvery))
	require.Equal(t, keys[1:2], wakeKeys(got))
	got, next = q.take(t0.Add(5 * wakeEvery))
	require.Equal(t, keys[2:], wakeKeys(got), "one at a time, even after a pause")
	require.True(t, next.IsZero(), "none left")
	q.add("app_1", keys[0])
	require.Equal(t, 1, q.len(), "a key handed out can be queued again")
}

func wakeKeys(ws []sequenceWake) []store.SequenceKey {
	var out []store.SequenceKey
	for _, w := range ws {
		out = append(out, w.SequenceKey)
	}
	return out
}

// TestSequenceWakesTakeAppsInTurn: an app with a thousand new keys queued
// delays another app's keys by one wake each, not by its whole queue; a
// dropped key leaves its lane, an emptied lane leaves the turns, and front
// lists keys in the order take hands them out.
func TestSequenceWakesTakeAppsInTurn(t *testing.T) {
	t.Parallel()
	var q sequenceWakes
	key := func(app string, i int) store.SequenceKey {
		return store.SequenceKey{EndpointID: "ep_" + app, OrderingKey: fmt.Sprint(i)}
	}
	for i := range 1000 {
		q.add("big", key("big", i))
	}
	q.add("small", key("small", 0), key("small", 1))
	q.add("third", key("third", 0))
	require.Equal(t, []store.SequenceKey{key("big", 0), key("small", 0), key("third", 0), key("big", 1), key("small", 1), key("big", 2)}, q.front(6))
	q.drop([]store.SequenceKey{key("small", 0)})
	at := time.Now()
	var order []sequenceWake
	for range 6 {
		at = at.Add(wakeEvery)
		got, _ := q.take(at)
		require.Len(t, got, 1)
		order = append(order, got[0])
	}
	require.Equal(t, []store.SequenceKey{key("big", 0), key("small", 1), key("third", 0), key("big", 1), key("big", 2), key("big", 3)}, wakeKeys(order))
	require.Equal(t, 996, q.len())
	q.add("small", key("small", 7))
	got, _ := q.take(at.Add(wakeEvery))
	require.Equal(t, key("big", 4), got[0].SequenceKey, "a lane that starts again waits its turn")
	got, _ = q.take(at.Add(2 * wakeEvery))
	require.Equal(t, key("small", 7), got[0].SequenceKey)
	q.drop(q.front(q.len()))
	require.Zero(t, q.len())
	got, next := q.take(at.Add(time.Hour))
	require.Empty(t, got)
	require.True(t, next.IsZero())
}

// TestWakeTakesAppsInTurn: on the real dispatcher, an app whose 200 new
// ordering keys wait for their sequencers' wakes delays another app's new
// key by one wake, not by its queue (200 × wakeEvery = 12.5 s).
func TestWakeTakesAppsInTurn(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	ctx := context.Background()
	fifo := func(name string) (appID, epID string) {
		app, err := f.st.CreateApp(ctx, store.App{Name: name})
		require.NoError(t, err)
		ep, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "http://127.0.0.1:9/hook", Environment: "live",
			RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second, Ordering: delivery.OrderingFIFO})
		require.NoError(t, err)
		return app.ID, ep.ID
	}
	bigApp, _ := fifo("big")
	smallApp, small := fifo("small")
	for i := range 200 {
		_, err := outbox.PublishNow(ctx, f.st.Pool(), bigApp, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: fmt.Sprintf("k%03d", i)})
		require.NoError(t, err)
	}
	_, err := f.d.dispatch(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, 199, f.d.seqWakes.len())
	_, err = outbox.PublishNow(ctx, f.st.Pool(), smallApp, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: "mine"})
	require.NoError(t, err)
	want := workflows.SequencerID(small, "mine")
	start := time.Now()
	require.Eventually(t, func() bool {
		_, err := f.d.dispatch(ctx, 1000)
		require.NoError(t, err)
		f.fc.mu.Lock()
		defer f.fc.mu.Unlock()
		return slices.ContainsFunc(f.fc.signals, func(s string) bool { return strings.HasPrefix(s, want+":") })
	}, 10*time.Second, 10*time.Millisecond, "the other app's key is woken in its turn")
	f.fc.mu.Lock()
	n := len(f.fc.signals)
	f.fc.mu.Unlock()
	require.LessOrEqual(t, n, 3, "after at most one more of the big app's keys")
	t.Logf("the other app's key woken after %s, %d wakes in all", time.Since(start).Round(time.Millisecond), n)
}
