// Package planwarm makes a pool's kept plans again on its idle
// connections once a VACUUM or an ANALYZE dropped them. After one changed
// a table's statistics, Postgres drops every kept plan that reads the
// table, on every connection, and each connection plans again at its
// next use of the statement. A connection that stayed idle meanwhile (a
// pool keeps more than its everyday load uses) then plans on the path of
// whatever burst reached it first, together with the others the burst
// reached: five of them planning ingest's statement, the records and a
// claim at once (about 14 ms of CPU each) made a dozen first attempts
// 20-93 ms late on a 2-core machine (`hookrelay bench --noisy`). A Warmer
// plans them again on idle connections, one at a time, soon after it sees
// the count of VACUUMs and ANALYZEs change.
package planwarm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// IntervalDefault is how often a Warmer reads the database's count
	// of VACUUMs and ANALYZEs (pg_stat_user_tables).
	IntervalDefault = time.Second
	// lockTimeout is how long a plan waits for a lock on a table (one a
	// migration holds): past it Postgres gives up, the pass ends, and its
	// connection goes back to the pool open, its statements planned at
	// their next use.
	lockTimeout = 100 * time.Millisecond
	// statementTimeout bounds each statement a Warmer runs, on the server.
	statementTimeout = time.Second
	// backstop bounds each statement on the client too, for a server that
	// does not answer at all; pgx closes the connection past it.
	backstop = 5 * time.Second
)

// SQLSTATEs of a plan that waited too long: the pass ends there.
const (
	lockNotAvailable = "55P03"
	queryCanceled    = "57014"
)

// upkeepSQL counts the VACUUMs and ANALYZEs of the database's tables,
// autovacuum's and anyone else's: each may have dropped kept plans.
const upkeepSQL = `SELECT coalesce(sum(vacuum_count + autovacuum_count + analyze_count + autoanalyze_count), 0)::bigint
	FROM pg_stat_user_tables`

// keptSQL lists a connection's prepared statements that run on a kept
// (generic) plan, with their number of parameters, on a connection that
// keeps one plan per statement only: elsewhere Postgres may plan a
// statement for the NULLs of an EXPLAIN and count that plan's cost in its
// choice between kept and fresh plans. (Postgres 14 and later; on older
// ones the list fails and nothing is warmed.)
const keptSQL = `SELECT name, cardinality(parameter_types) FROM pg_prepared_statements
	WHERE generic_plans > 0 AND current_setting('plan_cache_mode') = 'force_generic_plan' ORDER BY name`

// Warmer plans a pool's prepared statements again on its idle connections
// once a VACUUM or an ANALYZE may have dropped their plans. It is meant
// for a pool whose connections keep one plan per statement whatever the
// parameters (plan_cache_mode = force_generic_plan): the plan it makes,
// with every parameter NULL, is the one the next execution uses. On a
// connection that plans for each execution's parameters it plans nothing.
// Plans dropped otherwise (a migration's DDL) are made at their next use.
type Warmer struct {
	// Pool is the pool whose idle connections are warmed.
	Pool *pgxpool.Pool
	// Stats is the pool the count of VACUUMs and ANALYZEs is read on.
	// Defaults to Pool.
	Stats *pgxpool.Pool
	// Interval is how often the count is read. Defaults to
	// IntervalDefault.
	Interval time.Duration
	// Logger receives the passes (debug) and what failed in them (warn: a
	// failed pass leaves the plans to be made at their next use, as
	// without a Warmer; a count not read is at debug level). Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Name names the Warmer among a process's services.
func (*Warmer) Name() string { return "plan warmer" }

// Run warms until ctx ends: each time the count of VACUUMs and ANALYZEs
// has changed since it last read it, it makes a pass (Warm), and another
// at the next read that finds it unchanged.
func (w *Warmer) Run(ctx context.Context) error {
	logger := cmp.Or(w.Logger, slog.Default())
	interval := w.Interval
	if interval <= 0 {
		interval = IntervalDefault
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last upkeep
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		last = w.turn(ctx, logger, last)
	}
}

// upkeep is what a turn read.
type upkeep struct {
	// count is the count of VACUUMs and ANALYZEs, once read.
	count int64
	read  bool
	// again: the count had changed, and the next turn makes another pass
	// even when it finds it unchanged. An ANALYZE's count moves as it
	// runs, while the plans it drops are dropped only when its
	// transaction commits, possibly after the pass the count set off.
	again bool
}

// turn reads the count of VACUUMs and ANALYZEs and makes a pass (Warm)
// when it changed since last, or when last owes one (again); it returns
// what it read, or last when it read nothing.
func (w *Warmer) turn(ctx context.Context, logger *slog.Logger, last upkeep) upkeep {
	n, err := w.count(ctx)
	if err != nil {
		if ctx.Err() == nil {
			// Postgres unreachable: whatever uses the pool says so.
			logger.Debug("count of VACUUMs and ANALYZEs not read; plans are made at their next use", "err", err)
		}
		return last
	}
	next := upkeep{count: n, read: true, again: last.read && n != last.count}
	if !next.again && !last.again {
		return next
	}
	began := time.Now()
	planned, err := w.Warm(ctx)
	if err != nil && ctx.Err() == nil {
		logger.Warn("plans not all made again; the rest are made at their next use", "planned", planned, "err", err)
		return next
	}
	logger.Debug("plans made again after a VACUUM or an ANALYZE", "statements", planned, "took", time.Since(began))
	return next
}

func (w *Warmer) count(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, backstop)
	defer cancel()
	var n int64
	err := cmp.Or(w.Stats, w.Pool).QueryRow(ctx, upkeepSQL, pgx.QueryExecModeSimpleProtocol).Scan(&n)
	return n, err
}

