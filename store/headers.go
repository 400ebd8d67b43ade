package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// HeaderMask is what reads show in place of a custom header's value; a PATCH
// that sends it back keeps the stored value.
const HeaderMask = "••••••"

// sealBatch is how many rows one statement of SealLegacyHeaders seals.
const sealBatch = 500

// sealHeaders returns the masked view of headers (names only) and the
// sealed values, bound to the endpoint.
func (s *Store) sealHeaders(endpointID string, headers map[string]string) (masked, sealed []byte, err error) {
	view := make(map[string]string, len(headers))
	for k := range headers {
		view[k] = HeaderMask
	}
	if masked, err = json.Marshal(view); err != nil {
		return nil, nil, fmt.Errorf("endpoint headers: %w", err)
	}
	plain, err := json.Marshal(headers)
	if err != nil {
		return nil, nil, fmt.Errorf("endpoint headers: %w", err)
	}
	if sealed, err = s.box.Seal(plain, []byte("headers:"+endpointID)); err != nil {
		return nil, nil, err
	}
	return masked, sealed, nil
}

// openHeaders returns an endpoint's header values: sealed when set, else
// the plaintext of a row written before headers were sealed.
func (s *Store) openHeaders(endpointID string, sealed, plain []byte) (map[string]string, error) {
	if sealed != nil {
		var err error
		if plain, err = s.box.Open(sealed, []byte("headers:"+endpointID)); err != nil {
			return nil, fmt.Errorf("endpoint %s headers: %w", endpointID, err)
		}
	}
	out := map[string]string{}
	if err := json.Unmarshal(plain, &out); err != nil {
		return nil, fmt.Errorf("endpoint %s headers: %w", endpointID, err)
	}
	return out, nil
}

// mergeHeaders is a PATCH's new headers: a masked value keeps the stored
// one for that name.
func mergeHeaders(next, stored map[string]string) map[string]string {
	out := make(map[string]string, len(next))
	for k, v := range next {
		if old, ok := stored[k]; ok && v == HeaderMask {
			v = old
		}
		out[k] = v
	}
	return out
}

// SealLegacyHeaders seals the headers of rows written before headers were
// sealed, sealBatch rows per statement, and returns how many it sealed.
func (s *Store) SealLegacyHeaders(ctx context.Context) (int, error) {
	return s.rewrite(ctx, "seal legacy headers", `SELECT id, headers FROM endpoints WHERE headers_sealed IS NULL LIMIT $1 FOR UPDATE`, nil,
		func(ctx context.Context, tx pgx.Tx, id string, plain []byte) error {
			h, err := s.openHeaders(id, nil, plain)
			if err != nil {
				return err
			}
			masked, sealed, err := s.sealHeaders(id, h)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE endpoints SET headers = $2, headers_sealed = $3 WHERE id = $1`, id, masked, sealed)
			return err
		})
}

// rewrite rewrites rows in batches of sealBatch, one transaction each,
// until a batch comes back short: query selects (id, value) rows FOR UPDATE
// with args followed by the batch size as its last parameter, and fn
// rewrites each. It returns how many rows it rewrote.
func (s *Store) rewrite(ctx context.Context, what, query string, args []any,
	fn func(ctx context.Context, tx pgx.Tx, id string, value []byte) error) (int, error) {
	total := 0
	for {
		n := 0
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, query, append(args, sealBatch)...)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			type row struct {
				id    string
				value []byte
			}
			list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
				var x row
				return x, r.Scan(&x.id, &x.value)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			for _, r := range list {
				if err := fn(ctx, tx, r.id, r.value); err != nil {
					return fmt.Errorf("%s %s: %w", what, r.id, err)
				}
			}
			n = len(list)
			return nil
		})
		total += n
		if err != nil || n < sealBatch {
			return total, err
		}
	}
}
