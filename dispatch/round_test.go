package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// roundFixture is a database with apps and endpoints whose rows a
// dispatcher without a sender (one DeliveryWorkflow per delivery) claims
// round by round, against a fake Temporal.
type roundFixture struct {
	st *store.Store
	fc *fakeClient
	d  *Dispatcher
}

func newRound(t *testing.T) roundFixture {
	t.Helper()
	st := pg.Store(t, "round")
	fc := &fakeClient{}
	d := &Dispatcher{Pool: st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler)}
	d.SetCarrierSize(1) // as Run does: one DeliveryWorkflow per delivery
	return roundFixture{st: st, fc: fc, d: d}
}

// app creates an app with one endpoint and publishes n events to it,
// returning their delivery IDs in acceptance order.
func (f roundFixture) app(t *testing.T, name string, n int) (string, []string) {
	t.Helper()
	ctx := context.Background()
	app, err := f.st.CreateApp(ctx, store.App{Name: name})
	require.NoError(t, err)
	_, _, err = f.st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "http://127.0.0.1:9/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	var ids []string
	for range n {
		p, err := outbox.PublishNow(ctx, f.st.Pool(), app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		ids = append(ids, p.Deliveries[0].ID)
	}
	return app.ID, ids
}

func (f roundFixture) outboxRows(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, f.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n))
	return n
}

// TestRoundIsFairAcrossApps: a flood of one app's rows does not keep
// another app's row out of the next round: rounds take each app's oldest
// rows in turn.
func TestRoundIsFairAcrossApps(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	_, flood := f.app(t, "flood", 120)
	_, quiet := f.app(t, "quiet", 1)
	n, err := f.d.dispatch(context.Background(), 20)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	require.Contains(t, f.fc.starts, quiet[0], "the quiet app's row was in the first round")
	require.ElementsMatch(t, flood[:19], slices.DeleteFunc(slices.Clone(f.fc.starts), func(id string) bool { return id == quiet[0] }),
		"the flood's oldest rows (starts run concurrently, so in any order)")
	require.Equal(t, 101, f.outboxRows(t), "started rows left the outbox, the rest wait")
}

// TestRoundSignalsReplaysAndCancels: a replay row is a signal-with-start
// carrying the replay's ID (its outbox row's), so a row dispatched twice
// runs one cycle; a cancel row is a cancel signal, and a cancel of a
// workflow that no longer exists is done, not retried.
func TestRoundSignalsReplaysAndCancels(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	ctx := context.Background()
	appID, ids := f.app(t, "acme", 1)
	id := ids[0]
	_, err := f.d.dispatch(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []string{id}, f.fc.starts)

	_, err = f.st.MarkDelivery(ctx, store.Mark{DeliveryID: id, Status: delivery.StatusDeadLettered, Reason: "test", Cycle: 1})
	require.NoError(t, err)
	queued, err := store.ReplayDeliveries(ctx, f.st.Pool(), appID, []string{id}, "key_1", "operator")
	require.NoError(t, err)
	require.Equal(t, []string{id}, queued)
	var replayRow int64
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT id FROM outbox WHERE delivery_id = $1`, id).Scan(&replayRow))
	_, err = f.d.dispatch(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []string{id + ":replay"}, f.fc.signals)
	require.Len(t, f.fc.replays, 1)
	require.Equal(t, replayRow, f.fc.replays[0].ReplayID)
	require.Equal(t, "key_1", f.fc.replays[0].By)
	require.Zero(t, f.outboxRows(t))

	require.NoError(t, store.CancelWorkflows(ctx, f.st.Pool(), []string{id}, "endpoint disabled"))
	f.fc.err = serviceerror.NewNotFound("workflow not found")
	_, err = f.d.dispatch(ctx, 10)
	require.NoError(t, err, "a cancel that finds no workflow is done")
	require.Zero(t, f.outboxRows(t))
}

// TestFailedStartKeepsItsRow: a start Temporal refused stays in the outbox
// and is started by a later round; nothing is lost and nothing is started
// twice.
func TestFailedStartKeepsItsRow(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	ctx := context.Background()
	_, ids := f.app(t, "acme", 3)
	f.fc.err = errors.New("temporal unavailable")
	_, err := f.d.dispatch(ctx, 10)
	require.Error(t, err)
	require.Equal(t, 3, f.outboxRows(t), "refused starts keep their rows")
	f.fc.err = nil
	_, err = f.d.dispatch(ctx, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, f.fc.starts)
	require.Zero(t, f.outboxRows(t))
	n, err := f.d.dispatch(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, f.fc.starts, 3, "no start twice")
}

// TestRoundWakesEachSequenceOnce: a round that claims several rows of one
// ordered sequence wakes its sequencer once and leases the rows to it (the
// next round claims none of them); a sequence a run holds gets no signal.
func TestRoundWakesEachSequenceOnce(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	ctx := context.Background()
	app, err := f.st.CreateApp(ctx, store.App{Name: "ordered"})
	require.NoError(t, err)
	ep, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "http://127.0.0.1:9/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second, Ordering: delivery.OrderingFIFO})
	require.NoError(t, err)
	publish := func(key string) {
		_, err := outbox.PublishNow(ctx, f.st.Pool(), app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: key})
		require.NoError(t, err)
	}
	for range 3 {
		publish("a")
		publish("b")
	}
	n, err := f.d.dispatch(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	// The second sequence's wake goes wakeEvery after the first's.
	require.Eventually(t, func() bool {
		require.NoError(t, f.d.signalWakes(ctx))
		return f.d.seqWakes.len() == 0
	}, 5*time.Second, 10*time.Millisecond)
	slices.Sort(f.fc.signals)
	require.Equal(t, []string{"sequencer/" + ep.ID + "/a:wake", "sequencer/" + ep.ID + "/b:wake"}, f.fc.signals, "one wake per sequence")
	require.Empty(t, f.fc.starts, "the dispatcher starts no delivery workflow of an ordered delivery")
	require.Equal(t, 6, f.outboxRows(t), "the rows stay for the sequencer")
	n, err = f.d.dispatch(ctx, 100)
	require.NoError(t, err)
	require.Zero(t, n, "leased to the sequencer")

	// A run holds sequence a: a new row of it wakes nobody.
	held, err := store.LeaseSequence(ctx, f.st.Pool(), ep.ID, "a", "run-1", time.Minute)
	require.NoError(t, err)
	require.True(t, held)
	publish("a")
	f.fc.signals = nil
	n, err = f.d.dispatch(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, f.fc.signals, "the run that holds it reads the row")
	taken, err := store.LeaseSequence(ctx, f.st.Pool(), ep.ID, "a", "run-2", time.Minute)
	require.NoError(t, err)
	require.False(t, taken, "one run holds a sequence at a time")
}
