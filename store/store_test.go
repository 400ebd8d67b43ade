package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/testenv"
	"hookrelay/outbox"
	"hookrelay/secretbox"
	"hookrelay/store"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

type fixture struct {
	st  *store.Store
	app store.App
	ep  store.Endpoint
}

func setup(t testing.TB) fixture {
	t.Helper()
	ctx := context.Background()
	st := pg.Store(t, "store")
	app, err := st.CreateApp(ctx, store.App{Name: "acme"})
	require.NoError(t, err)
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "https://example.com/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	return fixture{st: st, app: app, ep: ep}
}

// batched is f's store with its attempt statements coalesced, closed when
// the test ends.
func (f fixture) batched(t *testing.T) *store.Batched {
	t.Helper()
	b := store.NewBatched(f.st)
	t.Cleanup(b.Close)
	return b
}

// publish accepts one event and returns its delivery's ID.
func (f fixture) publish(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	p, err := outbox.Publish(ctx, tx, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, p.Deliveries, 1)
	return p.Deliveries[0].ID
}

func (f fixture) attempt(t *testing.T, dlv string, cycle, number, code int, class delivery.Class) {
	t.Helper()
	require.NoError(t, f.st.RecordAttempt(context.Background(), store.Attempt{
		DeliveryID: dlv, Cycle: cycle, Number: number, StartedAt: time.Now(), StatusCode: &code, Class: string(class),
	}))
}

func (f fixture) outboxKinds(t *testing.T) map[string]int {
	t.Helper()
	rows, err := f.st.Pool().Query(context.Background(), `SELECT kind, count(*) FROM outbox GROUP BY kind`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	return out
}

// TestPatchWritesOnlyGivenFields: a PATCH of the description does not undo
// a 410 that disabled the endpoint after the PATCH's caller read it.
func TestPatchWritesOnlyGivenFields(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	f.attempt(t, dlv, 1, 1, 410, delivery.ClassPermanent)
	desc := "billing"
	out, secret, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Description: &desc})
	require.NoError(t, err)
	require.Empty(t, secret)
	require.Equal(t, "billing", out.Description)
	require.True(t, out.Disabled, "the 410's disable survives")
	require.Equal(t, "receiver answered 410 Gone", *out.DisabledReason)

	enabled := false
	out, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &enabled})
	require.NoError(t, err)
	require.False(t, out.Disabled)
	require.Nil(t, out.DisabledReason)
	require.Equal(t, "billing", out.Description)
}

// TestDisableCancelsOnlyInFlight: a disable cancels pending deliveries
// through the outbox and leaves dead letters alone.
func TestDisableCancelsOnlyInFlight(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	pending := f.publish(t)
	dead := f.publish(t)
	_, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dead, Status: delivery.StatusDeadLettered, Reason: "all 6 attempts failed", Cycle: 1})
	require.NoError(t, err)
	yes := true
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &yes})
	require.NoError(t, err)

	p, err := f.st.GetDelivery(ctx, f.app.ID, pending)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusCanceled, p.Status)
	require.Equal(t, store.ReasonEndpointDisabled, *p.DeadLetterReason)
	d, err := f.st.GetDelivery(ctx, f.app.ID, dead)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusDeadLettered, d.Status)
	require.Equal(t, "all 6 attempts failed", *d.DeadLetterReason)
	require.Equal(t, map[string]int{"start": 2, "cancel": 1}, f.outboxKinds(t))

	// Deleting the endpoint also ends the dead letter's parked workflow,
	// and the row stays dead_lettered.
	require.NoError(t, f.st.DeleteEndpoint(ctx, f.app.ID, f.ep.ID))
	d, err = f.st.GetDelivery(ctx, f.app.ID, dead)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusDeadLettered, d.Status)
	require.Equal(t, 2, f.outboxKinds(t)["cancel"])
}

