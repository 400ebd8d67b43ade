package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

const eventTypeCols = `name, description, schema, deprecated, created_at, updated_at`

func scanEventType(r pgx.Row) (EventType, error) {
	var et EventType
	err := r.Scan(&et.Name, &et.Description, &et.Schema, &et.Deprecated, &et.CreatedAt, &et.UpdatedAt)
	return et, err
}

// nullJSON stores an empty schema as NULL.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// CreateEventType adds et to the catalog; ErrConflict if the name exists.
func (s *Store) CreateEventType(ctx context.Context, et EventType) (EventType, error) {
	out, err := scanEventType(s.pool.QueryRow(ctx, `
		INSERT INTO event_types (name, description, schema, deprecated) VALUES ($1, $2, $3, $4)
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

// GetEventType loads a catalog entry.
func (s *Store) GetEventType(ctx context.Context, name string) (EventType, error) {
	et, err := scanEventType(s.pool.QueryRow(ctx, `SELECT `+eventTypeCols+` FROM event_types WHERE name = $1`, name))
	if err != nil {
		return EventType{}, notFound(err, "event type "+name)
	}
	return et, nil
}

// ListEventTypes lists the catalog by name.
func (s *Store) ListEventTypes(ctx context.Context, p Page) ([]EventType, error) {
	return s.listEventTypes(ctx, p, nil)
}

// ListAppEventTypes lists the catalog as app's endpoints can subscribe to
// it: every type but the operational ones, which only OperationsApp's
// endpoints receive.
func (s *Store) ListAppEventTypes(ctx context.Context, appID string, p Page) ([]EventType, error) {
	if appID == OperationsApp {
		return s.listEventTypes(ctx, p, nil)
	}
	return s.listEventTypes(ctx, p, OperationalTypes())
}

func (s *Store) listEventTypes(ctx context.Context, p Page, except []string) ([]EventType, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventTypeCols+` FROM event_types
		WHERE ($1 = '' OR name > $1) AND name <> ALL ($3) ORDER BY name LIMIT $2`, p.Cursor, p.Limit, nonNil(except))
	if err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventType, error) { return scanEventType(r) })
}

// UpdateEventType changes the fields that are not nil.
func (s *Store) UpdateEventType(ctx context.Context, name string, description *string, schema json.RawMessage, deprecated *bool) (EventType, error) {
	et, err := scanEventType(s.pool.QueryRow(ctx, `
		UPDATE event_types SET description = COALESCE($2, description), schema = COALESCE($3::jsonb, schema),
		  deprecated = COALESCE($4, deprecated), updated_at = now()
		WHERE name = $1 RETURNING `+eventTypeCols, name, description, nullJSON(schema), deprecated))
	if err != nil {
		return EventType{}, notFound(err, "event type "+name)
	}
	return et, nil
}
