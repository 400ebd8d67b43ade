// Package planwarm keeps the kept plans of a pool's idle connections
// made: after a VACUUM or an ANALYZE changed a table's statistics,
// Postgres drops every kept plan that reads the table, on every
// connection, and each connection plans again at its next use of the
// statement. A connection that stayed idle meanwhile (a pool keeps more
// than its everyday load uses) then plans on the path of whatever burst
// reached it first, together with the others the burst reached: five or
// six of them planning ingest's statement at once took both cores of a
// 2-core machine for 100-200 ms and made a dozen first attempts 20-93 ms
// late (`hookrelay bench --noisy`). A Warmer plans them again on idle
// connections, one at a time, as soon as it sees the statistics change.
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
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// IntervalDefault is how often a Warmer reads the database's count
	// of VACUUMs and ANALYZEs (pg_stat_user_tables).
	IntervalDefault = time.Second
	// statementTimeout bounds each statement a Warmer runs: a plan waits
	// for a lock a migration holds, and the Warmer gives its connection
	// back instead of waiting with it.
	statementTimeout = time.Second
)

// upkeepSQL counts the VACUUMs and ANALYZEs of the database's tables,
// autovacuum's and anyone else's: each may have dropped kept plans.
const upkeepSQL = `SELECT coalesce(sum(vacuum_count + autovacuum_count + analyze_count + autoanalyze_count), 0)::bigint
	FROM pg_stat_user_tables`

// keptSQL lists a connection's prepared statements that run on a kept
// (generic) plan, with their number of parameters, on a connection that
// keeps one plan per statement only: elsewhere Postgres may plan a
// statement for the NULLs of an EXPLAIN and count that plan's cost in its
// choice between kept and fresh plans.
const keptSQL = `SELECT name, cardinality(parameter_types) FROM pg_prepared_statements
	WHERE generic_plans > 0 AND current_setting('plan_cache_mode') = 'force_generic_plan' ORDER BY name`

// Warmer plans a pool's prepared statements again on its idle connections
// once a VACUUM or an ANALYZE may have dropped their plans. It is meant
// for a pool whose connections keep one plan per statement whatever the
// parameters (plan_cache_mode = force_generic_plan): the plan it makes,
// with every parameter NULL, is the one the next execution uses. On a
// connection that plans for each execution's parameters it plans nothing.
type Warmer struct {
	// Pool is the pool whose idle connections are warmed.
	Pool *pgxpool.Pool
	// Interval is how often the count of VACUUMs and ANALYZEs is read.
	// Defaults to IntervalDefault.
	Interval time.Duration
	// Logger receives what failed, at debug level (a failed pass leaves
	// the plans to be made at their next use, as without a Warmer).
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Name names the Warmer among a process's services.
func (*Warmer) Name() string { return "plan warmer" }

// Run warms until ctx ends: each time the count of VACUUMs and ANALYZEs
// has changed since it last read it, it makes one pass (Warm).
func (w *Warmer) Run(ctx context.Context) error {
	logger := cmp.Or(w.Logger, slog.Default())
	t := time.NewTicker(cmp.Or(w.Interval, IntervalDefault))
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		last = w.turn(ctx, logger, last)
	}
}

// turn reads the count of VACUUMs and ANALYZEs and, when it differs from
// last (-1: none read yet), makes a pass (Warm); it returns the count it
// read, or last when it read none.
func (w *Warmer) turn(ctx context.Context, logger *slog.Logger, last int64) int64 {
	n, err := w.upkeep(ctx)
	if err != nil {
		logger.Debug("upkeep count not read; plans are made at their next use", "err", err)
		return last
	}
	if last >= 0 && n != last {
		began := time.Now()
		planned, err := w.Warm(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Debug("plans not all made again; the rest are made at their next use", "err", err)
		}
		logger.Debug("plans made again after a VACUUM or an ANALYZE", "statements", planned, "took", time.Since(began))
	}
	return n
}

func (w *Warmer) upkeep(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	var n int64
	err := w.Pool.QueryRow(ctx, upkeepSQL, pgx.QueryExecModeSimpleProtocol).Scan(&n)
	return n, err
}

// Warm plans the kept statements of each idle connection again, the
// least recently used first, holding one connection at a time: the
// others stay free for the pool's users, and one a user takes meanwhile
// plans at its own next use. It returns how many statements it planned.
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
		if ctx.Err() != nil {
			break
		}
	}
	return planned, errors.Join(errs...)
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
// plans and runs nothing) and returns how many it planned.
func plan(ctx context.Context, conn *pgx.Conn) (int, error) {
	type kept struct {
		name   string
		params int
	}
	qctx, cancel := context.WithTimeout(ctx, statementTimeout)
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
	planned := 0
	var errs []error
	for _, k := range list {
		explain := "EXPLAIN (COSTS OFF) EXECUTE " + pgx.Identifier{k.name}.Sanitize()
		if k.params > 0 {
			explain += "(" + strings.Repeat("NULL, ", k.params-1) + "NULL)"
		}
		ectx, cancel := context.WithTimeout(ctx, statementTimeout)
		_, err := conn.Exec(ectx, explain) // no arguments: the simple protocol, nothing prepared
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("plan %s again: %w", k.name, err))
			if conn.IsClosed() {
				break
			}
			continue
		}
		planned++
	}
	return planned, errors.Join(errs...)
}
