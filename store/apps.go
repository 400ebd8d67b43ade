package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"

	"hookrelay/ids"
)

// App is one tenant of the provider.
type App struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Retention overrides the server's retention for this app's deliveries
	// and events; 0 keeps the server's.
	Retention time.Duration `json:"-"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
}

// appColumns are what scanApp reads, in order.
const appColumns = `id, name, coalesce(retention_ms, 0), created_at, updated_at`

func scanApp(r pgx.Row) (App, error) {
	var a App
	var ms int64
	if err := r.Scan(&a.ID, &a.Name, &ms, &a.CreatedAt, &a.UpdatedAt); err != nil {
		return App{}, err
	}
	a.Retention = time.Duration(ms) * time.Millisecond
	return a, nil
}

// retentionMS is d as stored: NULL for the server's.
func retentionMS(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// Page bounds a list: at most Limit rows after Cursor (an ID, exclusive).
type Page struct {
	Limit  int
	Cursor string
}

// CreateApp stores a new app with a.Name and a.Retention.
func (s *Store) CreateApp(ctx context.Context, a App) (App, error) {
	a, err := scanApp(s.pool.QueryRow(ctx, `INSERT INTO apps (id, name, retention_ms) VALUES ($1, $2, $3) RETURNING `+appColumns,
		ids.New(ids.App), a.Name, retentionMS(a.Retention)))
	if err != nil {
		return App{}, fmt.Errorf("create app: %w", err)
	}
	return a, nil
}

// GetApp loads an app.
func (s *Store) GetApp(ctx context.Context, id string) (App, error) {
	a, err := scanApp(s.pool.QueryRow(ctx, `SELECT `+appColumns+` FROM apps WHERE id = $1`, id))
	if err != nil {
		return App{}, notFound(err, "app "+id)
	}
	return a, nil
}

// ListApps lists apps newest first.
func (s *Store) ListApps(ctx context.Context, p Page) ([]App, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+appColumns+` FROM apps
		WHERE $1 = '' OR id < $1 ORDER BY id DESC LIMIT $2`, p.Cursor, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (App, error) { return scanApp(r) })
}

// AppPatch is a change to an app: nil fields stay as they are; a Retention
// of 0 goes back to the server's.
type AppPatch struct {
	Name      *string
	Retention *time.Duration
}

// UpdateApp writes the fields p gives.
func (s *Store) UpdateApp(ctx context.Context, id string, p AppPatch) (App, error) {
	var ms *int64
	if p.Retention != nil {
		ms = retentionMS(*p.Retention)
	}
	a, err := scanApp(s.pool.QueryRow(ctx, `
		UPDATE apps SET name = coalesce($2, name),
		  retention_ms = CASE WHEN $3 THEN $4 ELSE retention_ms END, updated_at = now()
		WHERE id = $1 RETURNING `+appColumns, id, p.Name, p.Retention != nil, ms))
	if err != nil {
		return App{}, notFound(err, "app "+id)
	}
	return a, nil
}

// DeleteApp deletes an app with its endpoints, events and deliveries. In
// the same transaction every workflow of the app that may still run gets a
// cancel through the outbox (cancel rows keep no reference to deliveries,
// so they outlive the delete), and its start and replay rows go. Attempts
// of a deleted delivery find no row and end their workflow, so nothing is
// sent after the delete commits.
func (s *Store) DeleteApp(ctx context.Context, id string) error {
	return s.inTxRetry(ctx, func(tx pgx.Tx) error {
		// The app's deliveries are locked first, in ID order, as an
		// attempt's record locks its deliveries before their outbox rows:
		// the delete's cascade then takes no delivery or outbox row a
		// record holds while waiting for one the delete holds.
		rows, err := tx.Query(ctx, `SELECT id, status = ANY ($2) OR status = $3 FROM deliveries WHERE app_id = $1 ORDER BY id FOR UPDATE`,
			id, delivery.InFlight(), delivery.StatusDeadLettered)
		if err != nil {
			return fmt.Errorf("open deliveries of app %s: %w", id, err)
		}
		var open []string
		var dlv string
		var isOpen bool
		if _, err := pgx.ForEachRow(rows, []any{&dlv, &isOpen}, func() error {
			if isOpen {
				open = append(open, dlv)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("open deliveries of app %s: %w", id, err)
		}
		if err := DropAppOutbox(ctx, tx, id); err != nil {
			return err
		}
		if err := CancelWorkflows(ctx, tx, open, "app deleted"); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM apps WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("delete app %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("app %s: %w", id, ErrNotFound)
		}
		return nil
	})
}
