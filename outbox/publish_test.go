package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/testenv"
	"hookrelay/outbox"
	"hookrelay/store"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

type bundle struct {
	st  *store.Store
	app store.App
	all store.Endpoint // subscribes to every type
	pay store.Endpoint // payment.succeeded only
}

func setup(t *testing.T) bundle {
	t.Helper()
	ctx := context.Background()
	st := pg.Store(t, "outbox")
	app, err := st.CreateApp(ctx, store.App{Name: "acme"})
	require.NoError(t, err)
	ep := func(types ...string) store.Endpoint {
		e, secret, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "https://example.com/hook", EventTypes: types,
			Environment: "live", RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second, Headers: map[string]string{}})
		require.NoError(t, err)
		require.Contains(t, secret, "whsec_")
		return e
	}
	return bundle{st: st, app: app, all: ep(), pay: ep("payment.succeeded")}
}

func count(t *testing.T, st *store.Store, table string) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func publish(t *testing.T, b bundle, ev outbox.Event) (outbox.Published, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	p, err := outbox.Publish(ctx, tx, b.app.ID, ev)
	if err != nil {
		return p, err
	}
	return p, tx.Commit(ctx)
}

func TestPublishMatchesFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"amount": 9900}`)})
	require.NoError(t, err)
	require.Len(t, p.Deliveries, 2)
	p, err = publish(t, b, outbox.Event{Type: "invoice.created", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Len(t, p.Deliveries, 1)
	require.Equal(t, b.all.ID, p.Deliveries[0].EndpointID)
	require.Equal(t, 3, count(t, b.st, "outbox"))
	require.Equal(t, 3, count(t, b.st, "deliveries"))

	ev, err := b.st.GetEvent(context.Background(), b.app.ID, p.ID)
	require.NoError(t, err)
	var env map[string]any
	require.NoError(t, json.Unmarshal(ev.Payload, &env))
	require.Equal(t, p.ID, env["id"])
	require.Equal(t, "invoice.created", env["type"])
	require.Equal(t, outbox.APIVersionDefault, env["api_version"])
}

func TestPublishRolledBackLeavesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tx, err := b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	// The producer's business row and the event share the transaction.
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE payments (id text) ON COMMIT DROP`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO payments VALUES ('pay_42')`)
	require.NoError(t, err)
	p, err := outbox.Publish(ctx, tx, b.app.ID, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"payment_id":"pay_42"}`)})
	require.NoError(t, err)
	require.Len(t, p.Deliveries, 2)
	require.NoError(t, tx.Rollback(ctx))
	for _, table := range []string{"events", "deliveries", "outbox"} {
		require.Zero(t, count(t, b.st, table), table)
	}
}

func TestIdempotentPublish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ev := outbox.Event{ID: "order-42-paid", Type: "payment.succeeded", Data: json.RawMessage(`{"amount": 1}`)}
	first, err := publish(t, b, ev)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	again, err := publish(t, b, ev)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Deliveries, again.Deliveries)
	require.Equal(t, 2, count(t, b.st, "deliveries"), "a repeat creates nothing")

	ev.Data = json.RawMessage(`{"amount": 2}`)
	_, err = publish(t, b, ev)
	require.ErrorIs(t, err, store.ErrConflict)
}

func TestPublishRejects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := make([]byte, outbox.MaxPayloadBytes+10)
	for i := range big {
		big[i] = ' '
	}
	copy(big, `{"x":"`)
	for i := 6; i < len(big)-2; i++ {
		big[i] = 'a'
	}
	copy(big[len(big)-2:], `"}`)
	for _, tc := range []struct {
		ev    outbox.Event
		field string
	}{
		{outbox.Event{Data: json.RawMessage(`{}`)}, "type"},
		{outbox.Event{Type: "Payment Succeeded", Data: json.RawMessage(`{}`)}, "type"},
		{outbox.Event{Type: "payment", Data: json.RawMessage(`{}`)}, "type"},
		{outbox.Event{Type: "payment.succeeded"}, "data"},
		{outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`[1]`)}, "data"},
		{outbox.Event{ID: "has space", Type: "payment.succeeded", Data: json.RawMessage(`{}`)}, "id"},
	} {
		_, err := publish(t, b, tc.ev)
		var fe *delivery.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, tc.field, fe.Field)
	}
	_, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: big})
	var tooLarge *delivery.TooLargeError
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, "data", tooLarge.Field)
	_, err = outbox.Publish(context.Background(), nil, b.app.ID, outbox.Event{})
	require.Zero(t, count(t, b.st, "events"))
}