// TestMarkNeverOverwritesAFinishedDelivery: a cancel or dead letter only
// changes an in-flight delivery; a 2xx wins over a cancel.
func TestMarkNeverOverwritesAFinishedDelivery(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	f.attempt(t, dlv, 1, 1, 200, delivery.ClassSuccess)
	for _, st := range []delivery.Status{delivery.StatusCanceled, delivery.StatusDeadLettered} {
		after, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: st, Reason: "x", Cycle: 1})
		require.NoError(t, err)
		require.Equal(t, store.Marked{Status: delivery.StatusSucceeded}, after)
	}

	late := f.publish(t)
	canceled, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: late, Status: delivery.StatusCanceled, Reason: "canceled", Cycle: 1})
	require.NoError(t, err)
	require.Equal(t, store.Marked{Status: delivery.StatusCanceled, Changed: true}, canceled)
	again, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: late, Status: delivery.StatusCanceled, Reason: "canceled", Cycle: 1})
	require.NoError(t, err)
	require.Equal(t, store.Marked{Status: delivery.StatusCanceled}, again, "a retried mark changes nothing")
	f.attempt(t, late, 1, 1, 200, delivery.ClassSuccess)
	d, err := f.st.GetDelivery(ctx, f.app.ID, late)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusCanceled, d.Status, "a final status never changes but by a replay")
	require.Equal(t, 1, d.AttemptCount, "the request that went out is still an attempt")

	_, err = f.st.MarkDelivery(ctx, store.Mark{DeliveryID: "dlv_missing", Status: delivery.StatusCanceled, Cycle: 1})
	require.ErrorIs(t, err, store.ErrNotFound)
	err = f.st.RecordAttempt(ctx, store.Attempt{DeliveryID: "dlv_missing", Cycle: 1, Number: 1, StartedAt: time.Now(), Class: "success"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestNextAttemptIsRecorded: the attempt's record carries the next attempt
// time; a success clears it.
func TestNextAttemptIsRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	next := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	code := 502
	require.NoError(t, f.st.RecordAttempt(ctx, store.Attempt{DeliveryID: dlv, Cycle: 1, Number: 1, StartedAt: time.Now(),
		StatusCode: &code, Class: "retryable", NextAttemptAt: &next}))
	d, err := f.st.GetDelivery(ctx, f.app.ID, dlv)
	require.NoError(t, err)
	require.True(t, next.Equal(*d.NextAttemptAt))
	f.attempt(t, dlv, 1, 2, 200, delivery.ClassSuccess)
	d, err = f.st.GetDelivery(ctx, f.app.ID, dlv)
	require.NoError(t, err)
	require.Nil(t, d.NextAttemptAt)
}

// TestStatsCountFirstCycles: the first cycle decides the figures; replays
// are counted apart.
func TestStatsCountFirstCycles(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	first, retried, dead := f.publish(t), f.publish(t), f.publish(t)
	f.attempt(t, first, 1, 1, 200, delivery.ClassSuccess)
	f.attempt(t, retried, 1, 1, 502, delivery.ClassRetryable)
	f.attempt(t, retried, 1, 2, 200, delivery.ClassSuccess)
	f.attempt(t, dead, 1, 1, 404, delivery.ClassPermanent)
	_, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dead, Status: delivery.StatusDeadLettered, Reason: "404", Cycle: 1})
	require.NoError(t, err)
	now := time.Now()
	before, err := f.st.Stats(ctx, f.app.ID, 1000, nil, now)
	require.NoError(t, err)
	// Every delivery was made this hour: the last of 24 hourly buckets.
	require.Len(t, before.Hourly, store.HourlyStatsHours)
	require.Equal(t, now.UTC().Truncate(time.Hour), before.Hourly[store.HourlyStatsHours-1].Hour)
	require.Equal(t, map[delivery.Status]int{delivery.StatusSucceeded: 2, delivery.StatusDeadLettered: 1}, before.Hourly[store.HourlyStatsHours-1].ByStatus)
	require.Empty(t, before.Hourly[0].ByStatus)
	before.Hourly = nil
	require.Equal(t, store.Stats{Events: 3, Deliveries: 3, FirstAttemptSuccess: 1, RetrySuccess: 1, EffectiveDeliveryRate: 2.0 / 3, DeadLettered: 1}, before)
	// Limited to an endpoint the app does not have, nothing counts.
	none, err := f.st.Stats(ctx, f.app.ID, 1000, []string{"ep_none"}, now)
	require.NoError(t, err)
	require.Zero(t, none.Deliveries)

	// Replay the dead letter and the first-attempt success (their start
	// rows dispatched); both succeed.
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	for _, id := range []string{dead, first} {
		queued, err := store.ReplayDeliveries(ctx, f.st.Pool(), f.app.ID, []string{id}, "key_test", "test key")
		require.NoError(t, err)
		require.Len(t, queued, 1)
		_, err = f.st.MarkDelivery(ctx, store.Mark{DeliveryID: id, Status: delivery.StatusDelivering, Cycle: 2})
		require.NoError(t, err)
		f.attempt(t, id, 2, 1, 200, delivery.ClassSuccess)
	}
	after, err := f.st.Stats(ctx, f.app.ID, 1000, nil, now)
	require.NoError(t, err)
	after.Hourly = nil
	want := before
	want.DeadLettered = 0
	want.Replayed, want.ReplaySuccess = 2, 2
	require.Equal(t, want, after, "the first-cycle figures do not move")
}

