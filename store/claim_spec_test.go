package store_test

// The dispatcher's claim and look (store.ClaimSQL, store.NextClaimSQL),
// written for their indexes, against their definitions written plainly,
// on randomized outbox contents, each case in one transaction (one now()).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// specClaimSQL is what a round claims ($1 cancel, $2 the limit): of the
// rows it may claim (not held, not leased or lapsed, its delivery's
// oldest, not held back by a paused endpoint unless a cancel), each app's
// first $2 unleased rows by ID and its first $2 lapsed rows by lapse, of
// which its first $2 by ID; those of all apps in turn (every app's first,
// then every app's second, …), $2 in all, by ID.
const specClaimSQL = `
		WITH c AS (
		  SELECT o.id, o.app_id, o.leased_until FROM outbox o
		  LEFT JOIN deliveries d ON d.id = o.delivery_id
		  LEFT JOIN endpoints e ON e.id = d.endpoint_id
		  WHERE NOT o.held AND (o.leased_until IS NULL OR o.leased_until < now())
		    AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.delivery_id = o.delivery_id AND p.id < o.id)
		    AND NOT (o.kind <> $1 AND COALESCE(` + store.Holding + `, false))
		), first AS (
		  SELECT id, app_id, row_number() OVER (PARTITION BY app_id, leased_until IS NULL ORDER BY leased_until, id) AS k FROM c
		), ranked AS (
		  SELECT id, row_number() OVER (PARTITION BY app_id ORDER BY id) AS rn FROM first WHERE k <= $2
		)
		SELECT id FROM (SELECT id FROM ranked WHERE rn <= $2 ORDER BY rn, id LIMIT $2) x ORDER BY id`

// specLookSQL is when the next round is due ($1 cancel): the earliest
// claim_by of the unleased rows a round may claim (not held, not held
// back by a paused endpoint unless a cancel), or, when a lease lapsed,
// the first lapsed row's claim_by (by lapse, then ID) or now, whichever
// is earlier.
const specLookSQL = `
		WITH c AS (
		  SELECT o.id, o.claim_by, o.leased_until FROM outbox o
		  LEFT JOIN deliveries d ON d.id = o.delivery_id
		  LEFT JOIN endpoints e ON e.id = d.endpoint_id
		  WHERE NOT o.held AND NOT (o.kind <> $1 AND COALESCE(` + store.Holding + `, false))
		)
		SELECT LEAST((SELECT min(claim_by) FROM c WHERE leased_until IS NULL),
		             (SELECT LEAST(claim_by, now()) FROM c WHERE leased_until < now() ORDER BY leased_until, id LIMIT 1))`

// claimIDs runs claim statement sql (store.ClaimArgs) in tx and
// returns the IDs of the rows it claimed, in its order.
func claimIDs(t *testing.T, tx pgx.Tx, sql string, limit int) []int64 {
	t.Helper()
	rows, err := tx.Query(context.Background(), sql, store.ClaimArgs(limit)...)
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		v, err := rows.Values()
		require.NoError(t, err)
		ids = append(ids, v[0].(int64))
	}
	require.NoError(t, rows.Err())
	return ids
}

// look runs look statement sql ($1 cancel) in tx.
func look(t *testing.T, tx pgx.Tx, sql string) *time.Time {
	t.Helper()
	var at *time.Time
	require.NoError(t, tx.QueryRow(context.Background(), sql, outbox.KindCancel).Scan(&at))
	return at
}

// equivWorld is the apps, endpoints and deliveries (with their events)
// the random outboxes name.
type equivWorld struct {
	apps       []string
	endpoints  []string
	deliveries [][2]string // id, app
}

// seedEquivWorld makes nApps apps (f's first) with epsPerApp endpoints
// each and dlvPerEp deliveries per endpoint.
func seedEquivWorld(t *testing.T, f fixture, nApps, epsPerApp, dlvPerEp int) equivWorld {
	t.Helper()
	ctx := context.Background()
	var w equivWorld
	for a := range nApps {
		app := f.app
		if a > 0 {
			var err error
			app, err = f.st.CreateApp(ctx, store.App{Name: "eq" + strconv.Itoa(a)})
			require.NoError(t, err)
		}
		w.apps = append(w.apps, app.ID)
		for e := range epsPerApp {
			ep, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: fmt.Sprintf("https://example.com/%d/%d", a, e), Environment: "live",
				RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
			require.NoError(t, err)
			w.endpoints = append(w.endpoints, ep.ID)
			for d := range dlvPerEp {
				id := fmt.Sprintf("dlv_eq_%d_%d_%d", a, e, d)
				_, err := f.st.Pool().Exec(ctx, `INSERT INTO events (app_id, id, type, payload, payload_hash, created) VALUES ($1, $2, 'order.paid', '\x7b7d', '\x00', now())`, app.ID, "evt"+id)
				require.NoError(t, err)
				_, err = f.st.Pool().Exec(ctx, `INSERT INTO deliveries (id, app_id, event_id, endpoint_id, status) VALUES ($1, $2, $3, $4, 'pending')`, id, app.ID, "evt"+id, ep.ID)
				require.NoError(t, err)
				w.deliveries = append(w.deliveries, [2]string{id, app.ID})
			}
		}
	}
	return w
}