func TestPublishUnknownApp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.app.ID = "app_missing"
	_, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestPublishRefusesWhatReceiversCannotVerify: invalid UTF-8 (a receiver
// decoding the body as text would change it and fail every signature
// check), a '.' in the ID (the signed content is id.timestamp.body) and
// numbers beyond float64 are refused, naming the field.
func TestPublishRefusesWhatReceiversCannotVerify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		ev    outbox.Event
		field string
	}{
		{outbox.Event{Type: "a.b", Data: json.RawMessage("{\"x\":\"\xff\xfe\"}")}, "data"},
		{outbox.Event{Type: "a.b", ID: "evt\xff", Data: json.RawMessage(`{}`)}, "id"},
		{outbox.Event{Type: "a.b", ID: "order.1", Data: json.RawMessage(`{}`)}, "id"},
		{outbox.Event{Type: "a.b", Data: json.RawMessage(`{"n":1e999999}`)}, "data"},
		{outbox.Event{Type: "a.b", Data: json.RawMessage(`{"n":[-1e400]}`)}, "data"},
	} {
		_, err := publish(t, b, tc.ev)
		var fe *delivery.FieldError
		require.ErrorAs(t, err, &fe, "%q", tc.ev.Data)
		require.Equal(t, tc.field, fe.Field)
	}
	require.Zero(t, count(t, b.st, "events"))
	for _, data := range []string{`{"n":1e300}`, `{"n":-5e-324}`, `{"s":"ünïcødé ✓"}`} {
		_, err := publish(t, b, outbox.Event{Type: "a.b", Data: json.RawMessage(data)})
		require.NoError(t, err, data)
	}
}

// listen LISTENs on the dispatcher's channel on a connection of b's pool
// held until the test ends, and answers how to wait for the next
// notification (an error when none comes within the wait).
func listen(t *testing.T, b bundle) func(wait time.Duration) (*pgconn.Notification, error) {
	ctx := context.Background()
	conn, err := b.st.Pool().Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	_, err = conn.Exec(ctx, "LISTEN "+outbox.Channel)
	require.NoError(t, err)
	return func(wait time.Duration) (*pgconn.Notification, error) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return conn.Conn().WaitForNotification(wctx)
	}
}

// TestClaimByFollowsTheFirstWait: a start row may wait in the outbox for
// its first wait less its jitter and ClaimGuard; the NOTIFY of the first
// row says by when, and a later row due no sooner wakes nobody.
func TestClaimByFollowsTheFirstWait(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	notified := listen(t, b)
	p, err := publish(t, b, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.True(t, p.Notified, "nothing waited: the publish woke the dispatchers")
	var ahead time.Duration
	var ms int64
	require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT (extract(epoch FROM max(claim_by - created_at)) * 1000)::bigint FROM outbox`).Scan(&ms))
	ahead = time.Duration(ms) * time.Millisecond
	first := delivery.DefaultSchedule()[0]
	want := time.Duration(float64(first)*(1-delivery.JitterFraction)) - outbox.ClaimGuard
	require.InDelta(t, float64(want), float64(ahead), float64(5*time.Millisecond), "claim_by %s after acceptance", ahead)
	n, err := notified(2 * time.Second)
	require.NoError(t, err)
	at, err := strconv.ParseInt(n.Payload, 10, 64)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(want), time.UnixMilli(at), time.Second)
	// The payload is rounded to the millisecond.
	require.InDelta(t, at, p.ClaimBy.UnixMilli(), 1, "Published says the claim time the NOTIFY said")

	p, err = publish(t, b, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = notified(300 * time.Millisecond)
	require.Error(t, err, "a row claimed with an earlier one wakes nobody")
	require.False(t, p.Notified, "Published says it woke nobody")
	var claimBy time.Time
	require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT o.claim_by FROM outbox o JOIN deliveries d ON d.id = o.delivery_id WHERE d.event_id = $1`, p.ID).Scan(&claimBy))
	require.True(t, claimBy.Equal(p.ClaimBy), "Published's claim time %s is its row's %s", p.ClaimBy, claimBy)

	// A repeat writes no row: nothing to claim, nobody to wake.
	again, err := publish(t, b, outbox.Event{ID: p.ID, Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.True(t, again.ClaimBy.IsZero())
	require.False(t, again.Notified)
}

// TestHeldRowsHaveNoClaimTime: an event whose only deliveries go to a
// paused endpoint writes held rows, which no round claims: Published has
// no claim time, so the API asks its dispatcher for no round, and the
// publish wakes no dispatcher (no NOTIFY).
func TestHeldRowsHaveNoClaimTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.st.Pool().Exec(ctx, `UPDATE endpoints SET paused = true WHERE app_id = $1`, b.app.ID)
	require.NoError(t, err)
	p, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Len(t, p.Deliveries, 2)
	require.True(t, p.ClaimBy.IsZero(), "held rows have no claim time: %s", p.ClaimBy)
	require.False(t, p.Notified, "held rows woke the dispatchers (the statement counted its NOTIFY)")

	_, err = b.st.Pool().Exec(ctx, `UPDATE endpoints SET paused = false WHERE id = $1`, b.all.ID)
	require.NoError(t, err)
	p, err = publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.False(t, p.ClaimBy.IsZero(), "one of its rows is claimable")
}

