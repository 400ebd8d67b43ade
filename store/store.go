// Package store holds hookrelay's Postgres access: apps, API keys, event
// types, endpoints and their sealed secrets, frozen events, deliveries,
// attempts, replays and the outbox.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"hookrelay/delivery"
	"hookrelay/secretbox"
)

// Errors callers sort on, as package delivery defines them.
var (
	// ErrNotFound: no such object (or it belongs to another app).
	ErrNotFound = delivery.ErrNotFound
	// ErrConflict: the request contradicts stored state.
	ErrConflict = delivery.ErrConflict
)

// Store is the Postgres-backed repository.
type Store struct {
	pool *pgxpool.Pool
	// hot is the hot path's pool (UseHotPool), nil for the main pool.
	hot *pgxpool.Pool
	box *secretbox.Box
	// FailingAfter is how many consecutive dead letters make an endpoint
	// failing. Defaults to FailingAfterDefault.
	FailingAfter int
	// AutoDisableAfter is how long an unbroken run of dead letters (at
	// least AutoDisableMin of them) lasts before the endpoint is disabled.
	// Defaults to AutoDisableAfterDefault; negative never disables.
	AutoDisableAfter time.Duration
	// AutoDisableMin defaults to AutoDisableMinDefault.
	AutoDisableMin int
}

func (s *Store) failingAfter() int {
	if s.FailingAfter <= 0 {
		return FailingAfterDefault
	}
	return s.FailingAfter
}

// New returns a Store over pool; box seals endpoint secrets.
func New(pool *pgxpool.Pool, box *secretbox.Box) *Store {
	return &Store{pool: pool, box: box}
}

// UseHotPool runs the statements every delivery runs (an attempt's
// target, claim and record; ingest's publish takes HotPool itself) on hot,
// a pool whose connections keep their plans (HotPoolSetup). Everything
// else, a recorded attempt's follow-ups included, stays on the main pool.
func (s *Store) UseHotPool(hot *pgxpool.Pool) { s.hot = hot }

// HotPool is the pool of the hot path's statements: the one UseHotPool
// gave, else the main pool.
func (s *Store) HotPool() *pgxpool.Pool {
	if s.hot != nil {
		return s.hot
	}
	return s.pool
}

// HotPoolSetup is run on each new connection of the hot path's pool: a
// plan made once per connection and kept, instead of a new plan at every
// execution. With the default, Postgres plans these statements each time
// (their arrays make a custom plan look cheaper), a large share of
// Postgres's time per delivery (see pg_stat_statements' track_planning). Each
// of them finds its rows by key whatever the parameters, so a plan that
// reaches them by key is right for good; no other statement runs there
// but the plan warmer's (internal/planwarm), which makes them again on
// idle connections after a VACUUM or an ANALYZE dropped them.
// Sequential scans are off so that the kept plan is such a plan even when
// it is made on a new install's empty tables, before any ANALYZE: there
// a scan of the whole table is the cheapest way to read its one page,
// and the plan kept it as the table grew (each claim and record read
// every delivery and event until autovacuum's first ANALYZE made the plan
// again). A SET, not a startup parameter, so a connection pooler in front
// of Postgres accepts it; a pooler in transaction mode keeps it on the
// server connection that ran it, where other clients' statements run too.
const HotPoolSetup = `SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off`

// asyncCommit, a WHERE clause true of every row, makes its statement's
// own transaction commit without waiting for its WAL flush: set_config's
// local setting ends with that transaction, so the connection's next
// statement commits synchronously again.
const asyncCommit = `set_config('synchronous_commit', 'off', true) IS NOT NULL`

// HotPoolConns is the most connections of the hot path's pool: its
// statements are coalesced (Batched), so a few carry any rate.
const HotPoolConns = 8

// HotPoolLifetimeJitter spreads the ends of the hot pool's connections
// (all opened at start) over this much past their lifetime, so they are
// not all replaced at once.
const HotPoolLifetimeJitter = 10 * time.Minute

// Pool is the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// IsUnavailable reports whether err means the database could not be reached
// (as opposed to a query or constraint error). It sorts by error type only.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P0x: admin/crash shutdown.
		return pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var connErr *pgconn.ConnectError
	var opErr *net.OpError
	return errors.As(err, &connErr) || errors.As(err, &opErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// IsTransient reports whether a statement that failed with err may succeed
// when run again as it was: Postgres unreachable (IsUnavailable), or the
// statement lost a race it can win next time: a deadlock (40P01), a
// serialization failure (40001), a lock or statement timeout (55P03,
// 57014).
func IsTransient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40P01", "40001", "55P03", "57014":
			return true
		}
	}
	return IsUnavailable(err)
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// deadlockRetries is how many times inTxRetry runs a transaction again
// that Postgres aborted to break a deadlock.
const deadlockRetries = 3

// deadlockDetected is Postgres's SQLSTATE for a transaction aborted to
// break a deadlock.
const deadlockDetected = "40P01"

// inTxRetry is inTx for a transaction that locks rows in an order other
// statements may not share (an app's delete cascades through its
// endpoints, sequences, deliveries and outbox rows while senders update
// them): one that Postgres aborted to break a deadlock (40P01) is run
// again, from the start, in a new transaction.
func (s *Store) inTxRetry(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for try := 0; ; try++ {
		err := s.inTx(ctx, fn)
		var pgErr *pgconn.PgError
		if err == nil || try == deadlockRetries || !errors.As(err, &pgErr) || pgErr.Code != deadlockDetected {
			return err
		}
	}
}

func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}