// fillRandom replaces the outbox (in tx) with n random rows.
func fillRandom(t *testing.T, tx pgx.Tx, r *rand.Rand, w equivWorld, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := tx.Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	// endpoint states
	for _, ep := range w.endpoints {
		_, err := tx.Exec(ctx, `UPDATE endpoints SET paused = $2, disabled = $3, deleted_at = CASE WHEN $4 THEN now() END WHERE id = $1`,
			ep, r.IntN(3) == 0, r.IntN(6) == 0, r.IntN(8) == 0)
		require.NoError(t, err)
	}
	// a subset of apps and deliveries in play, so several rows share one
	apps := w.apps[:1+r.IntN(len(w.apps))]
	// few deliveries (many rows each) to many
	keep := []int{2, 2, 5, 20}[r.IntN(4)]
	var dlvs [][2]string
	for _, d := range w.deliveries {
		for _, a := range apps {
			if d[1] == a && r.IntN(keep) == 0 {
				dlvs = append(dlvs, d)
			}
		}
	}
	kinds := []string{"start", "start", "replay", "cancel", "release"}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for i := range n {
		var dlv, app string
		switch x := r.IntN(10); {
		case x == 0 || len(dlvs) == 0: // a delivery that does not exist
			dlv, app = "dlv_gone_"+strconv.Itoa(r.IntN(4)), []string{"", apps[r.IntN(len(apps))]}[r.IntN(2)]
		default:
			d := dlvs[r.IntN(len(dlvs))]
			dlv, app = d[0], d[1]
			if r.IntN(15) == 0 {
				app = apps[r.IntN(len(apps))]
			}
		}
		var lease string
		switch r.IntN(10) {
		case 0, 1, 2, 3:
			lease = "NULL"
		case 4, 5:
			lease = fmt.Sprintf("now() - interval '%d seconds'", 1+r.IntN(100))
		case 6:
			lease = "now()"
		default:
			lease = fmt.Sprintf("now() + interval '%d seconds'", 1+r.IntN(100))
		}
		held := r.IntN(6) == 0
		claimBy := fmt.Sprintf("now() + interval '%d seconds'", r.IntN(200)-100)
		_, err := tx.Exec(ctx, `INSERT INTO outbox (id, delivery_id, kind, app_id, held, leased_until, claim_by) VALUES ($1, $2, $3, $4, $5, `+lease+`, `+claimBy+`)`,
			ids[i], dlv, kinds[r.IntN(len(kinds))], app, held)
		require.NoError(t, err)
	}
}