// TestHeadersSealedAtRest: custom header values are sealed; reads show
// the names with a mask, attempts get the values, a PATCH that sends the
// mask back keeps them, and rows written before sealing are sealed.
func TestHeadersSealedAtRest(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const token = "Bearer receiver-token-4711"
	ep, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: f.app.ID, URL: "https://example.com/h", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second,
		Headers: map[string]string{"Authorization": token, "X-Tenant": "acme"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"Authorization": store.HeaderMask, "X-Tenant": store.HeaderMask}, ep.Headers)
	atRest := func() string {
		var plain string
		var sealed []byte
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT headers::text, headers_sealed FROM endpoints WHERE id = $1`, ep.ID).Scan(&plain, &sealed))
		return plain + string(sealed)
	}
	require.NotContains(t, atRest(), "receiver-token-4711")
	require.NotContains(t, atRest(), "acme")

	dlv := func() string {
		tx, err := f.st.Pool().Begin(ctx)
		require.NoError(t, err)
		p, err := outbox.Publish(ctx, tx, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		for _, d := range p.Deliveries {
			if d.EndpointID == ep.ID {
				return d.ID
			}
		}
		t.Fatal("no delivery to the endpoint")
		return ""
	}()
	target, err := f.st.LoadTarget(ctx, dlv, time.Now())
	require.NoError(t, err)
	require.Equal(t, token, target.Headers["Authorization"])

	// A PATCH sending the masked view back keeps the values; a new value
	// replaces its own only.
	headers := map[string]string{"Authorization": store.HeaderMask, "X-Tenant": "globex"}
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, ep.ID, store.EndpointPatch{Headers: &headers})
	require.NoError(t, err)
	target, err = f.st.LoadTarget(ctx, dlv, time.Now())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"Authorization": token, "X-Tenant": "globex"}, target.Headers)

	// A row from before sealing.
	_, err = f.st.Pool().Exec(ctx, `UPDATE endpoints SET headers = '{"X-Old":"plain-old-value"}', headers_sealed = NULL WHERE id = $1`, ep.ID)
	require.NoError(t, err)
	n, err := f.st.SealLegacyHeaders(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NotContains(t, atRest(), "plain-old-value")
	target, err = f.st.LoadTarget(ctx, dlv, time.Now())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"X-Old": "plain-old-value"}, target.Headers)
	n, err = f.st.SealLegacyHeaders(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestSecretKeyRotation: with a new key first, Reseal seals every secret and
// header again; the new key alone then opens everything.
func TestSecretKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oldKey, err := secretbox.GenerateKey()
	require.NoError(t, err)
	newKey, err := secretbox.GenerateKey()
	require.NoError(t, err)
	pool := pg.Pool(t, "rotate", true)
	storeWith := func(keys string) *store.Store {
		box, err := secretbox.Open(keys)
		require.NoError(t, err)
		return store.New(pool, box)
	}
	old := storeWith(oldKey)
	app, err := old.CreateApp(ctx, store.App{Name: "rotate"})
	require.NoError(t, err)
	for range 3 {
		_, _, err := old.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "https://example.com/h", Environment: "live",
			RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second,
			Headers: map[string]string{"Authorization": "Bearer t"}})
		require.NoError(t, err)
	}
	both := storeWith(newKey + "," + oldKey)
	n, err := both.Reseal(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, n, "3 secrets and 3 header sets")
	n, err = both.Reseal(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left for the old key")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	p, err := outbox.Publish(ctx, tx, app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	for _, d := range p.Deliveries {
		target, err := storeWith(newKey).LoadTarget(ctx, d.ID, time.Now())
		require.NoError(t, err, "the new key alone opens")
		require.Len(t, target.Keys, 1)
		require.Equal(t, "Bearer t", target.Headers["Authorization"])
		_, err = storeWith(oldKey).LoadTarget(ctx, d.ID, time.Now())
		require.ErrorIs(t, err, secretbox.ErrOpen, "the old key no longer does")
	}
}

// TestRecordAttemptIsIdempotent: a retried activity's record does not count
// twice; the next attempt does.
func TestRecordAttemptIsIdempotent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	f.attempt(t, dlv, 1, 1, 502, delivery.ClassRetryable)
	f.attempt(t, dlv, 1, 1, 502, delivery.ClassRetryable)
	d, err := f.st.GetDelivery(ctx, f.app.ID, dlv)
	require.NoError(t, err)
	require.Equal(t, 1, d.AttemptCount)
	require.Equal(t, delivery.StatusDelivering, d.Status)
	f.attempt(t, dlv, 1, 2, 200, delivery.ClassSuccess)
	d, err = f.st.GetDelivery(ctx, f.app.ID, dlv)
	require.NoError(t, err)
	require.Equal(t, 2, d.AttemptCount)
	require.Equal(t, delivery.StatusSucceeded, d.Status)
	require.Equal(t, 200, *d.LastAttempt.StatusCode)
}

// TestPruneKeepsWhatIsStillNeeded: with the clock pushed past the
// retention, exactly the expired rows go: finished deliveries, their
// attempts, and events left without deliveries; a delivery in flight and a
// dead letter inside its own retention survive.
func TestPruneKeepsWhatIsStillNeeded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.st.Pool().Exec(ctx, `DELETE FROM outbox`) // their starts went out
	require.NoError(t, err)
	done, dead, inFlight := f.publish(t), f.publish(t), f.publish(t)
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	f.attempt(t, done, 1, 1, 200, delivery.ClassSuccess)
	f.attempt(t, dead, 1, 1, 404, delivery.ClassPermanent)
	_, err = f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dead, Status: delivery.StatusDeadLettered, Reason: "404", Cycle: 1})
	require.NoError(t, err)
	f.attempt(t, inFlight, 1, 1, 502, delivery.ClassRetryable)
	var size0 int64
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size0))

	p, err := f.st.Prune(ctx, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.Pruned{}, p, "nothing is old yet")

	// Two days later, keeping one day: the success goes; the dead letter is
	// inside its 7-day retention; the retrying delivery is in flight.
	p, err = f.st.Prune(ctx, time.Now().Add(48*time.Hour), 24*time.Hour)
	require.NoError(t, err)
	// Events: the success's, and the operational delivery.dead_lettered,
	// which no operator endpoint received.
	require.Equal(t, store.Pruned{Deliveries: 1, Events: 2}, p)
	_, err = f.st.GetDelivery(ctx, f.app.ID, done)
	require.ErrorIs(t, err, store.ErrNotFound)
	for _, id := range []string{dead, inFlight} {
		_, err := f.st.GetDelivery(ctx, f.app.ID, id)
		require.NoError(t, err, id)
	}
	var attempts int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM attempts WHERE delivery_id = $1`, done).Scan(&attempts))
	require.Zero(t, attempts, "its attempts went with it")

	// Past the dead letter's own retention it goes too.
	p, err = f.st.Prune(ctx, time.Now().Add(8*24*time.Hour), 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.Pruned{Deliveries: 1, Events: 1}, p)
	var size1 int64
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size1))
	t.Logf("database size %d → %d bytes (Postgres returns space to the file system only on VACUUM FULL)", size0, size1)
}

