// Package inbox is the receiving half's durable acceptance on Postgres
// (docs/contract.md#9-receivers): Accept dedupes an event inside the caller's transaction
// with its business change, and a durable task inbox runs external side
// effects (pending → processing → completed) with retries, crash recovery
// and a stable idempotency key.
package inbox

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrDuplicate reports an event whose effect already committed.
var ErrDuplicate = errors.New("inbox: event already processed")

// Migrate creates the inbox tables (versions in webhook_inbox_version).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrate(ctx, db)
}

func migrate(ctx context.Context, db *sql.DB) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("inbox migration lock: %w", err)
	}
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("inbox migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithTableName("webhook_inbox_version"), goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("inbox migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply inbox migrations: %w", err)
	}
	return nil
}

// Accept records (source, eventID) inside tx, the transaction that also
// makes the business change. It returns ErrDuplicate when that event's
// effect already committed: do nothing more and answer 2xx. A concurrent
// duplicate blocks until the first transaction ends and then sees its
// outcome; a rolled-back transaction leaves no row, so the retry is
// processed.
func Accept(ctx context.Context, tx pgx.Tx, source, eventID string) error {
	if source == "" || eventID == "" {
		return errors.New("inbox: source and event ID are required")
	}
	tag, err := tx.Exec(ctx, `INSERT INTO webhook_inbox_seen (source, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, source, eventID)
	if err != nil {
		return fmt.Errorf("inbox accept %s/%s: %w", source, eventID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrDuplicate
	}
	return nil
}

// Task is one external side effect of an event.
type Task struct {
	ID       int64
	Source   string
	EventID  string
	Kind     string
	Payload  []byte
	Attempts int
	// Lease is the claim's number: only the worker holding the current one
	// may complete, reschedule or extend the task.
	Lease int64
}

// IdempotencyKey is stable across every retry of the task: pass it to the
// external system so a retried side effect happens once.
func (t Task) IdempotencyKey() string { return t.Source + ":" + t.EventID + ":" + t.Kind }

// Enqueue adds a side effect inside tx; it commits (or not) with the dedupe
// row and the business change. Enqueuing the same (source, event, kind)
// twice is a no-op.
func Enqueue(ctx context.Context, tx pgx.Tx, t Task) error {
	_, err := tx.Exec(ctx, `INSERT INTO webhook_inbox_tasks (source, event_id, kind, payload) VALUES ($1, $2, $3, $4)
		ON CONFLICT (source, event_id, kind) DO NOTHING`, t.Source, t.EventID, t.Kind, t.Payload)
	if err != nil {
		return fmt.Errorf("inbox enqueue %s/%s: %w", t.EventID, t.Kind, err)
	}
	return nil
}
