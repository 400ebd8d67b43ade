package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// seedLeased gives a second app an endpoint with n start rows leased
// until an hour from now (what a sender holds: first attempts waiting for
// their due time, or rows held until their endpoint's probe) and lapsed
// rows whose leases ended a second ago; it returns the lapsed rows'
// deliveries. It analyzes nothing.
func seedLeased(t testing.TB, f fixture, n, lapsed int) []string {
	t.Helper()
	ctx := context.Background()
	app, err := f.st.CreateApp(ctx, store.App{Name: "silent"})
	require.NoError(t, err)
	ep, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "https://example.com/silent", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	all := n + lapsed
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO events (app_id, id, type, payload, payload_hash, created)
		  SELECT $1, 'evt_lease_' || g, 'order.paid', '\x7b7d', '\x00', now() FROM generate_series(1, $2::int) g`, []any{app.ID, all}},
		{`INSERT INTO deliveries (id, app_id, event_id, endpoint_id, status)
		  SELECT 'dlv_lease_' || g, $1, 'evt_lease_' || g, $2, 'pending' FROM generate_series(1, $3::int) g`, []any{app.ID, ep.ID, all}},
		{`INSERT INTO outbox (delivery_id, kind, app_id, leased_until)
		  SELECT 'dlv_lease_' || g, 'start', $1, now() + CASE WHEN g <= $2::int THEN interval '1 hour' ELSE interval '-1 second' END
		  FROM generate_series(1, $3::int) g`, []any{app.ID, n, all}},
	} {
		_, err := f.st.Pool().Exec(ctx, q.sql, q.args...)
		require.NoError(t, err)
	}
	var ids []string
	for g := n + 1; g <= n+lapsed; g++ {
		ids = append(ids, "dlv_lease_"+strconv.Itoa(g))
	}
	return ids
}

// TestRoundReadsNoLeasedRow: a dispatcher's round and its look read the
// rows they may claim and none of the rows other apps' senders hold
// leased, however many: 20,000 here, the backlog of a tenant whose
// endpoint stopped answering for ten minutes. Before, both walked every
// leased row (50 ms a round beside 50,000), and every round of every
// tenant paid for that backlog. Checked on custom and generic plans.
func TestRoundReadsNoLeasedRow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	lapsed := seedLeased(t, f, 20_000, 3)
	quiet := []string{f.publish(t), f.publish(t)}
	_, err := f.st.Pool().Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	round, rows, err := store.BeginRound(ctx, f.st.Pool(), 200)
	require.NoError(t, err)
	var claimed []string
	for _, r := range rows {
		claimed = append(claimed, r.DeliveryID)
	}
	round.Close()
	require.ElementsMatch(t, append(quiet, lapsed...), claimed, "the quiet app's rows and the lapsed leases, no leased row")
	_, ok, err := store.NextOutboxClaim(ctx, f.st.Pool())
	require.NoError(t, err)
	require.True(t, ok)

	checkClaimPlans(t, f, 200)
}

// TestRoundReadsNoMoreLapsedRowsThanItClaims: beside 20,000 rows of one
// app whose leases lapsed together (a breaker's held rows at its probe's
// time, a dead worker's rows), a round of 50 reads 50 of them, not the
// whole backlog each round (review finding: the first version read every
// lapsed row, 33-37 ms a round against 3.4 ms before it).
func TestRoundReadsNoMoreLapsedRowsThanItClaims(t *testing.T) {
	t.Parallel()
	f := setup(t)
	seedLeased(t, f, 0, 20_000)
	f.publish(t)
	_, err := f.st.Pool().Exec(context.Background(), `ANALYZE`)
	require.NoError(t, err)
	checkClaimPlans(t, f, 50)
}

// checkClaimPlans fails on a plan of the claim (a round of limit rows) or
// of the look, custom or generic, that scans the outbox or reads more
// than 100 rows of a big table in one node (checkHotPlans).
func checkClaimPlans(t *testing.T, f fixture, limit int) {
	t.Helper()
	ctx := context.Background()
	conn, err := f.st.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, q := range []string{
		`PREPARE claim (text, int) AS ` + store.ClaimSQL,
		`PREPARE look (text) AS ` + store.NextClaimSQL,
	} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), `DEALLOCATE ALL`) }()
	cancel := string(outbox.KindCancel)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		_, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode)
		require.NoError(t, err)
		for _, q := range []string{`EXECUTE claim ('` + cancel + `', ` + strconv.Itoa(limit) + `)`, `EXECUTE look ('` + cancel + `')`} {
			checkHotPlans(t, []string{explain(t, conn.Conn(), q)})
		}
	}
}

// explain is the plan of q, run (EXPLAIN ANALYZE, BUFFERS) in a
// transaction rolled back.
func explain(t *testing.T, conn *pgx.Conn, q string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+q)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return q + "\n" + strings.Join(lines, "\n")
}

// BenchmarkRoundBesideLeasedRows is a round's cost (claim, roll back)
// that finds one app's row beside another app's 20,000 leased rows.
func BenchmarkRoundBesideLeasedRows(b *testing.B) {
	f := setup(b)
	ctx := context.Background()
	seedLeased(b, f, 20_000, 0)
	f.publish(b)
	_, err := f.st.Pool().Exec(ctx, `ANALYZE`)
	require.NoError(b, err)
	for b.Loop() {
		round, rows, err := store.BeginRound(ctx, f.st.Pool(), 200)
		require.NoError(b, err)
		require.Len(b, rows, 1)
		round.Close()
	}
}
