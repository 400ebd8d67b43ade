package store

import (
	"context"
	"time"
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