// TestSustainedFailureDisables: an endpoint whose deliveries all failed for
// the window (with at least the minimum of dead letters) is disabled with
// reason sustained_failure and the operator is told; a success in between
// starts the run over.
func TestSustainedFailureDisables(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.st.FailingAfter, f.st.AutoDisableAfter, f.st.AutoDisableMin = 2, time.Hour, 2
	dead := func() {
		id := f.publish(t)
		_, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: id, Status: delivery.StatusDeadLettered, Reason: "404", Cycle: 1})
		require.NoError(t, err)
	}
	age := func() {
		_, err := f.st.Pool().Exec(ctx, `UPDATE endpoints SET failing_since = now() - interval '2 hours' WHERE id = $1`, f.ep.ID)
		require.NoError(t, err)
	}
	ep := func() store.Endpoint {
		e, err := f.st.GetEndpoint(ctx, f.app.ID, f.ep.ID)
		require.NoError(t, err)
		return e
	}
	dead()
	age()
	// A success in between: the run starts over.
	f.attempt(t, f.publish(t), 1, 1, 200, delivery.ClassSuccess)
	dead()
	require.False(t, ep().Disabled)
	dead()
	require.False(t, ep().Disabled, "two in a row, but not for an hour yet")
	age()
	dead()
	e := ep()
	require.True(t, e.Disabled)
	require.Contains(t, *e.DisabledReason, "every delivery failed for 1h0m0s")
	var reasons []string
	rows, err := f.st.Pool().Query(ctx, `SELECT convert_from(payload, 'UTF8')::jsonb #>> '{data,reason}' FROM events WHERE app_id = $1 AND type = $2`,
		store.OperationsApp, store.OpEndpointDisabled)
	require.NoError(t, err)
	for rows.Next() {
		var r string
		require.NoError(t, rows.Scan(&r))
		reasons = append(reasons, r)
	}
	require.Equal(t, []string{store.DisabledSustained}, reasons)
}

