package planwarm

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

const (
	lookup = `SELECT v FROM t WHERE id = $1`
	other  = `SELECT count(*) FROM t WHERE id > $1`
)

// kept returns a pool of conns connections that keep one plan per
// statement (as hookrelay's hot pool does), each of which has run lookup
// once, with a table t of a few rows.
func kept(t *testing.T, conns int) *pgxpool.Pool {
	t.Helper()
	return openPool(t, conns, "force_generic_plan", 1)
}

// openPool is kept with the given plan_cache_mode, each connection having run
// lookup runs times.
func openPool(t *testing.T, conns int, mode string, runs int) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	base := pg.Pool(t, "planwarm", false)
	_, err := base.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text) WITH (autovacuum_enabled = off); INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g`)
	require.NoError(t, err)
	pool := testenv.PoolLike(t, base, func(cfg *pgxpool.Config) {
		cfg.MaxConns = int32(conns)
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, `SET plan_cache_mode = `+mode)
			return err
		}
	})
	var held []*pgxpool.Conn
	for range conns {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		for range runs {
			var v string
			require.NoError(t, c.QueryRow(ctx, lookup, 7).Scan(&v))
			require.Equal(t, "v7", v)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	return pool
}

// plans returns, per backend, how many times sql ran on its kept plan
// (pg_prepared_statements.generic_plans; an EXPLAIN EXECUTE counts), for
// each idle connection of pool.
func plans(t *testing.T, pool *pgxpool.Pool, sql string) map[uint32]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[uint32]int64{}
	for _, c := range pool.AcquireAllIdle(ctx) {
		var n int64
		err := c.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0)::bigint FROM pg_prepared_statements WHERE statement = $1`,
			pgx.QueryExecModeSimpleProtocol, sql).Scan(&n)
		require.NoError(t, err)
		out[c.Conn().PgConn().PID()] = n
		c.Release()
	}
	return out
}

func TestWarmPlansEveryIdleConnectionAgain(t *testing.T) {
	pool := kept(t, 3)
	require.Equal(t, []int64{1, 1, 1}, values(plans(t, pool, lookup)))
	n, err := (&Warmer{Pool: pool}).Warm(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, []int64{2, 2, 2}, values(plans(t, pool, lookup)))
	// Every connection is back in the pool, and its statement still answers.
	require.EqualValues(t, 3, pool.Stat().IdleConns())
	var v string
	require.NoError(t, pool.QueryRow(context.Background(), lookup, 9).Scan(&v))
	require.Equal(t, "v9", v)
}

func TestWarmLeavesAConnectionInUseAlone(t *testing.T) {
	ctx := context.Background()
	pool := kept(t, 3)
	busy, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer busy.Release() // a failed assertion must not leave the pool's Close waiting
	n, err := (&Warmer{Pool: pool}).Warm(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	pid := busy.Conn().PgConn().PID()
	busy.Release()
	got := plans(t, pool, lookup)
	require.EqualValues(t, 1, got[pid], "the connection in use is not planned for")
	delete(got, pid)
	require.Equal(t, []int64{2, 2}, values(got))
}

// turning returns kept(t, conns), a Warmer of it and its first turn.
func turning(t *testing.T, conns int) (*pgxpool.Pool, *Warmer, upkeep) {
	t.Helper()
	pool := kept(t, conns)
	w := &Warmer{Pool: pool}
	first := w.turn(context.Background(), slog.Default(), upkeep{})
	require.True(t, first.read)
	return pool, w, first
}

// otherTx begins a transaction on a connection of pool's database outside
// pool; it is rolled back, unless it ended, when t ends.
func otherTx(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	other := testenv.PoolLike(t, pool, func(cfg *pgxpool.Config) { cfg.MaxConns = 1; cfg.AfterConnect = nil })
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) }) // before the pool closes: cleanups run last first
	return tx
}

func TestTurnWarmsAfterAVacuumOrAnAnalyzeOnly(t *testing.T) {
	ctx, logger := context.Background(), slog.Default()
	pool, w, first := turning(t, 2)
	require.Equal(t, first, w.turn(ctx, logger, first))
	require.Equal(t, []int64{1, 1}, values(plans(t, pool, lookup)), "no pass without a VACUUM or an ANALYZE")
	_, err := pool.Exec(ctx, `ANALYZE t`)
	require.NoError(t, err)
	next := w.turn(ctx, logger, first)
	require.Greater(t, next.count, first.count)
	require.Equal(t, []int64{2, 2}, values(plans(t, pool, lookup)), "a pass after the ANALYZE")
	// The next turn makes one more (the ANALYZE's plans may drop only at
	// its commit, after the count moved), and then none.
	again := w.turn(ctx, logger, next)
	require.Equal(t, next.count, again.count)
	require.Equal(t, []int64{3, 3}, values(plans(t, pool, lookup)))
	w.turn(ctx, logger, again)
	require.Equal(t, []int64{3, 3}, values(plans(t, pool, lookup)))
}