// TestPausedRowsDoNotSilenceTheWake: a start row of a paused endpoint waits
// in the outbox (Claim and NextClaim skip it), unleased with a claim_by in
// the past. A new delivery to another endpoint must still wake the
// dispatcher: no round would take it otherwise before the poll.
func TestPausedRowsDoNotSilenceTheWake(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	_, err := b.st.Pool().Exec(ctx, `UPDATE endpoints SET paused = true WHERE id = $1`, b.pay.ID)
	require.NoError(t, err)
	_, err = publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	// The enabled endpoint's row was dispatched; the paused one's waits,
	// its claim_by long past.
	_, err = b.st.Pool().Exec(ctx, `DELETE FROM outbox o USING deliveries d WHERE d.id = o.delivery_id AND d.endpoint_id = $1`, b.all.ID)
	require.NoError(t, err)
	_, err = b.st.Pool().Exec(ctx, `UPDATE outbox SET claim_by = now() - interval '1 minute'`)
	require.NoError(t, err)
	tx, err := b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, ok, err := store.NextOutboxClaim(ctx, tx)
	require.NoError(t, err)
	require.False(t, ok, "the paused row is not claimable")
	require.NoError(t, tx.Rollback(ctx))

	notified := listen(t, b)
	_, err = publish(t, b, outbox.Event{Type: "invoice.created", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = notified(time.Second)
	require.NoError(t, err, "a paused endpoint's waiting row silenced the NOTIFY of every new delivery")
}

// TestCreatedOrdersChangesOfOneSecond: the envelope's created carries
// milliseconds, so two changes of one second are ordered by it; a created
// more than MaxCreatedAhead in the future is refused naming the field, and
// one within it is kept as given.
func TestCreatedOrdersChangesOfOneSecond(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	var created []string
	for i, at := range []time.Time{base.Add(120 * time.Millisecond), base.Add(870 * time.Millisecond)} {
		p, err := publish(t, b, outbox.Event{ID: "evt_ms_" + strconv.Itoa(i), Type: "payment.succeeded", Data: json.RawMessage(`{}`), Created: at})
		require.NoError(t, err)
		var body []byte
		require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT payload FROM events WHERE id = $1`, p.ID).Scan(&body))
		var env struct{ Created string }
		require.NoError(t, json.Unmarshal(body, &env))
		created = append(created, env.Created)
	}
	require.Equal(t, base.Add(120*time.Millisecond).Format("2006-01-02T15:04:05.000Z"), created[0])
	require.Less(t, created[0], created[1], "two changes of one second are ordered")
	for _, c := range created {
		_, err := time.Parse(time.RFC3339, c)
		require.NoError(t, err, "still RFC 3339 for every receiver")
	}

	_, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`), Created: time.Now().Add(outbox.MaxCreatedAhead + time.Minute)})
	fe, ok := errors.AsType[*delivery.FieldError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "created", fe.Field)
	_, err = publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`), Created: time.Now().Add(outbox.MaxCreatedAhead - time.Minute)})
	require.NoError(t, err, "a clock a little ahead is fine")
}

// setFilter gives an endpoint a filter straight in its row, as a PATCH
// from another process would.
func setFilter(t *testing.T, b bundle, ep store.Endpoint, expr string) {
	t.Helper()
	_, _, err := b.st.PatchEndpoint(context.Background(), b.app.ID, ep.ID, store.EndpointPatch{Filter: &expr})
	require.NoError(t, err)
}

func endpointsOf(p outbox.Published) []string {
	var out []string
	for _, d := range p.Deliveries {
		out = append(out, d.EndpointID)
	}
	return out
}

// Only endpoints whose filter accepts the event get a delivery; the
// others are listed as filtered out (with the error when the filter
// failed), inside the producer's transaction, and a rollback leaves no
// trace of either.
func TestPublishFiltersInTheProducersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	setFilter(t, b, b.all, "data.amount >= 5000 && data.currency == 'usd'")
	big, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"amount": 9900, "currency": "usd"}`)})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{b.all.ID, b.pay.ID}, endpointsOf(big))
	require.Empty(t, big.FilteredOut)

	small, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"amount": 12, "currency": "usd"}`)})
	require.NoError(t, err)
	require.Equal(t, []string{b.pay.ID}, endpointsOf(small))
	require.Equal(t, []outbox.FilteredOut{{EndpointID: b.all.ID}}, small.FilteredOut)

	// No amount: the filter fails, which is no match, and says why.
	failed, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"currency": "usd"}`)})
	require.NoError(t, err)
	require.Equal(t, []string{b.pay.ID}, endpointsOf(failed))
	require.Len(t, failed.FilteredOut, 1)
	require.Contains(t, failed.FilteredOut[0].Error, "no such key: amount")
	rec, err := b.st.GetEvent(context.Background(), b.app.ID, failed.ID)
	require.NoError(t, err)
	require.JSONEq(t, `[{"endpoint_id": "`+b.all.ID+`", "error": "`+failed.FilteredOut[0].Error+`"}]`, string(rec.FilteredOut))

	// An endpoint not subscribed to the type is not "filtered out".
	setFilter(t, b, b.pay, "false")
	other, err := publish(t, b, outbox.Event{Type: "invoice.created", Data: json.RawMessage(`{"amount": 9900, "currency": "usd"}`)})
	require.NoError(t, err)
	require.Equal(t, []string{b.all.ID}, endpointsOf(other))
	require.Empty(t, other.FilteredOut)

	// A rollback leaves no event, delivery or filtered-out record.
	before := count(t, b.st, "events")
	ctx := context.Background()
	tx, err := b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = outbox.Publish(ctx, tx, b.app.ID, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"amount": 1}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, before, count(t, b.st, "events"))
}

