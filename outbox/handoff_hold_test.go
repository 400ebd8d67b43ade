package outbox_test

import (
	"cmp"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// holdFixture is an app with helpers to make endpoints and read rows.
type holdFixture struct {
	st  *store.Store
	app store.App
}

func newHoldFixture(tb testing.TB) holdFixture {
	tb.Helper()
	st := pg.Store(tb, "outbox")
	app, err := st.CreateApp(context.Background(), store.App{Name: "acme"})
	require.NoError(tb, err)
	return holdFixture{st: st, app: app}
}

// endpoint makes an endpoint of e for order.paid: a first wait of 0 then
// 5 s, a 3 s request timeout and an hour's deadline, unless e sets them.
func (f holdFixture) endpoint(tb testing.TB, e store.Endpoint) store.Endpoint {
	tb.Helper()
	e.AppID, e.URL, e.Environment, e.Headers, e.EventTypes = f.app.ID, "https://example.com/hook", "live", map[string]string{}, []string{"order.paid"}
	if e.RetrySchedule == nil {
		e.RetrySchedule = []time.Duration{0, 5 * time.Second}
	}
	e.RequestTimeout, e.Deadline = cmp.Or(e.RequestTimeout, 3*time.Second), cmp.Or(e.Deadline, time.Hour)
	out, _, err := f.st.CreateEndpoint(context.Background(), e)
	require.NoError(tb, err)
	return out
}

// raw stores e's deadline_ms and request_timeout_ms as given (may be 0,
// which the API never stores) and returns e.
func (f holdFixture) raw(t *testing.T, e store.Endpoint, deadlineMS, timeoutMS int64) store.Endpoint {
	t.Helper()
	_, err := f.st.Pool().Exec(context.Background(), `UPDATE endpoints SET deadline_ms = $2, request_timeout_ms = $3 WHERE id = $1`, e.ID, deadlineMS, timeoutMS)
	require.NoError(t, err)
	return e
}

// heldRow is a delivery's outbox row: its creation, its lease, and
// whether it is held by its endpoint's pause.
type heldRow struct {
	created time.Time
	until   *time.Time
	paused  bool
}

func (f holdFixture) row(t *testing.T, deliveryID string) heldRow {
	t.Helper()
	var r heldRow
	require.NoError(t, f.st.Pool().QueryRow(context.Background(), `SELECT created_at, leased_until, held FROM outbox WHERE delivery_id = $1`, deliveryID).
		Scan(&r.created, &r.until, &r.paused))
	return r
}

func (f holdFixture) publish(t *testing.T, p *outbox.Publisher, endpoint string, h outbox.Handoff) outbox.Published {
	t.Helper()
	pub, err := p.PublishHandoff(context.Background(), f.st.Pool(), f.app.ID,
		outbox.Event{Type: "order.paid", Endpoint: endpoint, Data: json.RawMessage(`{}`)}, h)
	require.NoError(t, err)
	return pub
}

// TestHoldDefaultsAndCap: stored deadline/timeout of 0 take the
// defaults in the cap (75 min / 10 s); a deadline of 40 s with a default
// timeout caps the hold at created+30 s; a deadline equal to the timeout
// leaves the row to the rounds (and wakes them).
func TestHoldDefaultsAndCap(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	zero := f.raw(t, f.endpoint(t, store.Endpoint{}), 0, 0)
	short := f.raw(t, f.endpoint(t, store.Endpoint{}), 40_000, 0)
	equal := f.raw(t, f.endpoint(t, store.Endpoint{}), 3_000, 3_000)
	probe := time.Now().Add(time.Minute)
	h := outbox.Handoff{Lease: 10 * time.Second, Skip: []string{zero.ID, short.ID, equal.ID}, Until: []time.Time{probe, probe, probe}}

	pz := f.publish(t, p, zero.ID, h)
	require.Len(t, pz.Leased, 1)
	require.True(t, pz.Leased[0].Held)
	r := f.row(t, pz.Deliveries[0].ID)
	require.False(t, r.until.Before(probe.Truncate(time.Microsecond)), "zero deadline/timeout: held short of the probe: %s", r.until)
	require.Zero(t, pz.Leased[0].Settings.Deadline, "raw settings are returned as stored")

	ps := f.publish(t, p, short.ID, h)
	require.Len(t, ps.Leased, 1)
	r = f.row(t, ps.Deliveries[0].ID)
	require.Equal(t, 40*time.Second-delivery.RequestTimeoutDefault, r.until.Sub(r.created), "cap: deadline less the default timeout")
	// The cap is the dispatcher's own last start for that row.
	set := ps.Leased[0].Settings.WithDefaults()
	require.True(t, r.until.Equal(set.LastStart(ps.Leased[0].CreatedAt.Add(set.Deadline))), "cap differs from Settings.LastStart")

	pe := f.publish(t, p, equal.ID, h)
	require.Empty(t, pe.Leased, "deadline == timeout leaves no attempt: not held")
	require.Nil(t, f.row(t, pe.Deliveries[0].ID).until)
	_, wake := pe.WakeAt()
	require.True(t, pe.Notified || wake, "its row goes to the rounds, which must be woken")
}

// TestHoldSpreadEndsBeforeTheLastStart: a probe 27 s away for rows whose
// last start is 30 s away (deadline 40 s, default timeout): every lease
// ends at the probe or after it, and no later than a second
// (delivery.HeldLead) before the last start, though the spread (up to
// 32.4 s) would take most past it; a round must still take the row and
// start its attempt before then.
func TestHoldSpreadEndsBeforeTheLastStart(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	ep := f.raw(t, f.endpoint(t, store.Endpoint{}), 40_000, 0)
	last := 40*time.Second - delivery.RequestTimeoutDefault
	var capped int
	for range 12 {
		probe := time.Now().Add(27 * time.Second)
		pub := f.publish(t, p, ep.ID, outbox.Handoff{Lease: 10 * time.Second, Skip: []string{ep.ID}, Until: []time.Time{probe}})
		require.Len(t, pub.Leased, 1)
		require.True(t, pub.Leased[0].Held)
		r := f.row(t, pub.Deliveries[0].ID)
		held := r.until.Sub(r.created)
		require.GreaterOrEqual(t, held, 27*time.Second-time.Second, "leased short of the probe")
		require.LessOrEqual(t, held, last-delivery.HeldLead, "spread past the last start less the lead")
		if held == last-delivery.HeldLead {
			capped++
		}
	}
	require.Positive(t, capped, "no spread reached the cap: the case does not test it")
}

// TestHandoffArraysShapes: Until nil, shorter than Skip, in the past,
// and a Skip naming an endpoint twice: no error, at most one outbox row per
// delivery, and only a future Until holds.
func TestHandoffArraysShapes(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	a := f.endpoint(t, store.Endpoint{})
	b := f.endpoint(t, store.Endpoint{})
	probe := time.Now().Add(time.Minute)
	cases := []struct {
		name string
		h    outbox.Handoff
		held map[string]bool
	}{
		{"nil until", outbox.Handoff{Lease: time.Second, Skip: []string{a.ID, b.ID}}, map[string]bool{}},
		{"short until", outbox.Handoff{Lease: time.Second, Skip: []string{a.ID, b.ID}, Until: []time.Time{probe}}, map[string]bool{a.ID: true}},
		{"past until", outbox.Handoff{Lease: time.Second, Skip: []string{a.ID, b.ID}, Until: []time.Time{time.Now().Add(-time.Second), {}}}, map[string]bool{}},
		{"duplicate skip", outbox.Handoff{Lease: time.Second, Skip: []string{a.ID, a.ID, b.ID}, Until: []time.Time{probe, probe.Add(time.Minute), {}}}, map[string]bool{a.ID: true}},
	}
	for _, c := range cases {
		pub := f.publish(t, p, "", c.h)
		require.Len(t, pub.Deliveries, 2, c.name)
		var n int
		require.NoError(t, f.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox o JOIN deliveries d ON d.id = o.delivery_id WHERE d.event_id = $1`, pub.ID).Scan(&n))
		require.Equal(t, 2, n, "%s: one row per delivery", c.name)
		got := map[string]bool{}
		for _, l := range pub.Leased {
			require.True(t, l.Held, "%s: a skipped endpoint's row leased to the sender", c.name)
			got[l.EndpointID] = true
		}
		require.Equal(t, c.held, got, c.name)
		for _, d := range pub.Deliveries {
			if !c.held[d.EndpointID] {
				require.Nil(t, f.row(t, d.ID).until, "%s: unheld skipped row is leased", c.name)
			}
		}
		if len(c.held) < 2 {
			require.True(t, pub.Notified || !pub.ClaimBy.IsZero(), "%s: an unleased row asked for no round", c.name)
		}
	}
}

// TestMixedHeldAndSender: one publish with a sender-leased row and a
// held one returns both, flagged apart; a held row with an unleased row
// still wakes the rounds.
func TestMixedHeldAndSender(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	f.endpoint(t, store.Endpoint{}) // its row goes to the sender
	held := f.endpoint(t, store.Endpoint{})
	later := f.endpoint(t, store.Endpoint{RetrySchedule: []time.Duration{30 * time.Second, 5 * time.Second}}) // first wait 30 s: unleased
	probe := time.Now().Add(time.Minute)
	pub := f.publish(t, p, "", outbox.Handoff{Lease: 10 * time.Second, Skip: []string{held.ID}, Until: []time.Time{probe}})
	require.Len(t, pub.Leased, 2)
	for _, l := range pub.Leased {
		require.Equal(t, l.EndpointID == held.ID, l.Held, l.EndpointID)
		require.NotEqual(t, later.ID, l.EndpointID)
	}
	_, wake := pub.WakeAt()
	require.True(t, pub.Notified || wake, "the unleased row of %s is not woken", later.ID)
}

// TestClaimByIgnoresHeldRows: the wake-up time of a publish (ClaimBy
// and the NOTIFY payload) is that of its unleased rows; a held row (due at
// once, but leased until its probe) should not pull it earlier.
func TestClaimByIgnoresHeldRows(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	held := f.endpoint(t, store.Endpoint{})
	later := f.endpoint(t, store.Endpoint{RetrySchedule: []time.Duration{30 * time.Second, 5 * time.Second}})
	probe := time.Now().Add(time.Minute)
	h := outbox.Handoff{Lease: 10 * time.Second, Skip: []string{held.ID}, Until: []time.Time{probe}}
	alone := f.publish(t, p, later.ID, h)
	require.False(t, alone.ClaimBy.IsZero())
	both := f.publish(t, p, "", h)
	require.Len(t, both.Leased, 1)
	require.True(t, both.Leased[0].Held)
	require.False(t, both.ClaimBy.IsZero())
	require.WithinDuration(t, alone.ClaimBy, both.ClaimBy, time.Second,
		"a held row pulled the unleased row's claim-by from %s to %s", alone.ClaimBy, both.ClaimBy)
}

// TestClaimByIgnoresPausedRows: a paused endpoint's row, which no round
// claims, does not pull the claim time (and the NOTIFY's) of the event's
// other rows earlier, whatever its own first wait.
func TestClaimByIgnoresPausedRows(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	later := f.endpoint(t, store.Endpoint{RetrySchedule: []time.Duration{30 * time.Second, 5 * time.Second}})
	alone := f.publish(t, p, later.ID, outbox.Handoff{})
	require.False(t, alone.ClaimBy.IsZero())
	f.endpoint(t, store.Endpoint{Paused: true}) // a first wait of 0
	both := f.publish(t, p, "", outbox.Handoff{})
	require.Len(t, both.Deliveries, 2)
	require.WithinDuration(t, alone.ClaimBy, both.ClaimBy, time.Second,
		"a paused row pulled the claim-by from %s to %s", alone.ClaimBy, both.ClaimBy)
}

// TestHeldRowIsClaimedOnceItsLeaseLapses: a row held at publish is
// invisible to the round and the look until its lease lapses, then both
// take it.
func TestHeldRowIsClaimedOnceItsLeaseLapses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	held := f.endpoint(t, store.Endpoint{})
	pub := f.publish(t, p, held.ID, outbox.Handoff{Lease: 10 * time.Second, Skip: []string{held.ID}, Until: []time.Time{time.Now().Add(700 * time.Millisecond)}})
	require.Len(t, pub.Leased, 1)
	require.True(t, pub.Leased[0].Held)
	claim := func() []outbox.Row {
		tx, err := f.st.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := store.ClaimOutbox(ctx, tx, 10)
		require.NoError(t, err)
		return rows
	}
	require.Empty(t, claim(), "a held row was claimed before its lease lapsed")
	_, ok, err := store.NextOutboxClaim(ctx, f.st.Pool())
	require.NoError(t, err)
	require.False(t, ok, "the look saw a held row before its lease lapsed")
	require.Eventually(t, func() bool {
		at, ok, err := store.NextOutboxClaim(ctx, f.st.Pool())
		require.NoError(t, err)
		return ok && !at.After(time.Now())
	}, 10*time.Second, 10*time.Millisecond, "the look misses a lapsed held row")
	require.False(t, time.Now().Before(pub.Leased[0].Until), "the look saw the row before its lease lapsed")
	rows := claim()
	require.Len(t, rows, 1)
	require.Equal(t, pub.Leased[0].DeliveryID, rows[0].DeliveryID)
	require.True(t, rows[0].CreatedAt.Equal(pub.Leased[0].CreatedAt), "the row's deadline base moved")
}