// Warm plans the kept statements of each idle connection again, the
// least recently used first, holding one connection at a time: the
// others stay free for the pool's users, and one a user takes meanwhile
// plans at its own next use. A plan that waits too long for a lock ends
// the pass. It returns how many statements it planned.
func (w *Warmer) Warm(ctx context.Context) (planned int, err error) {
	done := map[uint32]bool{}
	var errs []error
	for range w.Pool.Config().MaxConns {
		c := w.takeCold(ctx, done)
		if c == nil {
			break
		}
		done[c.Conn().PgConn().PID()] = true
		n, err := plan(ctx, c.Conn())
		c.Release()
		planned += n
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil || waited(err) {
			break
		}
	}
	return planned, errors.Join(errs...)
}

// waited reports whether err holds a statement that waited too long (for
// a lock, or past its timeout).
func waited(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pgErr.Code == lockNotAvailable || pgErr.Code == queryCanceled)
}

// takeCold takes the least recently used idle connection not in done and
// gives every other idle one back at once, the least recently used first,
// so the pool's order of use is kept; nil when there is none.
func (w *Warmer) takeCold(ctx context.Context, done map[uint32]bool) *pgxpool.Conn {
	idle := w.Pool.AcquireAllIdle(ctx) // the most recently used first
	var cold *pgxpool.Conn
	for i := len(idle) - 1; i >= 0; i-- {
		if cold == nil && !done[idle[i].Conn().PgConn().PID()] {
			cold = idle[i]
			continue
		}
		idle[i].Release()
	}
	return cold
}

// plan plans each kept statement of conn again (EXPLAIN EXECUTE, which
// plans and runs nothing) and returns how many it planned. It stops at a
// statement that waited too long, or that left conn closed.
func plan(ctx context.Context, conn *pgx.Conn) (int, error) {
	type kept struct {
		name   string
		params int
	}
	qctx, cancel := context.WithTimeout(ctx, backstop)
	rows, err := conn.Query(qctx, keptSQL, pgx.QueryExecModeSimpleProtocol)
	var list []kept
	if err == nil {
		var k kept
		_, err = pgx.ForEachRow(rows, []any{&k.name, &k.params}, func() error {
			list = append(list, k)
			return nil
		})
	}
	cancel()
	if err != nil {
		return 0, fmt.Errorf("list kept statements: %w", err)
	}
	// One implicit transaction per statement: the SET LOCALs end with it.
	limits := fmt.Sprintf("SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = %d; ",
		lockTimeout.Milliseconds(), statementTimeout.Milliseconds())
	planned := 0
	var errs []error
	for _, k := range list {
		explain := "EXPLAIN (COSTS OFF) EXECUTE " + pgx.Identifier{k.name}.Sanitize()
		if k.params > 0 {
			explain += "(" + strings.Repeat("NULL, ", k.params-1) + "NULL)"
		}
		ectx, cancel := context.WithTimeout(ctx, backstop)
		_, err := conn.Exec(ectx, limits+explain) // no arguments: the simple protocol, nothing prepared
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("plan %s again: %w", k.name, err))
			if waited(err) || conn.IsClosed() {
				break
			}
			continue
		}
		planned++
	}
	return planned, errors.Join(errs...)
}
