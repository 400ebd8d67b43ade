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
		for {
			n, err := s.resealBatch(ctx, col, prefix)
			total += n
			if err != nil {
				return total, err
			}
			if n < sealBatch {
				break
			}
		}
	}
	return total, nil
}

func (s *Store) resealBatch(ctx context.Context, col sealedColumn, prefix []byte) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT id, %[2]s FROM %[1]s
			WHERE %[2]s IS NOT NULL AND substring(%[2]s FROM 1 FOR $1) <> $2 LIMIT $3 FOR UPDATE`, col.table, col.column),
			len(prefix), prefix, sealBatch)
		if err != nil {
			return fmt.Errorf("reseal %s: %w", col.table, err)
		}
		type row struct {
			id     string
			sealed []byte
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.id, &x.sealed)
		})
		if err != nil {
			return fmt.Errorf("reseal %s: %w", col.table, err)
		}
		for _, r := range list {
			plain, err := s.box.Open(r.sealed, col.aad(r.id))
			if err != nil {
				return fmt.Errorf("reseal %s %s: %w", col.table, r.id, err)
			}
			sealed, err := s.box.Seal(plain, col.aad(r.id))
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET %s = $2 WHERE id = $1`, col.table, col.column), r.id, sealed); err != nil {
				return fmt.Errorf("reseal %s %s: %w", col.table, r.id, err)
			}
		}
		n = len(list)
		return nil
	})
	return n, err
}
