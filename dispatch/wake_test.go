package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	require.NoError(t, f.d.signalWakes(ctx))
	require.Zero(t, f.d.seqWakes.len(), "ended sequences left the queue")
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
	q.add(keys...)
	q.add(keys[0])
	require.Equal(t, len(keys), q.len(), "a key queued once")
	t0 := time.Now()
	got, next := q.take(t0)
	require.Equal(t, keys[:1], got)
	require.Equal(t, t0.Add(wakeEvery), next)
	got, next = q.take(t0.Add(wakeEvery / 2))
	require.Empty(t, got, "not before wakeEvery")
	require.Equal(t, t0.Add(wakeEvery), next)
	got, _ = q.take(t0.Add(wakeEvery))
	require.Equal(t, keys[1:2], got)
	got, next = q.take(t0.Add(5 * wakeEvery))
	require.Equal(t, keys[2:], got, "one at a time, even after a pause")
	require.True(t, next.IsZero(), "none left")
	q.add(keys[0])
	require.Equal(t, 1, q.len(), "a key handed out can be queued again")
}
