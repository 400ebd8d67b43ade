package store

import (
	"context"
	"time"
)

// ClaimAsOneBatch runs one coalesced batch of ClaimTarget calls (targets)
// or of ClaimAttempt calls, one per ID, each until until: the batch a
// Batched makes of calls that arrive together.
func (b *Batched) ClaimAsOneBatch(ctx context.Context, ids []string, until time.Time, targets bool) ([]bool, error) {
	cs := make([]claim, len(ids))
	for i, id := range ids {
		cs[i] = claim{deliveryID: id, until: until}
	}
	claimed := make([]bool, len(ids))
	if targets {
		cts, _, err := b.claimTargetBatch(ctx, cs)
		for i, ct := range cts {
			claimed[i] = ct.Claimed
		}
		return claimed, err
	}
	got, _, err := b.claimBatch(ctx, cs)
	for i, c := range got {
		claimed[i] = c == Claimed
	}
	return claimed, err
}
