package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EventType is a catalog entry.
type EventType struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Deprecated  bool            `json:"deprecated"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// EventTypeLimitError is the answer to an event whose type would be one
// more of its app's own types than the app may have.
type EventTypeLimitError struct {
	AppID string
	Type  string
	Limit int
}

func (e *EventTypeLimitError) Error() string {
	return fmt.Sprintf("app %s already has %d event types of its own, the most it may have; %s is not one of them "+
		"(use an existing type, or ask the operator to define it)", e.AppID, e.Limit, e.Type)
}

const eventTypeCols = `name, description, schema, deprecated, created_at, updated_at`

func scanEventType(r pgx.Row) (EventType, error) {
	var et EventType
	err := r.Scan(&et.Name, &et.Description, &et.Schema, &et.Deprecated, &et.CreatedAt, &et.UpdatedAt)
	return et, err
}

func collectEventTypes(rows pgx.Rows, err error) ([]EventType, error) {
	if err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventType, error) { return scanEventType(r) })
}

// nullJSON stores an empty schema as NULL.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// CreateEventType adds et to the operator's catalog, which every app sees;
// ErrConflict if the name exists (as the operator's or an app's type).
func (s *Store) CreateEventType(ctx context.Context, et EventType) (EventType, error) {
	out, err := scanEventType(s.pool.QueryRow(ctx, `
		INSERT INTO event_types (name, description, schema, deprecated, operator) VALUES ($1, $2, $3, $4, true)
		ON CONFLICT (name) DO NOTHING RETURNING `+eventTypeCols,
		et.Name, et.Description, nullJSON(et.Schema), et.Deprecated))
	if errors.Is(err, pgx.ErrNoRows) {
		return EventType{}, fmt.Errorf("event type %s exists: %w", et.Name, ErrConflict)
	}
	if err != nil {
		return EventType{}, fmt.Errorf("create event type: %w", err)
	}
	return out, nil
}

// GetEventType loads a catalog entry, the operator's or one an app's
// events used.
func (s *Store) GetEventType(ctx context.Context, name string) (EventType, error) {
	et, err := scanEventType(s.pool.QueryRow(ctx, `SELECT `+eventTypeCols+` FROM event_types WHERE name = $1`, name))
	if err != nil {
		return EventType{}, notFound(err, "event type "+name)
	}
	return et, nil
}

// ListEventTypes lists every known type by name (the operator's view).
func (s *Store) ListEventTypes(ctx context.Context, p Page) ([]EventType, error) {
	return collectEventTypes(s.pool.Query(ctx, `SELECT `+eventTypeCols+` FROM event_types
		WHERE ($1 = '' OR name > $1) ORDER BY name LIMIT $2`, p.Cursor, p.Limit))
}

// ListAppEventTypes lists the catalog as app's endpoints can subscribe to
// it, by name: the operator's types and those the app's own events used,
// never another app's; the operational types only for OperationsApp.
func (s *Store) ListAppEventTypes(ctx context.Context, appID string, p Page) ([]EventType, error) {
	var except []string
	if appID != OperationsApp {
		except = OperationalTypes()
	}
	return collectEventTypes(s.pool.Query(ctx, `
		SELECT `+eventTypeCols+` FROM (
		  SELECT `+eventTypeCols+` FROM event_types WHERE operator
		  UNION ALL
		  SELECT a.name, '', NULL, false, a.created_at, a.created_at FROM app_event_types a
		  WHERE a.app_id = $1 AND NOT EXISTS (SELECT 1 FROM event_types t WHERE t.name = a.name AND t.operator)
		) c
		WHERE ($2 = '' OR name > $2) AND name <> ALL ($4) ORDER BY name LIMIT $3`, appID, p.Cursor, p.Limit, nonNil(except)))
}

// UpdateEventType changes the fields that are not nil. The type becomes
// the operator's: described by the operator, every app's catalog shows it.
func (s *Store) UpdateEventType(ctx context.Context, name string, description *string, schema json.RawMessage, deprecated *bool) (EventType, error) {
	et, err := scanEventType(s.pool.QueryRow(ctx, `
		UPDATE event_types SET description = COALESCE($2, description), schema = COALESCE($3::jsonb, schema),
		  deprecated = COALESCE($4, deprecated), operator = true, updated_at = now()
		WHERE name = $1 RETURNING `+eventTypeCols, name, description, nullJSON(schema), deprecated))
	if err != nil {
		return EventType{}, notFound(err, "event type "+name)
	}
	return et, nil
}

// KnowsEventType reports whether app's catalog holds name: the operator's
// type or one of the app's own.
func (s *Store) KnowsEventType(ctx context.Context, appID, name string) (bool, error) {
	var known bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM app_event_types WHERE app_id = $1 AND name = $2)
		OR EXISTS (SELECT 1 FROM event_types WHERE name = $2 AND operator)`, appID, name).Scan(&known)
	if err != nil {
		return false, fmt.Errorf("event type %s of app %s: %w", name, appID, err)
	}
	return known, nil
}

// AddAppEventType makes name one of app's own types unless its catalog
// already holds it; past limit types of its own the answer is an
// *EventTypeLimitError and nothing is added. Concurrent calls for one app
// are serialized, so the bound holds exactly.
func (s *Store) AddAppEventType(ctx context.Context, appID, name string, limit int) error {
	if known, err := s.KnowsEventType(ctx, appID, name); err != nil || known {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('app_event_types:' || $1, 0))`, appID); err != nil {
			return fmt.Errorf("lock event types of app %s: %w", appID, err)
		}
		var known bool
		var n int
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM app_event_types WHERE app_id = $1 AND name = $2),
			(SELECT count(*) FROM (SELECT 1 FROM app_event_types WHERE app_id = $1 LIMIT $3) own)`, appID, name, limit).Scan(&known, &n)
		switch {
		case err != nil:
			return fmt.Errorf("count event types of app %s: %w", appID, err)
		case known:
			return nil
		case n >= limit:
			return &EventTypeLimitError{AppID: appID, Type: name, Limit: limit}
		}
		_, err = tx.Exec(ctx, `INSERT INTO app_event_types (app_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, appID, name)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" {
			return fmt.Errorf("app %s: %w", appID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("add event type %s to app %s: %w", name, appID, err)
		}
		return nil
	})
}
