package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/ids"
	"hookrelay/signing"
)

// insertSecret stores a new current key (sealed) with its public key, if
// it has one.
func (s *Store) insertSecret(ctx context.Context, tx pgx.Tx, endpointID, secret, public string) error {
	id := ids.New(ids.Secret)
	sealed, err := s.box.Seal([]byte(secret), []byte(id))
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO endpoint_secrets (id, endpoint_id, sealed, status, public_key) VALUES ($1, $2, $3, 'current', NULLIF($4, ''))`,
		id, endpointID, sealed, public); err != nil {
		return fmt.Errorf("store secret: %w", err)
	}
	return nil
}

// RotateSecret makes a new current secret; the old current one keeps
// signing until now+grace (a zero grace revokes it at once).
func (s *Store) RotateSecret(ctx context.Context, appID, endpointID string, grace time.Duration) (Rotated, error) {
	var r Rotated
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var scheme string
		err := tx.QueryRow(ctx, `SELECT signature_scheme FROM endpoints WHERE app_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE`,
			appID, endpointID).Scan(&scheme)
		if err != nil {
			return notFound(err, "endpoint "+endpointID)
		}
		key, public, err := signing.GenerateKey(scheme)
		if err != nil {
			return err
		}
		if public == "" {
			r.Secret = key
		}
		r.PublicKey = public
		until := &r.PreviousValidUntil
		if err := tx.QueryRow(ctx, `SELECT now() + $1 * interval '1 millisecond'`, grace.Milliseconds()).Scan(until); err != nil {
			return fmt.Errorf("rotate: %w", err)
		}
		// Only one previous key signs at a time: older ones are revoked.
		if _, err := tx.Exec(ctx, `UPDATE endpoint_secrets SET status = 'revoked' WHERE endpoint_id = $1 AND status = 'previous'`, endpointID); err != nil {
			return fmt.Errorf("rotate: %w", err)
		}
		status := "previous"
		if grace <= 0 {
			status = "revoked"
		}
		if _, err := tx.Exec(ctx, `UPDATE endpoint_secrets SET status = $2, valid_until = $3 WHERE endpoint_id = $1 AND status = 'current'`,
			endpointID, status, *until); err != nil {
			return fmt.Errorf("rotate: %w", err)
		}
		return s.insertSecret(ctx, tx, endpointID, key, public)
	})
	if err != nil {
		return Rotated{}, err
	}
	r.PreviousValidUntil = r.PreviousValidUntil.UTC()
	return r, nil
}

// Rotated is a rotation's result: the new HMAC secret, or the new Ed25519
// key's public key (the signing key itself is never shown), and until when
// the previous key keeps signing.
type Rotated struct {
	Secret, PublicKey  string
	PreviousValidUntil time.Time
}

// RevokePrevious stops previous secrets from signing now.
func (s *Store) RevokePrevious(ctx context.Context, appID, endpointID string) (int64, error) {
	if _, err := s.GetEndpoint(ctx, appID, endpointID); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE endpoint_secrets SET status = 'revoked', valid_until = now()
		WHERE endpoint_id = $1 AND status = 'previous'`, endpointID)
	if err != nil {
		return 0, fmt.Errorf("revoke previous secret: %w", err)
	}
	return tag.RowsAffected(), nil
}