// TestClaimMatchesItsSpec: on randomized outboxes (several apps, rows of
// every kind, several per delivery, unleased, lapsed, leased, held, of
// paused, disabled and deleted endpoints and of deliveries that do not
// exist), with and without statistics, on custom and generic plans, the
// claim claims exactly its definition's rows in its order at every limit,
// and the look answers its definition.
func TestClaimMatchesItsSpec(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	w := seedEquivWorld(t, f, 5, 2, 8)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CLAIM_EQUIV_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	cases := 300
	if s := os.Getenv("CLAIM_EQUIV_CASES"); s != "" {
		cases, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d, %d cases", seed, cases)
	r := rand.New(rand.NewPCG(seed, 1))
	conn, err := f.st.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	nonEmpty, differ := 0, 0
	var shapes [3]int
	for c := range cases {
		// Alternate custom and generic plans (pgx prepares and caches).
		mode := []string{"auto", "force_generic_plan", "force_custom_plan"}[c%3]
		_, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode)
		require.NoError(t, err)
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		n := r.IntN(80)
		if r.IntN(10) == 0 {
			n = 100 + r.IntN(300)
		}
		fillRandom(t, tx, r, w, n)
		if r.IntN(4) == 0 {
			_, err = tx.Exec(ctx, `ANALYZE outbox`)
			require.NoError(t, err)
		}
		for _, limit := range []int{1, 2, 3, 5, 8, 13, 40, 1000} {
			want := claimIDs(t, tx, specClaimSQL, limit)
			got := claimIDs(t, tx, store.ClaimSQL, limit)
			if len(want) > 0 {
				nonEmpty++
			}
			if !slices.Equal(want, got) {
				differ++
				dump := outboxDump(t, tx)
				t.Errorf("case %d (seed %d, mode %s), limit %d: claim %v, its definition %v\n%s", c, seed, mode, limit, got, want, dump)
			}
		}
		all := claimIDs(t, tx, store.ClaimSQL, 1000)
		var lapsed, cancelPaused, notOldest int
		require.NoError(t, tx.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE o.leased_until < now()),
			count(*) FILTER (WHERE o.kind = 'cancel' AND e.paused AND NOT e.disabled AND e.deleted_at IS NULL),
			(SELECT count(*) FROM outbox x WHERE EXISTS (SELECT 1 FROM outbox y WHERE y.delivery_id = x.delivery_id AND y.id < x.id))
			FROM outbox o LEFT JOIN deliveries d ON d.id = o.delivery_id LEFT JOIN endpoints e ON e.id = d.endpoint_id
			WHERE o.id = ANY($1)`, all).Scan(&lapsed, &cancelPaused, &notOldest))
		shapes[0] += lapsed
		shapes[1] += cancelPaused
		shapes[2] += notOldest
		wantAt, gotAt := look(t, tx, specLookSQL), look(t, tx, store.NextClaimSQL)
		if (wantAt == nil) != (gotAt == nil) || (wantAt != nil && !wantAt.Equal(*gotAt)) {
			differ++
			t.Errorf("case %d (seed %d): look %v, its definition %v\n%s", c, seed, gotAt, wantAt, outboxDump(t, tx))
		}
		require.NoError(t, tx.Rollback(ctx))
		if differ > 5 {
			t.FailNow()
		}
	}
	t.Logf("%d cases x 8 limits, %d non-empty claims; at limit 1000 claimed %d lapsed rows, %d cancels of paused endpoints; %d rows behind an older row of their delivery in the outboxes",
		cases, nonEmpty, shapes[0], shapes[1], shapes[2])
	require.Greater(t, nonEmpty, cases)
}

// outboxDump lists the outbox in tx, a row a line, for a failure.
func outboxDump(t *testing.T, tx pgx.Tx) string {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT o.id, o.app_id, o.delivery_id, o.kind, o.held,
		CASE WHEN o.leased_until IS NULL THEN 'unleased' WHEN o.leased_until < now() THEN 'lapsed' WHEN o.leased_until = now() THEN 'now' ELSE 'future' END,
		COALESCE(e.paused::text, '-') || '/' || COALESCE(e.disabled::text, '-') || '/' || COALESCE((e.deleted_at IS NOT NULL)::text, '-')
		FROM outbox o LEFT JOIN deliveries d ON d.id = o.delivery_id LEFT JOIN endpoints e ON e.id = d.endpoint_id ORDER BY o.id`)
	require.NoError(t, err)
	out := ""
	for rows.Next() {
		v, err := rows.Values()
		require.NoError(t, err)
		out += fmt.Sprintln(v...)
	}
	return out
}

// TestMigration023DownUp: 023 reverses (outbox_app_ready back, its three
// indexes gone) and applies again, with rows in the outbox.
func TestMigration023DownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	f.publish(t)
	seedLeased(t, f, 10, 2)
	db := stdlib.OpenDBFromPool(f.st.Pool())
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("../migrations"))
	require.NoError(t, err)
	indexes := func() []string {
		rows, err := f.st.Pool().Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'outbox' ORDER BY 1`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	_, err = p.DownTo(ctx, 22)
	require.NoError(t, err)
	down := indexes()
	require.Contains(t, down, "outbox_app_ready")
	for _, name := range []string{"outbox_app_unleased", "outbox_app_lapse", "outbox_lapse"} {
		require.NotContains(t, down, name)
	}
	_, err = p.Up(ctx)
	require.NoError(t, err)
	up := indexes()
	require.NotContains(t, up, "outbox_app_ready")
	for _, name := range []string{"outbox_app_unleased", "outbox_app_lapse", "outbox_lapse"} {
		require.Contains(t, up, name)
	}
}