// TestFlightLeases: max_in_flight leases are counted per endpoint, freed by
// release, and a lease whose holder died expires and is dropped.
func TestFlightLeases(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	a, ok, err := f.st.AcquireFlight(ctx, f.ep.ID, 2, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	b, ok, err := f.st.AcquireFlight(ctx, f.ep.ID, 2, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.AcquireFlight(ctx, f.ep.ID, 2, time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "both leases taken")

	// The second holder "died": its lease is past its expiry.
	_, err = f.st.Pool().Exec(ctx, `UPDATE endpoint_flights SET expires_at = now() - interval '1 second' WHERE id = $1`, b)
	require.NoError(t, err)
	c, ok, err := f.st.AcquireFlight(ctx, f.ep.ID, 2, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "an expired lease frees its place")
	_, ok, err = f.st.AcquireFlight(ctx, f.ep.ID, 2, time.Minute)
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, f.st.ReleaseFlight(ctx, a))
	require.NoError(t, f.st.ReleaseFlight(ctx, c))
	var left int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM endpoint_flights`).Scan(&left))
	require.Zero(t, left, "released and expired leases are gone")
}

// TestPruneHonoursAppRetention: an app with a one-day retention loses its
// finished deliveries after two days while the server's 30 days keep
// another app's; going back to the server's keeps them.
func TestPruneHonoursAppRetention(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	day := 24 * time.Hour
	short, err := f.st.CreateApp(ctx, store.App{Name: "short", Retention: day})
	require.NoError(t, err)
	require.Equal(t, day, short.Retention)
	ep, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: short.ID, URL: "https://example.com/short", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	g := fixture{st: f.st, app: short, ep: ep}
	shortDone, longDone := g.publish(t), f.publish(t)
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	g.attempt(t, shortDone, 1, 1, 200, delivery.ClassSuccess)
	f.attempt(t, longDone, 1, 1, 200, delivery.ClassSuccess)

	back := time.Duration(0)
	kept, err := f.st.UpdateApp(ctx, short.ID, store.AppPatch{Retention: &back})
	require.NoError(t, err)
	require.Zero(t, kept.Retention)
	require.Equal(t, "short", kept.Name, "a patch of the retention keeps the name")
	p, err := f.st.Prune(ctx, time.Now().Add(2*day), store.RetentionDefault)
	require.NoError(t, err)
	require.Equal(t, store.Pruned{}, p, "both apps keep the server's 30 days")

	_, err = f.st.UpdateApp(ctx, short.ID, store.AppPatch{Retention: &day})
	require.NoError(t, err)
	p, err = f.st.Prune(ctx, time.Now().Add(2*day), store.RetentionDefault)
	require.NoError(t, err)
	require.Equal(t, store.Pruned{Deliveries: 1, Events: 1}, p)
	_, err = f.st.GetDelivery(ctx, short.ID, shortDone)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.st.GetDelivery(ctx, f.app.ID, longDone)
	require.NoError(t, err)
}

// TestRecordAttemptsInOneStatement: a batch records each attempt as
// RecordAttempt does (count, status, next attempt, last code, key IDs),
// reports a delivery gone on its own, and recording the batch again counts
// nothing twice; LoadTargets loads each delivery's target as LoadTarget.
func TestRecordAttemptsInOneStatement(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	ok, failed := f.publish(t), f.publish(t)
	next := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	c200, c503 := 200, 503
	batch := []store.Attempt{
		{DeliveryID: ok, Cycle: 1, Number: 1, StartedAt: time.Now(), DurationMS: 7, StatusCode: &c200, Class: string(delivery.ClassSuccess), KeyIDs: []string{"whk_a", "whk_b"}},
		{DeliveryID: failed, Cycle: 1, Number: 1, StartedAt: time.Now(), DurationMS: 9, StatusCode: &c503, Class: string(delivery.ClassRetryable), Error: "503", NextAttemptAt: &next},
		{DeliveryID: "dlv_gone", Cycle: 1, Number: 1, StartedAt: time.Now(), Class: string(delivery.ClassSuccess)},
	}
	for range 2 {
		errs, err := f.st.RecordAttempts(ctx, batch)
		require.NoError(t, err)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.ErrorIs(t, errs[2], store.ErrNotFound)
	}
	d, err := f.st.GetDelivery(ctx, f.app.ID, ok)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusSucceeded, d.Status)
	require.Equal(t, 1, d.AttemptCount, "recorded twice, counted once")
	require.Equal(t, 200, *d.LastStatusCode)
	require.Equal(t, []string{"whk_a", "whk_b"}, d.LastAttempt.KeyIDs)
	require.Nil(t, d.NextAttemptAt)
	d, err = f.st.GetDelivery(ctx, f.app.ID, failed)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusDelivering, d.Status)
	require.Equal(t, 1, d.AttemptCount)
	require.Equal(t, next, d.NextAttemptAt.UTC())
	require.Equal(t, []string{}, d.LastAttempt.KeyIDs)

	one, err := f.st.LoadTarget(ctx, ok, time.Now())
	require.NoError(t, err)
	many, err := f.st.LoadTargets(ctx, []string{ok, "dlv_gone", failed}, time.Now())
	require.NoError(t, err)
	require.Len(t, many, 2)
	for _, tg := range many {
		if tg.DeliveryID == ok {
			require.Equal(t, one, tg)
		}
	}
}

// TestCancelWaitsForTheOpenRequest: a disable while an attempt is claimed
// (its request on the wire) leaves the delivery delivering; its recorded
// answer decides. A delivery not on the wire is canceled at once, and a
// canceled delivery can no longer be claimed, so it is never sent.
func TestCancelWaitsForTheOpenRequest(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	open, idle := f.publish(t), f.publish(t)
	claim, err := f.st.ClaimAttempt(ctx, open, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, claim)
	claim, err = f.st.ClaimAttempt(ctx, open, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, store.ClaimOnTheWire, claim, "one request on the wire at a time")
	disabled := true
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &disabled})
	require.NoError(t, err)
	for id, want := range map[string]delivery.Status{open: delivery.StatusDelivering, idle: delivery.StatusCanceled} {
		d, err := f.st.GetDelivery(ctx, f.app.ID, id)
		require.NoError(t, err)
		require.Equal(t, want, d.Status, id)
	}
	claim, err = f.st.ClaimAttempt(ctx, idle, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, store.ClaimRefused, claim, "a canceled delivery is never sent")
	f.attempt(t, open, 1, 1, 200, delivery.ClassSuccess)
	d, err := f.st.GetDelivery(ctx, f.app.ID, open)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusSucceeded, d.Status, "the open request's 2xx decides")
	require.Equal(t, map[string]int{"start": 2, "cancel": 2}, f.outboxKinds(t), "both workflows still get their cancel")
}

// TestFirstRequestLateness: a first request 300 ms after its due time
// (acceptance plus the jittered first wait) reads 300 ms late; other
// events of the app are left out when events are named.
func TestFirstRequestLateness(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv, other := f.publish(t), f.publish(t)
	d, err := f.st.GetDelivery(ctx, f.app.ID, dlv)
	require.NoError(t, err)
	due := d.CreatedAt.Add(delivery.Jitter(delivery.DefaultSchedule()[0], dlv, 1))
	code := 200
	require.NoError(t, f.st.RecordAttempt(ctx, store.Attempt{DeliveryID: dlv, Cycle: 1, Number: 1, StartedAt: due.Add(300 * time.Millisecond),
		StatusCode: &code, Class: string(delivery.ClassSuccess)}))
	require.NoError(t, f.st.RecordAttempt(ctx, store.Attempt{DeliveryID: other, Cycle: 1, Number: 1, StartedAt: time.Now(),
		StatusCode: &code, Class: string(delivery.ClassSuccess)}))
	late, err := f.st.FirstRequestLateness(ctx, f.app.ID, []string{d.EventID})
	require.NoError(t, err)
	require.Len(t, late, 1)
	require.InDelta(t, float64(300*time.Millisecond), float64(late[0]), float64(time.Millisecond))
	all, err := f.st.FirstRequestLateness(ctx, f.app.ID, nil)
	require.NoError(t, err)
	require.Len(t, all, 2)
}

// TestDatabaseRefusesWhatTheTableRefuses walks every pair of statuses
// through a plain UPDATE, as a future statement might: the database allows
// exactly delivery.Allowed and refuses the rest with SQLSTATE HR001. Then
// the one path that used to move a final status, a workflow's mark of a new
// cycle, leaves a canceled delivery canceled.
func TestDatabaseRefusesWhatTheTableRefuses(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, from := range delivery.Statuses() {
		for _, to := range delivery.Statuses() {
			dlv := f.publish(t) // pending, from which every status is one step
			_, err := f.st.Pool().Exec(ctx, `UPDATE deliveries SET status = $2 WHERE id = $1`, dlv, from)
			require.NoError(t, err)
			_, err = f.st.Pool().Exec(ctx, `UPDATE deliveries SET status = $2 WHERE id = $1`, dlv, to)
			if delivery.Allowed(from, to) {
				require.NoError(t, err, "%s -> %s", from, to)
				continue
			}
			pgErr, ok := errors.AsType[*pgconn.PgError](err)
			require.True(t, ok, "%s -> %s refused: %v", from, to, err)
			require.Equal(t, "HR001", pgErr.Code)
			require.Equal(t, dlv+" "+string(from)+" "+string(to), pgErr.Detail)
		}
	}

	dlv := f.publish(t)
	_, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: delivery.StatusCanceled, Reason: "canceled", Cycle: 1})
	require.NoError(t, err)
	after, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: delivery.StatusDelivering, Cycle: 2})
	require.NoError(t, err)
	require.Equal(t, store.Marked{Status: delivery.StatusCanceled}, after, "a canceled delivery starts no cycle but through a replay")
	_, err = f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: delivery.StatusSucceeded, Cycle: 1})
	_, ok := errors.AsType[*delivery.TransitionError](err)
	require.True(t, ok, "a workflow never marks succeeded: only a recorded 2xx does")
}

// TestProxyDeadLettersLeaveTheStreak: a dead letter whose last attempt was
// the egress proxy's failure (an operator fault) is reported like any
// other but neither extends the endpoint's failing streak nor resets it,
// so however many there are, they neither make it failing nor disable it,
// and the run of its own failures goes on across them.
func TestProxyDeadLettersLeaveTheStreak(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.st.FailingAfter, f.st.AutoDisableAfter, f.st.AutoDisableMin = 2, time.Hour, 2
	dead := func(last delivery.Class) {
		id := f.publish(t)
		_, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: id, Status: delivery.StatusDeadLettered, Reason: "all attempts failed", Cycle: 1, LastClass: last})
		require.NoError(t, err)
	}
	age := func() {
		_, err := f.st.Pool().Exec(ctx, `UPDATE endpoints SET failing_since = now() - interval '2 hours' WHERE id = $1 AND failing_since IS NOT NULL`, f.ep.ID)
		require.NoError(t, err)
	}
	streak := func() (n int, failing, disabled bool) {
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT consecutive_failures, failing, disabled FROM endpoints WHERE id = $1`, f.ep.ID).Scan(&n, &failing, &disabled))
		return n, failing, disabled
	}
	for range 5 {
		dead(delivery.ClassProxy)
		age()
	}
	n, failing, disabled := streak()
	require.Equal(t, []any{0, false, false}, []any{n, failing, disabled}, "five proxy dead letters say nothing about the endpoint")

	dead(delivery.ClassRetryable)
	for range 3 {
		dead(delivery.ClassProxy)
	}
	n, failing, _ = streak()
	require.Equal(t, []any{1, false}, []any{n, failing}, "not extended, not reset")
	age()
	dead(delivery.ClassRetryable)
	n, failing, disabled = streak()
	require.Equal(t, []any{2, true, true}, []any{n, failing, disabled}, "the endpoint's own run goes on across them")

	var reported int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE app_id = $1 AND type = $2`, store.OperationsApp, store.OpDeadLettered).Scan(&reported))
	require.Equal(t, 10, reported, "every dead letter is reported to the operator")
}

// TestEgressProxyOverride: the override is stored, read back, kept by a
// PATCH of another field and removed by "".
func TestEgressProxyOverride(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	ep, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: f.app.ID, URL: "https://example.com/b", Environment: "live", EgressProxy: "direct"})
	require.NoError(t, err)
	require.Equal(t, "direct", ep.EgressProxy)
	desc, via, none := "b", "http://proxy.internal:3128", ""
	ep, _, err = f.st.PatchEndpoint(ctx, f.app.ID, ep.ID, store.EndpointPatch{Description: &desc})
	require.NoError(t, err)
	require.Equal(t, "direct", ep.EgressProxy)
	ep, _, err = f.st.PatchEndpoint(ctx, f.app.ID, ep.ID, store.EndpointPatch{EgressProxy: &via})
	require.NoError(t, err)
	require.Equal(t, via, ep.EgressProxy)
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	p, err := outbox.Publish(ctx, tx, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	ts, err := f.st.LoadTargets(ctx, []string{p.Deliveries[0].ID, p.Deliveries[1].ID}, time.Now())
	require.NoError(t, err)
	got := map[string]string{}
	for _, tg := range ts {
		got[tg.EndpointID] = tg.EgressProxy
	}
	require.Equal(t, map[string]string{f.ep.ID: "", ep.ID: via}, got, "an attempt reads its endpoint's override")
	ep, _, err = f.st.PatchEndpoint(ctx, f.app.ID, ep.ID, store.EndpointPatch{EgressProxy: &none})
	require.NoError(t, err)
	require.Empty(t, ep.EgressProxy)
}
