package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// TestFirstAttemptOfASilentEndpointWaitsInTheOutbox: once its endpoint
// stopped answering (its breaker open), a first attempt sends nothing,
// records nothing and starts no workflow: its row waits in the outbox,
// leased until the probe, and its delivery stays pending. The failed first
// attempt that opened the breaker waits there too, with its outcome: its
// retry would be held, so its workflow starts only once a probe may go.
// Past the cool-down one of them is let out as the probe, the other waits
// for it.
func TestFirstAttemptOfASilentEndpointWaitsInTheOutbox(t *testing.T) {
	// Every request times out: the receiver answers after 1 s, the
	// endpoint's timeout is 100 ms.
	f := setupSender(t, time.Second, 100*time.Millisecond)
	ctx := context.Background()
	d, fc := runSender(t, f.st, &activities.Breaker{Misses: 1, Cooldown: 3 * time.Second})
	started := func(id string) func() bool {
		return func() bool {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return slices.Contains(fc.starts, id)
		}
	}
	count := func(query, id string) int {
		var n int
		require.NoError(t, f.st.Pool().QueryRow(ctx, query, id).Scan(&n))
		return n
	}
	const attemptsOf = `SELECT count(*) FROM attempts WHERE delivery_id = $1`
	const heldRows = `SELECT count(*) FROM outbox WHERE delivery_id = $1 AND leased_until > now()`
	first := f.publish(t)
	require.Eventually(t, func() bool { return d.Held() > 0 }, 20*time.Second, 20*time.Millisecond, "the failed first attempt was not held")
	require.Equal(t, 1, count(attemptsOf, first))
	require.Equal(t, 1, count(heldRows, first), "the failed first attempt's row is not leased until the probe")
	var outcome bool
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT outcome IS NOT NULL FROM outbox WHERE delivery_id = $1`, first).Scan(&outcome))
	require.True(t, outcome, "the held row lost its recorded outcome")
	require.False(t, started(first)(), "a failed first attempt to a held endpoint started its workflow")
	second := f.publish(t)
	require.Eventually(t, func() bool { return d.Held() > 1 }, 20*time.Second, 20*time.Millisecond, "the second delivery's first attempt was not held")
	require.Equal(t, 1, count(heldRows, second), "the held row is not leased until the probe")
	require.Zero(t, count(attemptsOf, second), "a held first attempt was recorded")
	dl, err := f.st.GetDelivery(ctx, f.app.ID, second)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusPending, dl.Status)
	require.EqualValues(t, 1, f.hits.Load(), "a held first attempt was sent")
	require.False(t, started(second)(), "a held first attempt started a workflow")
	// Past the cool-down one delivery is let out as the probe: the first
	// row goes to its workflow from its outcome, without a second send, or
	// the second row's attempt probes the endpoint; the other waits for
	// that probe (at least 5 s: its time is up, or the endpoint was held
	// again), not let out beside it.
	probed := func() bool { return count(attemptsOf, second) == 1 }
	require.Eventually(t, func() bool { return started(first)() || probed() }, 20*time.Second, 20*time.Millisecond, "no probe was let out")
	require.NotEqual(t, started(first)(), probed(), "both held deliveries were let out past the cool-down, not one probe")
	require.Equal(t, 1, count(attemptsOf, first), "the held failed attempt was sent again")
}

// TestFailedFirstAttemptWithNoRetryLeftIsNotHeld: a failed first attempt
// whose schedule has no retry left (its record planned no next attempt)
// goes to its DeliveryWorkflow at once, to be dead-lettered, even when
// its endpoint's breaker opened: there is no retry for the breaker to
// hold, and holding the row only keeps the delivery "delivering" until a
// probe may go (up to the deadline while probes fail).
func TestFailedFirstAttemptWithNoRetryLeftIsNotHeld(t *testing.T) {
	ctx := context.Background()
	st := pg.Store(t, "dispatch")
	stop := make(chan struct{})
	hits := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		// Never answers: the request times out.
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	app, err := st.CreateApp(ctx, store.App{Name: "acme"})
	require.NoError(t, err)
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: srv.URL + "/hook", Environment: "live",
		RetrySchedule: []time.Duration{0}, Deadline: time.Hour, RequestTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	f := senderFixture{st: st, app: app, ep: ep, hits: hits}
	_, fc := runSender(t, st, &activities.Breaker{Misses: 1, Cooldown: time.Hour})
	id := f.publish(t)
	require.Eventually(t, func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return slices.Contains(fc.starts, id)
	}, 15*time.Second, 20*time.Millisecond,
		"a failed first attempt with no retry left waits in the outbox for the breaker's probe instead of being dead-lettered by its workflow")
	var attempts int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM attempts WHERE delivery_id = $1`, id).Scan(&attempts))
	require.Equal(t, 1, attempts)
	require.EqualValues(t, 1, hits.Load())
}