// An ANALYZE in a transaction moves the count at once and drops the plans
// at its commit: the pass after the count changed plans on the old
// statistics, and the next turn plans again, on the new.
func TestTurnPlansAgainAfterTheAnalyzeCommitted(t *testing.T) {
	ctx, logger := context.Background(), slog.Default()
	pool, w, first := turning(t, 1)
	tx := otherTx(t, pool)
	_, err := tx.Exec(ctx, `ANALYZE t`)
	require.NoError(t, err)
	next := w.turn(ctx, logger, first)
	require.True(t, next.again, "the count moved before the commit")
	require.Equal(t, []int64{2}, values(plans(t, pool, lookup)))
	require.NoError(t, tx.Commit(ctx))
	w.turn(ctx, logger, next)
	require.Equal(t, []int64{3}, values(plans(t, pool, lookup)), "planned again after the commit")
}

// A table locked by a migration makes the pass end at its first plan,
// within the lock timeout, with every connection still open in the pool
// (the one it tried now used last).
func TestWarmEndsWhenATableIsLocked(t *testing.T) {
	ctx := context.Background()
	pool := kept(t, 3)
	pids := order(t, pool)
	tx := otherTx(t, pool)
	_, err := tx.Exec(ctx, `LOCK TABLE t IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	n, err := (&Warmer{Pool: pool}).Warm(ctx)
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, lockNotAvailable, pgErr.Code)
	require.Zero(t, n)
	require.ElementsMatch(t, pids, order(t, pool), "no connection closed")
	require.Equal(t, []int64{1, 1, 1}, values(plans(t, pool, lookup)), "one plan tried, none made")
	require.NoError(t, tx.Rollback(ctx))
	n, err = (&Warmer{Pool: pool}).Warm(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

func TestWarmKeepsThePoolsOrderOfUse(t *testing.T) {
	pool := kept(t, 3)
	pids := order(t, pool)
	_, err := (&Warmer{Pool: pool}).Warm(context.Background())
	require.NoError(t, err)
	require.Equal(t, pids, order(t, pool))
}

// order returns the PIDs of pool's idle connections, the most recently
// used first, leaving that order as it was.
func order(t *testing.T, pool *pgxpool.Pool) []uint32 {
	t.Helper()
	idle := pool.AcquireAllIdle(context.Background())
	pids := make([]uint32, len(idle))
	for i, c := range idle {
		pids[i] = c.Conn().PgConn().PID()
	}
	for i := len(idle) - 1; i >= 0; i-- {
		idle[i].Release()
	}
	return pids
}

func TestWarmGoesOnPastAStatementThatCannotBePlanned(t *testing.T) {
	ctx := context.Background()
	pool := kept(t, 1)
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `CREATE TABLE gone (id int PRIMARY KEY)`)
	require.NoError(t, err)
	var n int64
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM gone WHERE id > $1`, 0).Scan(&n))
	require.NoError(t, c.QueryRow(ctx, other, 0).Scan(&n))
	_, err = c.Exec(ctx, `DROP TABLE gone`)
	require.NoError(t, err)
	c.Release()
	planned, err := (&Warmer{Pool: pool}).Warm(ctx)
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "42P01", pgErr.Code, "undefined_table")
	require.Equal(t, 2, planned, "lookup and other are planned, gone's statement is not")
	require.Equal(t, []int64{2}, values(plans(t, pool, other)))
	require.EqualValues(t, 1, pool.Stat().IdleConns(), "the connection stays in the pool")
}

// On connections that plan each execution for its parameters (Postgres's
// default), an EXPLAIN with NULLs could make and count a plan for NULLs:
// Warm plans nothing there, even for statements that ran on a kept plan.
func TestWarmLeavesConnectionsThatPlanForParametersAlone(t *testing.T) {
	p := openPool(t, 2, "auto", 8) // the sixth run on keeps the generic plan
	before := plans(t, p, lookup)
	require.Equal(t, []int64{3, 3}, values(before))
	n, err := (&Warmer{Pool: p}).Warm(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, before, plans(t, p, lookup))
}

// values is m's values, in no order (all equal where the tests compare).
func values(m map[uint32]int64) []int64 { return slices.Collect(maps.Values(m)) }
