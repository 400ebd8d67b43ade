package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"hookrelay/access"
	"hookrelay/ids"
)

// APIKey is a stored API key: never the key itself, only its hash and the
// first characters it is recognised by.
type APIKey struct {
	ID     string      `json:"id"`
	Name   string      `json:"name"`
	Role   access.Role `json:"role"`
	AppID  string      `json:"app_id,omitempty"`
	Prefix string      `json:"prefix"`
	// Bootstrap marks the key configured as HOOKRELAY_ADMIN_KEY.
	Bootstrap  bool       `json:"bootstrap"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// Principal is who a request made with k acts as.
func (k APIKey) Principal() access.Principal {
	return access.Principal{Kind: access.KindKey, ID: k.ID, Name: k.Name, Role: k.Role, AppID: k.AppID}
}

// BootstrapKeyName names the key configured as HOOKRELAY_ADMIN_KEY.
const BootstrapKeyName = "admin (configured)"

const keyCols = `id, name, role, coalesce(app_id, ''), prefix, bootstrap, created_at, last_used_at`

func scanKey(r pgx.Row) (APIKey, error) {
	var k APIKey
	err := r.Scan(&k.ID, &k.Name, &k.Role, &k.AppID, &k.Prefix, &k.Bootstrap, &k.CreatedAt, &k.LastUsedAt)
	return k, err
}

// HashKey returns the stored form of an API key.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// NewKey returns a new random API key for role: "hr_admin_…" or "hr_app_…"
// and 256 random bits.
func NewKey(role access.Role) (string, error) {
	t, err := randomToken()
	if err != nil {
		return "", err
	}
	return "hr_" + string(role) + "_" + t, nil
}

// keyPrefix is what a key is recognised by in listings.
func keyPrefix(key string) string {
	return key[:min(len(key), 12)]
}

// EnsureAdminKey makes key the bootstrap admin key: stored when there is
// none; when it changed, the old one is revoked (every process stops
// accepting it, as for any revocation) and the new one stored under a new
// ID; when it is the same, nothing changes (revoked or not).
func (s *Store) EnsureAdminKey(ctx context.Context, key string) error {
	h := HashKey(key)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET bootstrap = false, revoked_at = coalesce(revoked_at, now())
			WHERE bootstrap AND key_hash <> $1`, h); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (id, key_hash, prefix, role, name, bootstrap) VALUES ($1, $2, $3, 'admin', $4, true)
			ON CONFLICT DO NOTHING`, ids.New(ids.APIKey), h, keyPrefix(key), BootstrapKeyName)
		return err
	})
	if err != nil {
		return fmt.Errorf("store admin key: %w", err)
	}
	return nil
}

// CreateKey makes a key named name with role (bound to appID for
// access.RoleApp) and returns it with the key itself, which is not stored.
func (s *Store) CreateKey(ctx context.Context, name string, role access.Role, appID string) (APIKey, string, error) {
	secret, err := NewKey(role)
	if err != nil {
		return APIKey{}, "", err
	}
	var app *string
	if role == access.RoleApp {
		app = &appID
	}
	k, err := scanKey(s.pool.QueryRow(ctx, `
		INSERT INTO api_keys (id, key_hash, prefix, role, name, app_id) VALUES ($1, $2, $3, $4, $5, $6)
		RETURNING `+keyCols, ids.New(ids.APIKey), HashKey(secret), keyPrefix(secret), role, name, app))
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" {
			return APIKey{}, "", fmt.Errorf("app %s: %w", appID, ErrNotFound)
		}
		return APIKey{}, "", fmt.Errorf("create API key: %w", err)
	}
	return k, secret, nil
}

// ListKeys lists the keys not revoked, newest first.
func (s *Store) ListKeys(ctx context.Context, p Page) ([]APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyCols+` FROM api_keys
		WHERE revoked_at IS NULL AND ($1 = '' OR id < $1) ORDER BY id DESC LIMIT $2`, p.Cursor, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) { return scanKey(r) })
}

// RevokeKey revokes key id: the next request made with it is refused.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, id)
	if err != nil {
		return fmt.Errorf("revoke API key %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("API key %s: %w", id, ErrNotFound)
	}
	return nil
}

// LastRevocation is when a key was last revoked (zero: never): a process
// caching verified keys drops its cache when this moves.
func (s *Store) LastRevocation(ctx context.Context) (time.Time, error) {
	var at *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT max(revoked_at) FROM api_keys`).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("last revocation: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// Authenticate returns the stored key key is, unless it is unknown or
// revoked (ErrNotFound), and records that it was used. The lookup is by
// SHA-256 hash: no timing reveals how much of a key matched.
func (s *Store) Authenticate(ctx context.Context, key string) (APIKey, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `
		UPDATE api_keys SET last_used_at = now() WHERE key_hash = $1 AND revoked_at IS NULL
		RETURNING `+keyCols, HashKey(key)))
	if err != nil {
		return APIKey{}, notFound(err, "API key")
	}
	return k, nil
}
