package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// sealedColumn is a column of sealed values and how each is bound to its row.
type sealedColumn struct {
	table, column string
	aad           func(id string) []byte
}

func (s *Store) sealedColumns() []sealedColumn {
	return []sealedColumn{
		{"endpoint_secrets", "sealed", func(id string) []byte { return []byte(id) }},
		{"endpoints", "headers_sealed", func(id string) []byte { return []byte("headers:" + id) }},
	}
}

// Reseal seals again, with the box's newest key, every value an older key
// (or no key ID) sealed, sealBatch rows per statement, and returns how many
// it sealed. Run it after putting a new key first in HOOKRELAY_SECRET_KEY;
// once it returns, the older keys can be dropped.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	prefix := s.box.Prefix()
	total := 0
	for _, col := range s.sealedColumns() {
		n, err := s.rewrite(ctx, "reseal "+col.table, fmt.Sprintf(`SELECT id, %[2]s FROM %[1]s
			WHERE %[2]s IS NOT NULL AND substring(%[2]s FROM 1 FOR $1) <> $2 LIMIT $3 FOR UPDATE`, col.table, col.column),
			[]any{len(prefix), prefix},
			func(ctx context.Context, tx pgx.Tx, id string, old []byte) error {
				plain, err := s.box.Open(old, col.aad(id))
				if err != nil {
					return err
				}
				sealed, err := s.box.Seal(plain, col.aad(id))
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET %s = $2 WHERE id = $1`, col.table, col.column), id, sealed)
				return err
			})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
