package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// setupHandoff is setupSender with a first wait of 0s, and a running
// dispatcher (set, when not nil, configures it first) whose rounds run only
// when asked for (no poll while the test runs).
func setupHandoff(t *testing.T, answer, timeout time.Duration, set func(*Dispatcher)) (senderFixture, *Dispatcher, func()) {
	t.Helper()
	f := setupSender(t, answer, timeout)
	sched := []time.Duration{0, time.Second}
	_, _, err := f.st.PatchEndpoint(context.Background(), f.app.ID, f.ep.ID, store.EndpointPatch{RetrySchedule: &sched})
	require.NoError(t, err)
	d := &Dispatcher{
		Pool: f.st.Pool(), Client: &fakeClient{}, Logger: slog.New(slog.DiscardHandler), PollInterval: time.Hour,
		Mode: ModeSender, Sender: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)},
	}
	if set != nil {
		set(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	require.Eventually(t, func() bool { _, ok := d.Handoff(f.app.ID); return ok }, 10*time.Second, time.Millisecond, "the dispatcher runs")
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return f, d, stop
}

func (f senderFixture) publishHandoff(t *testing.T, h outbox.Handoff) outbox.Published {
	t.Helper()
	p, err := outbox.NewPublisher().PublishHandoff(context.Background(), f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)}, h)
	require.NoError(t, err)
	return p
}

func (f senderFixture) leasedUntil(t *testing.T, deliveryID string) *time.Time {
	t.Helper()
	var until *time.Time
	err := f.st.Pool().QueryRow(context.Background(), `SELECT leased_until FROM outbox WHERE delivery_id = $1`, deliveryID).Scan(&until)
	require.NoError(t, err)
	return until
}

// TestTakeSendsWithNoRound: a row its publish leased to the sender is sent
// by Take alone (no round runs: the poll is an hour away and the publish
// sent no NOTIFY), once, and its row ends.
func TestTakeSendsWithNoRound(t *testing.T) {
	f, d, stop := setupHandoff(t, 0, time.Second, nil)
	h, ok := d.Handoff(f.app.ID)
	require.True(t, ok)
	require.Empty(t, h.Skip)
	p := f.publishHandoff(t, h)
	require.Len(t, p.Leased, 1)
	require.False(t, p.Notified)
	id := p.Leased[0].DeliveryID
	d.Take(p.Leased)
	f.waitSucceeded(t, id)
	f.waitOutboxEmpty(t)
	stop()
	require.EqualValues(t, 1, f.hits.Load(), "one request: the taken row's")
	_, _, direct := d.Counts()
	require.EqualValues(t, 1, direct)
}

// TestTakePutsBackWhatItCannotSend: rows leased to a dispatcher that has
// stopped, or leased for less than their first attempt needs, go back to
// the outbox (their lease ended) with nothing sent; a stopped dispatcher
// offers no hand-off.
func TestTakePutsBackWhatItCannotSend(t *testing.T) {
	f, d, stop := setupHandoff(t, 0, time.Second, nil)
	h, _ := d.Handoff(f.app.ID)

	short := f.publishHandoff(t, outbox.Handoff{Lease: time.Millisecond})
	require.Len(t, short.Leased, 1)
	taken := d.sort(short.Leased, true, time.Now())
	require.Empty(t, taken.send, "a lease too short for the plan is not sent on")
	require.Equal(t, []int64{short.Leased[0].ID}, taken.back, "it goes back to the rounds")
	long := f.publishHandoff(t, h)
	require.Len(t, d.sort(long.Leased, true, time.Now()).send, 1, "the dispatcher's own lease is long enough")

	stop()
	_, ok := d.Handoff(f.app.ID)
	require.False(t, ok, "a stopped dispatcher takes nothing")
	late := f.publishHandoff(t, h)
	require.Len(t, late.Leased, 1)
	d.Take(late.Leased)
	require.Eventually(t, func() bool { return f.leasedUntil(t, late.Leased[0].DeliveryID) == nil }, 10*time.Second, 5*time.Millisecond,
		"rows taken after the stop go back to the rounds")
	require.Zero(t, f.hits.Load(), "nothing was sent")
}

// TestTakeLeavesHeldEndpointsRowsUntilTheProbe: once the breaker holds an
// endpoint (its one request timed out), the hand-off names it in Skip,
// with the end of its cool-down, and its new rows are written leased until
// then (Held: Take only counts them), with nothing sent; a row leased by a
// publish that did not know yet is held in the outbox until the probe too.
func TestTakeLeavesHeldEndpointsRowsUntilTheProbe(t *testing.T) {
	f, d, _ := setupHandoff(t, time.Second, 100*time.Millisecond, func(d *Dispatcher) {
		d.Sender.Breaker = &activities.Breaker{Misses: 1, Cooldown: time.Minute}
	})
	h, _ := d.Handoff(f.app.ID)
	require.Empty(t, h.Skip)
	first := f.publishHandoff(t, h)
	require.Len(t, first.Leased, 1)
	d.Take(first.Leased)
	require.Eventually(t, func() bool { h, _ := d.Handoff(f.app.ID); return len(h.Skip) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the first attempt's timeout opened the breaker")
	asked := time.Now()
	held, ok := d.Handoff(f.app.ID)
	require.True(t, ok)
	require.Equal(t, []string{f.ep.ID}, held.Skip)
	require.Len(t, held.Until, 1)
	require.WithinDuration(t, asked.Add(time.Minute), held.Until[0], 10*time.Second, "held until the cool-down's end")
	// The first delivery's row, its attempt failed, waits for the probe.
	require.Eventually(t, func() bool { return d.Held() == 1 }, 10*time.Second, 5*time.Millisecond, "the failed first attempt's row was not held")
	heldBefore := d.Held()
	p := f.publishHandoff(t, held)
	require.Len(t, p.Leased, 1)
	require.True(t, p.Leased[0].Held, "the held endpoint's row was leased to the sender")
	require.False(t, p.Notified)
	until := f.leasedUntil(t, p.Leased[0].DeliveryID)
	require.NotNil(t, until)
	require.False(t, until.Before(held.Until[0].Truncate(time.Microsecond)), "leased until %s, before the probe at %s", until, held.Until[0])
	d.Take(p.Leased)
	require.Equal(t, heldBefore+1, d.Held(), "Take did not count the row held at its publish")
	require.Equal(t, until, f.leasedUntil(t, p.Leased[0].DeliveryID), "Take changed a held row's lease")

	stale := f.publishHandoff(t, h)
	require.Len(t, stale.Leased, 1)
	before := time.Now()
	d.Take(stale.Leased)
	// Held from now until the probe, at most a minute away, plus up to two
	// tenths of that (delivery.HeldWait spreads held attempts late).
	latest := before.Add(time.Minute + time.Duration(2*delivery.JitterFraction*float64(time.Minute)) + time.Second)
	require.Eventually(t, func() bool {
		until := f.leasedUntil(t, stale.Leased[0].DeliveryID)
		return until != nil && until.After(before.Add(50*time.Second)) && until.Before(latest)
	}, 10*time.Second, 5*time.Millisecond, "held until the probe, a minute away")
	var attempts int
	require.NoError(t, f.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM attempts WHERE delivery_id = $1`, stale.Leased[0].DeliveryID).Scan(&attempts))
	require.Zero(t, attempts)
	require.EqualValues(t, 1, f.hits.Load(), "only the first delivery's request went out")
}
