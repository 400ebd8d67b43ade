package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClaimAsOneBatch runs one coalesced batch of ClaimTarget calls (targets)
// or of ClaimAttempt calls, call i naming ids[i] until untils[i]: the
// batch a Batched makes of calls that arrive together. errs are the calls'
// own failures.
func (b *Batched) ClaimAsOneBatch(ctx context.Context, ids []string, untils []time.Time, targets bool) (claimed []bool, errs []error, err error) {
	cs := make([]claim, len(ids))
	for i, id := range ids {
		cs[i] = claim{deliveryID: id, until: untils[i]}
	}
	claimed = make([]bool, len(ids))
	if targets {
		cts, errs, err := b.claimTargetBatch(ctx, cs)
		for i, ct := range cts {
			claimed[i] = ct.Claimed
		}
		return claimed, errs, err
	}
	got, errs, err := b.claimBatch(ctx, cs)
	for i, c := range got {
		claimed[i] = c == Claimed
	}
	return claimed, errs, err
}

// Holding is holding, for the claim's plain definition in tests.
const Holding = holding

// ClaimTargetSetting runs ClaimTarget's statement for deliveryID until
// until inside tx and returns the synchronous_commit its transaction
// commits with.
func ClaimTargetSetting(ctx context.Context, tx pgx.Tx, deliveryID string, until time.Time) (string, error) {
	rows, err := tx.Query(ctx, claimTargetSQL, claimTargetArgs([]string{deliveryID}, time.Now(), []time.Time{until})...)
	if err != nil {
		return "", err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	var setting string
	err = tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&setting)
	return setting, err
}