// TestFirstAttemptWithNoAnswerWaitsForItsRetry: a first attempt that got
// no answer (it timed out), its endpoint's breaker still closed, starts no
// workflow at once: its row waits in the outbox with its recorded outcome,
// leased until MissLead before its retry is due, since its endpoint may
// have stopped answering. Once that lease lapses, the row goes to its
// workflow from the outcome, not sent again.
func TestFirstAttemptWithNoAnswerWaitsForItsRetry(t *testing.T) {
	// Every request times out: the receiver answers after 1 s, the
	// endpoint's timeout is 100 ms; the default schedule retries 5 s later.
	f := setupSender(t, time.Second, 100*time.Millisecond)
	ctx := context.Background()
	d, fc := runSender(t, f.st, &activities.Breaker{Misses: activities.BreakerMissesDefault})
	started := func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return len(fc.starts) > 0
	}
	id := f.publish(t)
	require.Eventually(t, func() bool { return d.Held() > 0 }, 20*time.Second, 20*time.Millisecond, "the first attempt with no answer was not held")
	var leased, next time.Time
	var outcome bool
	require.NoError(t, f.st.Pool().QueryRow(ctx, `
		SELECT o.leased_until, d.next_attempt_at, o.outcome IS NOT NULL
		FROM outbox o JOIN deliveries d ON d.id = o.delivery_id WHERE o.delivery_id = $1`, id).Scan(&leased, &next, &outcome))
	require.True(t, outcome, "the held row lost its recorded outcome")
	require.WithinDuration(t, next.Add(-MissLead), leased, time.Millisecond, "the row is not leased until MissLead before its retry")
	require.False(t, started(), "a first attempt with no answer started its workflow before its lease lapsed")
	require.Eventually(t, started, 20*time.Second, 20*time.Millisecond, "the held row was never handed off")
	// The row is deleted once its workflow started (handOff), not with it.
	var rows, attempts int
	require.Eventually(t, func() bool {
		err := f.st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox WHERE delivery_id = $1), (SELECT count(*) FROM attempts WHERE delivery_id = $1)`, id).Scan(&rows, &attempts)
		return err == nil && rows == 0
	}, 10*time.Second, 20*time.Millisecond, "the handed-off row was not deleted")
	require.Equal(t, 1, attempts)
	require.EqualValues(t, 1, f.hits.Load(), "the held first attempt was sent again")
}

// runSender runs a dispatcher whose sender sends from st with breaker,
// its workflow starts recorded by the returned client, until the test ends.
func runSender(t *testing.T, st *store.Store, breaker *activities.Breaker) (*Dispatcher, *fakeClient) {
	t.Helper()
	fc := &fakeClient{}
	d := &Dispatcher{
		Pool: st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler),
		Mode: ModeSender, Sender: &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler), Breaker: breaker},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d, fc
}

// TestHeldBackTakesTheProbeOnlyForAFailedRowItLetsGo: past the cool-down,
// a round's failed first attempt whose retry is due takes the probe as it
// goes to its workflow, and the endpoint's other rows wait for it; a row
// that goes on for another reason (past its deadline, to be
// dead-lettered) takes nothing, nor does a row only asked about.
func TestHeldBackTakesTheProbeOnlyForAFailedRowItLetsGo(t *testing.T) {
	f := setupSender(t, time.Second, 100*time.Millisecond)
	ctx := context.Background()
	a := &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler),
		Breaker: &activities.Breaker{Misses: 1, Cooldown: 300 * time.Millisecond}}
	d := &Dispatcher{Pool: f.st.Pool(), Logger: slog.New(slog.DiscardHandler), Mode: ModeSender, Sender: a}
	id := f.publish(t)
	var rowID int64
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT id FROM outbox WHERE delivery_id = $1`, id).Scan(&rowID))
	set := delivery.Settings{Schedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: 100 * time.Millisecond}.WithDefaults()
	now := time.Now()
	res, err := activities.SendFirst(ctx, a, activities.SendRequest{DeliveryID: id, EndpointID: f.ep.ID, Cycle: 1, Number: 1,
		Timeout: set.RequestTimeout, Settings: set, Deadline: now.Add(time.Hour), At: now}, rowID, now.Add(QueueMax))
	require.NoError(t, err)
	require.True(t, activities.Unanswered(a, res), "the first attempt did not time out: %+v", res)
	row := func(deliveryID string, created time.Time, outcome []byte) outbox.Row {
		return outbox.Row{Kind: outbox.KindStart, DeliveryID: deliveryID, EndpointID: f.ep.ID, CreatedAt: created, Settings: set, Outcome: outcome}
	}
	fresh := row("dlv_fresh", time.Now(), nil)
	require.False(t, d.heldBack(fresh, time.Now(), nil, false).IsZero(), "the breaker did not open")
	past := time.Now().Add(time.Second) // past the cool-down
	o := activities.Outcome(res, nil)
	o.Result.NextAttemptAt = past
	failed, err := json.Marshal(o)
	require.NoError(t, err)
	require.Zero(t, d.heldBack(row("dlv_late", past.Add(-2*time.Hour), failed), past, nil, true), "a row past its deadline was held")
	require.Zero(t, d.heldBack(fresh, past, nil, false), "a row was held with no probe out")
	require.Zero(t, d.heldBack(row("dlv_failed", past, failed), past, nil, true), "the failed row was held with no probe out")
	require.False(t, d.heldBack(fresh, past, nil, false).IsZero(), "a row was let out beside the failed row's probe")
	require.False(t, d.heldBack(row("dlv_failed2", past, failed), past, nil, true).IsZero(), "a second failed row was let out beside the probe")
}
