package store_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/testenv"
	"hookrelay/outbox"
	"hookrelay/store"
)

// seedReview gives f's app a paused endpoint with n held start rows (a
// paused backlog) and f.ep n succeeded deliveries, and returns the
// paused endpoint. It analyzes nothing.
func seedReview(t *testing.T, f fixture, n int) store.Endpoint {
	t.Helper()
	ctx := context.Background()
	paused, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: f.app.ID, URL: "https://example.com/paused", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	yes := true
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, paused.ID, store.EndpointPatch{Paused: &yes})
	require.NoError(t, err)
	for _, q := range []string{
		`INSERT INTO events (app_id, id, type, payload, payload_hash, created)
		 SELECT $1::text, 'evt_seed_' || g, 'order.paid', '\x7b7d', '\x00', now() + interval '0' * length($2::text || $3::text) FROM generate_series(1, $4::int) g`,
		`INSERT INTO deliveries (id, app_id, event_id, endpoint_id, status)
		 SELECT 'dlv_seed_p_' || g, $1::text, 'evt_seed_' || g, $2::text, 'pending' || left($3::text, 0) FROM generate_series(1, $4::int) g`,
		`INSERT INTO deliveries (id, app_id, event_id, endpoint_id, status)
		 SELECT 'dlv_seed_q_' || g, $1::text, 'evt_seed_' || g, $3::text, 'succeeded' || left($2::text, 0) FROM generate_series(1, $4::int) g`,
		`INSERT INTO attempts (id, delivery_id, cycle, number, started_at, duration_ms, status_code, class)
		 SELECT 'att_seed_' || g, 'dlv_seed_q_' || g, 1, 1, now(), 10 + length($1::text || $2::text || $3::text) * 0, 200, 'success' FROM generate_series(1, $4::int) g`,
		`INSERT INTO outbox (delivery_id, kind, app_id, held) SELECT 'dlv_seed_p_' || g, 'start' || left($2::text, 0) || left($3::text, 0), $1::text, true FROM generate_series(1, $4::int) g`,
	} {
		_, err := f.st.Pool().Exec(ctx, q, f.app.ID, paused.ID, f.ep.ID, n)
		require.NoError(t, err)
	}
	return paused
}

// TestReleaseHeldReadsNoPausedBacklog: the dispatcher's sweep (every
// 10 s in every dispatcher) reads no held row of an endpoint that still
// holds them, however large its backlog: it starts from the endpoints that
// stopped holding rows lately (review finding: it read every held row).
func TestReleaseHeldReadsNoPausedBacklog(t *testing.T) {
	t.Parallel()
	f := setup(t)
	seedReview(t, f, 20_000)
	ctx := context.Background()
	_, err := f.st.Pool().Exec(ctx, `ANALYZE`)
	require.NoError(t, err)
	n, err := store.ReleaseHeld(ctx, f.st.Pool())
	require.NoError(t, err)
	require.Zero(t, n)
	var plan string
	require.NoError(t, f.st.Pool().QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+store.ReleaseHeldSQL, store.ReleaseHeldArgs()...).Scan(&plan))
	for _, m := range regexp.MustCompile(`"Relation Name": "(outbox|deliveries)"[^}]*?"Actual Rows": ([0-9]+)`).FindAllStringSubmatch(plan, -1) {
		rows, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		require.Less(t, rows, 100, "the sweep read %d rows of %s beside a backlog of 20,000:\n%s", rows, m[1], plan)
	}
}

// TestHotPoolPlansUseKeys runs what the worker and ingest run, with the
// hot pool set as the product sets it (store.HotPoolSetup) and
// auto_explain on it, beside a paused backlog and a delivery history, and
// fails on a sequential scan of a big table: every kept plan reaches its
// rows by key. A 410's follow-ups (disable, cancel) run on the main pool
// (review finding: they ran on the hot pool, where the cancel's kept plan
// scanned every delivery).
func TestHotPoolPlansUseKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	seedReview(t, f, 20_000)
	_, err := f.st.Pool().Exec(context.Background(), `ANALYZE`)
	require.NoError(t, err)
	plans := explainHotPool(t, f)
	runHotPath(t, f)
	checkHotPlans(t, plans())
}

