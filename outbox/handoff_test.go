package outbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// TestPublishHandoffLeasesOnlyRowsDueAtOnce: a publish with a Handoff
// leases, in its statement, the start rows whose first attempts are due at
// once, and returns them with what a sender needs; rows due later, rows of
// a paused endpoint, of a fifo endpoint and of a skipped endpoint are
// written unleased for the rounds, and only they ask for a round.
func TestPublishHandoffLeasesOnlyRowsDueAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pg.Store(t, "outbox")
	app, err := st.CreateApp(ctx, store.App{Name: "acme"})
	require.NoError(t, err)
	at := []time.Duration{0, 5 * time.Second}
	ep := func(e store.Endpoint) store.Endpoint {
		e.AppID, e.URL, e.Environment, e.Headers = app.ID, "https://example.com/hook", "live", map[string]string{}
		e.Deadline = time.Hour
		if e.RetrySchedule == nil {
			e.RetrySchedule = at
		}
		if e.RequestTimeout == 0 {
			e.RequestTimeout = 3 * time.Second
		}
		out, _, err := st.CreateEndpoint(ctx, e)
		require.NoError(t, err)
		return out
	}
	now := ep(store.Endpoint{EventTypes: []string{"order.paid"}, RequestTimeout: 7 * time.Second})
	ep(store.Endpoint{EventTypes: []string{"order.paid"}, RetrySchedule: delivery.DefaultSchedule()})
	ep(store.Endpoint{EventTypes: []string{"order.paid"}, Paused: true})
	ep(store.Endpoint{EventTypes: []string{"order.paid"}, Ordering: delivery.OrderingFIFO})
	skipped := ep(store.Endpoint{EventTypes: []string{"order.paid"}})
	alone := ep(store.Endpoint{EventTypes: []string{"order.shipped"}})
	p := outbox.NewPublisher()
	h := outbox.Handoff{Lease: 10 * time.Second, Skip: []string{skipped.ID}}

	leasedUntil := func(deliveryID string) *time.Time {
		var until *time.Time
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT leased_until FROM outbox WHERE delivery_id = $1`, deliveryID).Scan(&until))
		return until
	}
	pub, err := p.PublishHandoff(ctx, st.Pool(), app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{"n":1}`)}, h)
	require.NoError(t, err)
	require.Len(t, pub.Deliveries, 5)
	require.Len(t, pub.Leased, 1, "only the row due at once of an unpaused, unordered, unskipped endpoint")
	l := pub.Leased[0]
	require.Equal(t, now.ID, l.EndpointID)
	require.Equal(t, outbox.KindStart, l.Kind)
	require.Equal(t, app.ID, l.AppID)
	require.Equal(t, "acme", l.AppName)
	require.Equal(t, pub.ID, l.EventID)
	require.Equal(t, "order.paid", l.EventType)
	require.Equal(t, "https://example.com/hook", l.EndpointURL)
	require.Equal(t, delivery.StatusPending, l.Status)
	require.True(t, l.Exists)
	require.Equal(t, at, l.Settings.Schedule)
	require.Equal(t, time.Hour, l.Settings.Deadline)
	require.Equal(t, 7*time.Second, l.Settings.RequestTimeout)
	var id int64
	var created, until time.Time
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id, created_at, leased_until FROM outbox WHERE delivery_id = $1`, l.DeliveryID).Scan(&id, &created, &until))
	require.Equal(t, id, l.ID)
	require.True(t, created.Equal(l.CreatedAt), "created %s, returned %s", created, l.CreatedAt)
	require.True(t, until.Equal(l.Until), "leased until %s, returned %s", until, l.Until)
	require.Equal(t, 17*time.Second, until.Sub(created), "the lease is Lease past the request timeout, from the publish")
	for _, d := range pub.Deliveries {
		if d.EndpointID != now.ID {
			require.Nil(t, leasedUntil(d.ID), "the row of endpoint %s is left to the rounds", d.EndpointID)
		}
	}
	require.True(t, pub.Notified, "the unleased rows ask for a round")
	require.False(t, pub.ClaimBy.IsZero())

	// Every row leased: no round is asked for.
	pub, err = p.PublishHandoff(ctx, st.Pool(), app.ID, outbox.Event{Type: "order.shipped", Data: json.RawMessage(`{}`)}, h)
	require.NoError(t, err)
	require.Len(t, pub.Leased, 1)
	require.Equal(t, alone.ID, pub.Leased[0].EndpointID)
	require.False(t, pub.Notified, "no NOTIFY for rows the sender holds")
	_, ok := pub.WakeAt()
	require.False(t, ok, "and no round asked for")

	// Without a Handoff nothing is leased.
	pub, err = p.PublishNow(ctx, st.Pool(), app.ID, outbox.Event{Type: "order.shipped", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Nil(t, pub.Leased)
	require.Nil(t, leasedUntil(pub.Deliveries[0].ID))

	// A repeat leases nothing more.
	ev := outbox.Event{ID: "evt-once", Type: "order.shipped", Data: json.RawMessage(`{}`)}
	_, err = p.PublishHandoff(ctx, st.Pool(), app.ID, ev, h)
	require.NoError(t, err)
	pub, err = p.PublishHandoff(ctx, st.Pool(), app.ID, ev, h)
	require.NoError(t, err)
	require.True(t, pub.Duplicate)
	require.Nil(t, pub.Leased)
}

// TestPublishHandoffHoldsRowsUntilTheProbe: a row of an endpoint the
// sender's breaker holds until a later time (Handoff.Until) is written
// leased until then, spread over the next fifth of the time left, never
// past its last start, and returned Held, not for the sender; it asks for
// no round. A paused endpoint's row is held by its pause instead, an
// ordered delivery's goes to its sequencer, and a row of an endpoint
// whose probe may go now (zero) goes to the rounds.
func TestPublishHandoffHoldsRowsUntilTheProbe(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	held := f.endpoint(t, store.Endpoint{})
	short := f.endpoint(t, store.Endpoint{Deadline: 10 * time.Second})
	paused := f.endpoint(t, store.Endpoint{Paused: true})
	fifo := f.endpoint(t, store.Endpoint{Ordering: delivery.OrderingFIFO})
	probeNow := f.endpoint(t, store.Endpoint{})
	probe := time.Now().Add(time.Minute)
	h := outbox.Handoff{Lease: 10 * time.Second,
		Skip:  []string{held.ID, short.ID, paused.ID, fifo.ID, probeNow.ID},
		Until: []time.Time{probe, probe, probe, probe, {}}}
	p := outbox.NewPublisher()
	pub := f.publish(t, p, "", h)
	require.Len(t, pub.Deliveries, 5)
	heldRows := map[string]outbox.Leased{}
	for _, l := range pub.Leased {
		require.True(t, l.Held, "a row of a held endpoint was leased to the sender: %s", l.EndpointID)
		heldRows[l.EndpointID] = l
	}
	require.Len(t, heldRows, 2, "only the rows of the endpoints held past the publish, neither paused nor ordered")
	for _, d := range pub.Deliveries {
		r := f.row(t, d.ID)
		switch d.EndpointID {
		case held.ID:
			require.True(t, r.until.Equal(heldRows[held.ID].Until))
			require.False(t, r.until.Before(probe.Truncate(time.Microsecond)), "back before the probe: %s < %s", r.until, probe)
			require.False(t, r.until.After(probe.Add(probe.Sub(r.created)/5)), "held more than a fifth of the time left past the probe")
		case short.ID:
			require.Equal(t, 7*time.Second, r.until.Sub(r.created), "held past its last start (deadline less request timeout)")
		case paused.ID:
			require.True(t, r.paused)
			require.Nil(t, r.until)
		default:
			require.Nil(t, r.until, "the row of %s is left to the rounds", d.EndpointID)
		}
	}
	require.True(t, pub.Notified, "the ordered and the probe's rows ask for a round")

	// Only held rows: no round is asked for; the holds are spread.
	untils := map[time.Time]bool{}
	for range 10 {
		pub = f.publish(t, p, held.ID, h)
		require.Len(t, pub.Leased, 1)
		require.True(t, pub.Leased[0].Held)
		require.False(t, pub.Notified, "a held row woke the dispatchers")
		_, ok := pub.WakeAt()
		require.False(t, ok, "a held row asked for a round")
		untils[pub.Leased[0].Until] = true
	}
	require.Greater(t, len(untils), 1, "ten held rows come back at one time")
}

// BenchmarkPublishHandoff is one publish with a Handoff to one endpoint
// (statement and commit, prepared as the API's are): its row leased to
// the sender (sender), or written leased until its endpoint's probe
// (held), beside another endpoint the breaker holds.
func BenchmarkPublishHandoff(b *testing.B) {
	ctx := context.Background()
	f := newHoldFixture(b)
	eps := make([]store.Endpoint, 3)
	for i := range eps {
		eps[i] = f.endpoint(b, store.Endpoint{})
	}
	p := outbox.NewPublisher()
	probe := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name string
		to   string
		h    outbox.Handoff
	}{
		{"sender", eps[0].ID, outbox.Handoff{Lease: 10 * time.Second}},
		{"sender_beside_held", eps[0].ID, outbox.Handoff{Lease: 10 * time.Second, Skip: []string{eps[2].ID}, Until: []time.Time{probe}}},
		{"held", eps[1].ID, outbox.Handoff{Lease: 10 * time.Second, Skip: []string{eps[1].ID, eps[2].ID}, Until: []time.Time{probe, probe}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				pub, err := p.PublishHandoff(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Endpoint: c.to, Data: json.RawMessage(`{}`)}, c.h)
				require.NoError(b, err)
				require.Len(b, pub.Leased, 1)
			}
		})
	}
}
