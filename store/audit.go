package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/access"
)

// AuditEntry is one state-changing call and who made it.
type AuditEntry struct {
	ID        int64       `json:"id,string"`
	At        time.Time   `json:"at"`
	AppID     string      `json:"app_id,omitempty"`
	ActorKind access.Kind `json:"actor_kind"`
	ActorID   string      `json:"actor_id"`
	ActorName string      `json:"actor_name"`
	Method    string      `json:"method"`
	Route     string      `json:"route"`
	Path      string      `json:"path"`
	Status    int         `json:"status"`
}

// Audit records e.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	var app *string
	if e.AppID != "" {
		app = &e.AppID
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_log (app_id, actor_kind, actor_id, actor_name, method, route, path, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, app, e.ActorKind, e.ActorID, e.ActorName, e.Method, e.Route, e.Path, e.Status)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// CursorError is a page cursor that no list answer gave.
type CursorError struct {
	Cursor string
}

func (e *CursorError) Error() string {
	return fmt.Sprintf("cursor %.64q is not one a list answered (next_cursor)", e.Cursor)
}

// ListAudit lists what was done to app, newest first; the page cursor is
// an entry's ID (a *CursorError when it is not).
func (s *Store) ListAudit(ctx context.Context, appID string, p Page) ([]AuditEntry, error) {
	var before *int64
	if p.Cursor != "" {
		id, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil || id <= 0 {
			return nil, &CursorError{Cursor: p.Cursor}
		}
		before = &id
	}
	rows, err := s.pool.Query(ctx, `SELECT id, at, coalesce(app_id, ''), actor_kind, actor_id, actor_name, method, route, path, status
		FROM audit_log WHERE app_id = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`, appID, before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[AuditEntry])
}