// A Publisher that remembers an app's filters notices a filter added,
// changed or removed by another process at the next event: the statement
// refuses its stale verdicts and it reads the filters again.
func TestPublisherNoticesChangedFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := outbox.NewPublisher()
	send := func(amount int) []string {
		t.Helper()
		pub, err := p.PublishNow(ctx, b.st.Pool(), b.app.ID, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{"amount": ` + strconv.Itoa(amount) + `}`)})
		require.NoError(t, err)
		return endpointsOf(pub)
	}
	require.ElementsMatch(t, []string{b.all.ID, b.pay.ID}, send(10))
	setFilter(t, b, b.all, "data.amount > 100")
	require.Equal(t, []string{b.pay.ID}, send(10))
	require.ElementsMatch(t, []string{b.all.ID, b.pay.ID}, send(500))
	setFilter(t, b, b.all, "data.amount > 1000")
	require.Equal(t, []string{b.pay.ID}, send(500))
	setFilter(t, b, b.all, "")
	require.ElementsMatch(t, []string{b.all.ID, b.pay.ID}, send(10))
	// A test event goes to its endpoint whatever the filter.
	setFilter(t, b, b.pay, "false")
	pub, err := p.PublishNow(ctx, b.st.Pool(), b.app.ID, outbox.Event{Type: outbox.TestType, Data: json.RawMessage(`{}`), Endpoint: b.pay.ID})
	require.NoError(t, err)
	require.Equal(t, []string{b.pay.ID}, endpointsOf(pub))
}

// A Publisher skips the filter of an endpoint not subscribed to the event's
// type; when the endpoint subscribes to it meanwhile (another process), the
// statement refuses the skipped verdict and the filter runs.
func TestPublisherNoticesAnEndpointNowSubscribed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := outbox.NewPublisher()
	send := func(amount int) outbox.Published {
		t.Helper()
		pub, err := p.PublishNow(ctx, b.st.Pool(), b.app.ID, outbox.Event{Type: "order.created", Data: json.RawMessage(`{"amount": ` + strconv.Itoa(amount) + `}`)})
		require.NoError(t, err)
		return pub
	}
	setFilter(t, b, b.pay, "data.amount > 100")
	require.Equal(t, []string{b.all.ID}, endpointsOf(send(500)), "pay is not subscribed to order.created")
	types := []string{"payment.succeeded", "order.created"}
	_, _, err := b.st.PatchEndpoint(ctx, b.app.ID, b.pay.ID, store.EndpointPatch{EventTypes: &types})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{b.all.ID, b.pay.ID}, endpointsOf(send(500)), "subscribed now: its filter runs and passes")
	pub := send(10)
	require.Equal(t, []string{b.all.ID}, endpointsOf(pub))
	require.Equal(t, []outbox.FilteredOut{{EndpointID: b.pay.ID}}, pub.FilteredOut, "and filters out")
}

// A paused endpoint's rows are written held, held and released as it is
// paused and resumed, and a row left held for an endpoint that is no
// longer paused (an ingest that overlapped the resume) is released by the
// dispatcher's sweep.
func TestPausedRowsAreHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	held := func() (n int) {
		t.Helper()
		require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox o JOIN deliveries d ON d.id = o.delivery_id
			WHERE d.endpoint_id = $1 AND o.held`, b.pay.ID).Scan(&n))
		return n
	}
	pause := func(on bool) {
		t.Helper()
		_, _, err := b.st.PatchEndpoint(ctx, b.app.ID, b.pay.ID, store.EndpointPatch{Paused: &on})
		require.NoError(t, err)
	}
	send := func() {
		t.Helper()
		_, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	send()
	require.Zero(t, held())
	pause(true)
	require.Equal(t, 1, held())
	send()
	send()
	require.Equal(t, 3, held(), "rows written while paused are held")
	n, err := store.ReleaseHeld(ctx, b.st.Pool())
	require.NoError(t, err)
	require.Zero(t, n, "the endpoint is still paused")
	pause(false)
	require.Zero(t, held())
	pause(true)
	// The resume's release ran before an overlapping ingest's row landed.
	_, err = b.st.Pool().Exec(ctx, `UPDATE endpoints SET paused = false WHERE id = $1`, b.pay.ID)
	require.NoError(t, err)
	n, err = store.ReleaseHeld(ctx, b.st.Pool())
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.Zero(t, held())
	var all int
	require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE held`).Scan(&all))
	require.Zero(t, all, "the other endpoint's rows were never held")
}

func TestPublishNumbersFIFODeliveriesPerKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	fifo, _, err := b.st.CreateEndpoint(ctx, store.Endpoint{AppID: b.app.ID, URL: "https://example.com/fifo", Ordering: delivery.OrderingFIFO,
		Environment: "live", RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, delivery.OrderingFIFO, fifo.Ordering)
	require.Equal(t, delivery.OrderingNone, b.all.Ordering)
	want := map[string]int64{}
	for _, key := range []string{"cust:1", "cust:1", "", "cust.2", "cust:1", ""} {
		p, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`), OrderingKey: key})
		require.NoError(t, err)
		require.Equal(t, key, p.OrderingKey)
		want[key]++
		for _, d := range p.Deliveries {
			var seq *int64
			var k *string
			require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT sequence, ordering_key FROM deliveries WHERE id = $1`, d.ID).Scan(&seq, &k))
			if d.EndpointID != fifo.ID {
				require.Nil(t, seq, "an unordered endpoint's delivery has no sequence")
				require.Nil(t, k)
				continue
			}
			require.NotNil(t, seq)
			require.Equal(t, want[key], *seq, "key %q", key)
			require.Equal(t, key, *k)
		}
	}
	var rows int
	require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT count(*) FROM sequences WHERE endpoint_id <> $1`, fifo.ID).Scan(&rows))
	require.Zero(t, rows, "unordered endpoints have no counter")

	// A repeat takes no number; the key is part of the content.
	ev := outbox.Event{ID: "evt-keyed", Type: "payment.succeeded", Data: json.RawMessage(`{}`), OrderingKey: "cust:1"}
	first, err := publish(t, b, ev)
	require.NoError(t, err)
	again, err := publish(t, b, ev)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, "cust:1", again.OrderingKey)
	require.Equal(t, first.Deliveries, again.Deliveries)
	var last int64
	require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT last FROM sequences WHERE endpoint_id = $1 AND ordering_key = 'cust:1'`, fifo.ID).Scan(&last))
	require.Equal(t, want["cust:1"]+1, last)
	ev.OrderingKey = "cust:9"
	_, err = publish(t, b, ev)
	require.ErrorIs(t, err, store.ErrConflict)

	// Ordered starts are claimed in any order (they only wake their
	// sequencer); a sequence's head is its lowest number with its row.
	tx, err := b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	rows2, err := store.ClaimOutbox(ctx, tx, 100)
	require.NoError(t, err)
	claimed := map[string]int{}
	for _, r := range rows2 {
		require.Equal(t, r.EndpointID == fifo.ID, r.Ordered())
		if r.Ordered() {
			claimed[r.OrderingKey]++
		}
	}
	for key, n := range want {
		require.Equal(t, int(n)+map[bool]int{true: 1}[key == "cust:1"], claimed[key], "key %q: every start row", key)
		h, ok, err := store.SequenceHead(ctx, tx, fifo.ID, key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(1), h.Sequence, "key %q", key)
		require.NotNil(t, h.Row)
		require.Equal(t, h.DeliveryID, h.Row.DeliveryID)
	}
	_, ok, err := store.SequenceHead(ctx, tx, fifo.ID, "no-such-key")
	require.NoError(t, err)
	require.False(t, ok, "an empty sequence has no head")
}

func TestPublishRejectsBadOrderingKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, key := range []string{"has space", "slash/", strings.Repeat("k", outbox.MaxOrderingKeyLength+1), "é"} {
		_, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`), OrderingKey: key})
		var fe *delivery.FieldError
		require.ErrorAs(t, err, &fe, key)
		require.Equal(t, "ordering_key", fe.Field)
	}
	_, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`), OrderingKey: strings.Repeat("k", outbox.MaxOrderingKeyLength)})
	require.NoError(t, err)
}

// TestTestEventsJoinNoSequence: a test event sent to a fifo endpoint on
// demand (outbox.TestType, Event.Endpoint) takes no sequence number and
// leaves the endpoint's sequence to real events: a failing test (dead
// letter, block) holds no real event back.
func TestTestEventsJoinNoSequence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	fifo, _, err := b.st.CreateEndpoint(ctx, store.Endpoint{AppID: b.app.ID, URL: "https://example.com/fifo", Ordering: delivery.OrderingFIFO,
		FIFOOnDeadLetter: delivery.DeadLetterBlock, Environment: "live", RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	seqOf := func(p outbox.Published) *int64 {
		t.Helper()
		for _, d := range p.Deliveries {
			if d.EndpointID == fifo.ID {
				var seq *int64
				require.NoError(t, b.st.Pool().QueryRow(ctx, `SELECT sequence FROM deliveries WHERE id = $1`, d.ID).Scan(&seq))
				return seq
			}
		}
		t.Fatal("no delivery to the fifo endpoint")
		return nil
	}
	test, err := publish(t, b, outbox.Event{Type: outbox.TestType, Data: json.RawMessage(`{}`), Endpoint: fifo.ID})
	require.NoError(t, err)
	require.Nil(t, seqOf(test), "a test event has no place in the sequence")
	real, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	seq := seqOf(real)
	require.NotNil(t, seq)
	require.EqualValues(t, 1, *seq, "the first real event is the sequence's first")
}

// countErrors is a FilterErrorCounter.
type countErrors map[string]int

func (c countErrors) FilterError(endpointID string) { c[endpointID]++ }

// A producer publishing in its own transaction counts filter errors as the
// API's ingest does: each event a filter failed on, once (not its repeat).
func TestPublisherCountsFilterErrorsInTheProducersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	setFilter(t, b, b.all, "data.amount >= 5000")
	counted := countErrors{}
	p := outbox.NewPublisher().WithFilterErrors(counted)
	ctx := context.Background()
	for i, data := range []string{`{"amount": 9000}`, `{"currency": "usd"}`, `{"amount": "lots"}`} {
		tx, err := b.st.Pool().Begin(ctx)
		require.NoError(t, err)
		_, err = p.Publish(ctx, tx, b.app.ID, outbox.Event{ID: fmt.Sprintf("evt_counted_%d", i), Type: "payment.succeeded", Data: json.RawMessage(data)})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	require.Equal(t, countErrors{b.all.ID: 2}, counted)
	tx, err := b.st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = p.Publish(ctx, tx, b.app.ID, outbox.Event{ID: "evt_counted_1", Type: "payment.succeeded", Data: json.RawMessage(`{"currency": "usd"}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, countErrors{b.all.ID: 2}, counted, "a repeat counts nothing")
}