// TestHotPoolPlansMadeOnFreshTablesUseKeys: the hot pool keeps the plans
// it makes on a new install's empty tables (nothing analyzed yet) and
// runs them when the tables are big. Those plans too reach every row by
// key: before, they scanned deliveries and events whole, and the cost of
// each attempt grew with the tables until autovacuum's first ANALYZE made
// the plans again (the bench's whole measured phase on its new cluster).
// Left alone: with no statistics the planner may look an event up through
// events_app_type (app, type, received_at) rather than its key, reading
// the app's events of the types that sort first (a new delivery's
// foreign-key check, a repeated publish); this test seeds and publishes
// one type. That lasts until the first ANALYZE of events.
func TestHotPoolPlansMadeOnFreshTablesUseKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// No ANALYZE by autovacuum in this database while the test runs.
	for _, table := range []string{"events", "deliveries", "attempts", "outbox", "endpoints", "endpoint_secrets", "apps"} {
		_, err := f.st.Pool().Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`)
		require.NoError(t, err)
	}
	plans := explainHotPool(t, f)
	runHotPath(t, f) // the kept plans are made here, on near-empty tables
	enableAgain(t, f)
	seedReview(t, f, 20_000)
	first := len(plans())
	runHotPath(t, f)
	checkHotPlans(t, plans()[first:])
}

// TestHotPoolPlansMadeOnASmallOutboxUseKeys: plans made after an ANALYZE
// that saw the outbox at its usual size (100 rows: the next second's)
// reach its rows by key once a flood or a resumed pause fills it, before
// autovacuum analyzes it again; runHotPath's sender batch makes the
// record update and delete start rows. Left alone: after an ANALYZE that
// found the outbox empty (an idle moment) the planner estimates it at no
// rows whatever its size, and the record's kept plan reads the whole
// outbox until autovacuum's next ANALYZE (50 rows changed, then its next
// visit: within a minute of traffic). Naming the rows by key as well only
// moved the read to outbox_app (app_id, id) in that case (review).
func TestHotPoolPlansMadeOnASmallOutboxUseKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.st.Pool().Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	seedReview(t, f, 20_000)
	var backlog [][]any
	// The outbox as ANALYZE usually finds it: 100 rows.
	rows, err := f.st.Pool().Query(ctx, `DELETE FROM outbox WHERE id > (SELECT id FROM outbox ORDER BY id OFFSET 99 LIMIT 1) RETURNING delivery_id, kind, app_id, held`)
	require.NoError(t, err)
	backlog, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	require.NoError(t, err)
	_, err = f.st.Pool().Exec(ctx, `ANALYZE`)
	require.NoError(t, err)
	plans := explainHotPool(t, f)
	runHotPath(t, f) // the kept plans are made here, on a small outbox
	enableAgain(t, f)
	n, err := f.st.Pool().CopyFrom(ctx, pgx.Identifier{"outbox"}, []string{"delivery_id", "kind", "app_id", "held"}, pgx.CopyFromRows(backlog))
	require.NoError(t, err)
	require.EqualValues(t, 19_900, n)
	first := len(plans())
	runHotPath(t, f)
	checkHotPlans(t, plans()[first:])
}

// enableAgain enables f's endpoint, which runHotPath's 410 disabled.
func enableAgain(t *testing.T, f fixture) {
	t.Helper()
	no := false
	_, _, err := f.st.PatchEndpoint(context.Background(), f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &no})
	require.NoError(t, err)
}

// explainHotPool gives f's store a hot pool of one connection set as the
// product sets it, with auto_explain logging each statement's plan, its
// buffers and its rows; plans returns the plans logged so far.
func explainHotPool(t *testing.T, f fixture) (plans func() []string) {
	t.Helper()
	var mu sync.Mutex
	var logged []string
	pool := testenv.PoolLike(t, f.st.Pool(), func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1
		cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, n.Message+"\n"+n.Detail)
		}
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, store.HotPoolSetup+`; LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_level = notice;
			SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_nested_statements = on`)
			return err
		}
	})
	f.st.UseHotPool(pool)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), logged...)
	}
}

// runHotPath runs on f's hot pool what ingest and the worker run there:
// publishes, both ways an attempt loads and claims, records, a dead
// letter and a 410.
func runHotPath(t *testing.T, f fixture) {
	t.Helper()
	ctx := context.Background()
	pool := f.st.HotPool()
	hot := f.st
	batched := f.batched(t)
	pub := outbox.NewPublisher()
	for i := range 6 {
		p, err := pub.PublishNow(ctx, pool, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{"n":1}`)})
		require.NoError(t, err)
		var dlv string
		for _, d := range p.Deliveries {
			if d.EndpointID == f.ep.ID {
				dlv = d.ID
			}
		}
		// The two ways an attempt loads and claims: apart, and in one
		// statement (ClaimTarget, coalesced as the worker runs it).
		if i%2 == 0 {
			_, err = hot.LoadTarget(ctx, dlv, time.Now())
			require.NoError(t, err)
			_, err = hot.ClaimAttempt(ctx, dlv, time.Now().Add(time.Minute))
			require.NoError(t, err)
		} else {
			_, claimed, err := batched.ClaimTarget(ctx, dlv, time.Now(), time.Now().Add(time.Minute))
			require.NoError(t, err)
			require.True(t, claimed)
		}
		code := 200
		require.NoError(t, hot.RecordAttempt(ctx, store.Attempt{DeliveryID: dlv, Cycle: 1, Number: 1, StartedAt: time.Now(), StatusCode: &code, Class: string(delivery.ClassSuccess)}))
	}
	// A sender's batch (the size a coalesced record has at full speed):
	// first attempts recorded on their start rows, the successes ending
	// them, the failures keeping their outcome.
	var batch []store.Attempt
	for i := range 8 {
		p, err := pub.PublishNow(ctx, pool, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{"n":5}`)})
		require.NoError(t, err)
		for _, d := range p.Deliveries {
			if d.EndpointID != f.ep.ID {
				continue
			}
			a := store.Attempt{DeliveryID: d.ID, Cycle: 1, Number: 1, StartedAt: time.Now(), Class: string(delivery.ClassSuccess)}
			require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT id FROM outbox WHERE delivery_id = $1`, d.ID).Scan(&a.OutboxID))
			code := 200
			if i%2 == 1 {
				code, a.Class, a.Outcome = 502, string(delivery.ClassRetryable), []byte(`{"class":"retryable"}`)
			}
			a.StatusCode = &code
			batch = append(batch, a)
		}
	}
	errs, err := hot.RecordAttempts(ctx, batch)
	require.NoError(t, err)
	for _, err := range errs {
		require.NoError(t, err)
	}
	// A dead letter (MarkDelivery) and a 410 (disables the endpoint,
	// cancels its in-flight deliveries, emits endpoint.disabled) on the
	// hot pool too.
	p, err := pub.PublishNow(ctx, pool, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{"n":2}`)})
	require.NoError(t, err)
	for _, d := range p.Deliveries {
		if d.EndpointID == f.ep.ID {
			_, err = hot.MarkDelivery(ctx, store.Mark{DeliveryID: d.ID, Status: delivery.StatusDeadLettered, Reason: "x", Cycle: 1})
			require.NoError(t, err)
		}
	}
	for range 3 { // in flight when the 410 comes: canceled by it
		_, err = pub.PublishNow(ctx, pool, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{"n":4}`)})
		require.NoError(t, err)
	}
	p, err = pub.PublishNow(ctx, pool, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{"n":3}`)})
	require.NoError(t, err)
	for _, d := range p.Deliveries {
		if d.EndpointID == f.ep.ID {
			code := 410
			require.NoError(t, hot.RecordAttempt(ctx, store.Attempt{DeliveryID: d.ID, Cycle: 1, Number: 1, StartedAt: time.Now(), StatusCode: &code, Class: string(delivery.ClassGone)}))
		}
	}
}

// checkHotPlans fails on a plan that reads a big table other than by key:
// a sequential scan of it, a scan of it that returns more than a handful
// of rows (a whole index read for a hash join), or a node that reads and
// drops more than a handful of rows.
func checkHotPlans(t *testing.T, plans []string) {
	t.Helper()
	seq := regexp.MustCompile(`Seq Scan on (outbox|deliveries|events|attempts)`)
	many := []*regexp.Regexp{
		regexp.MustCompile(`Scan (?:using \w+ )?on (?:outbox|deliveries|events|attempts)\b.*actual time=[0-9.]+ rows=([0-9]+)`),
		regexp.MustCompile(`Rows Removed by (?:Filter|Join Filter|Index Recheck): ([0-9]+)`),
	}
	dur := regexp.MustCompile(`(?i)duration: ([0-9.]+) ms`)
	for _, p := range plans {
		if seq.MatchString(p) {
			t.Errorf("a hot statement scans a big table:\n%s", p)
			continue
		}
		bad := false
		for _, re := range many {
			for _, m := range re.FindAllStringSubmatch(p, -1) {
				if n, _ := strconv.Atoi(m[1]); n > 100 {
					bad = true
				}
			}
		}
		if bad {
			t.Errorf("a hot statement reads and drops rows of a big table:\n%s", p)
		} else if m := dur.FindStringSubmatch(p); len(m) > 1 {
			t.Logf("duration %s ms: %.120s", m[1], strings.ReplaceAll(p, "\n", " | "))
		}
	}
}
