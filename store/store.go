// Package store holds hookrelay's Postgres access: apps, API keys, event
// types, endpoints and their sealed secrets, frozen events, deliveries,
// attempts, replays and the outbox.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"hookrelay/secretbox"
)

// Errors callers sort on.
var (
	// ErrNotFound: no such object (or it belongs to another app).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request contradicts stored state (idempotency key
	// reused with another body).
	ErrConflict = errors.New("conflict")
)

// Store is the Postgres-backed repository.
type Store struct {
	pool *pgxpool.Pool
	box  *secretbox.Box
}

// New returns a Store over pool; box seals endpoint secrets.
func New(pool *pgxpool.Pool, box *secretbox.Box) *Store {
	return &Store{pool: pool, box: box}
}

// Pool is the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// IsUnavailable reports whether err means the database could not be reached
// (as opposed to a query or constraint error).
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
	return errors.As(err, &connErr) || pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded) || isNetErr(err)
}

func isNetErr(err error) bool {
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "unexpected EOF", "conn closed", "failed to connect"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
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

func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}
