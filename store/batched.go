package store

import (
	"context"
	"fmt"
	"time"

	"hookrelay/internal/coalesce"
)

// Batched is a Store whose hot attempt statements (LoadTarget,
// ClaimAttempt, ClaimTarget, RecordAttempts) are coalesced across concurrent attempts:
// under load hundreds of attempts load, claim and record in one statement
// each; at low rates each runs at once, unless its context lets it wait
// for company (coalesce.Linger). Close stops it.
type Batched struct {
	*Store
	loads   *coalesce.Coalescer[string, Target]
	claims  *coalesce.Coalescer[claim, Claim]
	both    *coalesce.Coalescer[claim, ClaimedTarget]
	records *coalesce.Coalescer[[]Attempt, []error]
}

type claim struct {
	deliveryID string
	until      time.Time
}

// NewBatched returns s with its attempt statements coalesced.
func NewBatched(s *Store) *Batched {
	b := &Batched{Store: s}
	b.loads = coalesce.New(b.loadBatch)
	b.claims = coalesce.New(b.claimBatch)
	b.both = coalesce.New(b.claimTargetBatch)
	b.records = coalesce.New(b.recordBatch)
	return b
}

// Close stops the coalescers once their batches end.
func (b *Batched) Close() {
	b.loads.Close()
	b.claims.Close()
	b.both.Close()
	b.records.Close()
}

// LoadTarget is Store.LoadTarget, loaded with the concurrent ones in one
// statement (keys valid when the statement runs).
func (b *Batched) LoadTarget(ctx context.Context, deliveryID string, _ time.Time) (Target, error) {
	return b.loads.Do(ctx, deliveryID)
}

func (b *Batched) loadBatch(ctx context.Context, ids []string) ([]Target, []error, error) {
	ts, err := b.Store.LoadTargets(ctx, ids, time.Now())
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[string]Target, len(ts))
	for _, t := range ts {
		byID[t.DeliveryID] = t
	}
	out, errs := make([]Target, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		t, ok := byID[id]
		if !ok {
			errs[i] = fmt.Errorf("load delivery %s: %w", id, ErrNotFound)
		}
		out[i] = t
	}
	return out, errs, nil
}

// ClaimAttempt is Store.ClaimAttempt, claimed with the concurrent ones in
// one statement.
func (b *Batched) ClaimAttempt(ctx context.Context, deliveryID string, until time.Time) (Claim, error) {
	return b.claims.Do(ctx, claim{deliveryID: deliveryID, until: until})
}

func (b *Batched) claimBatch(ctx context.Context, cs []claim) ([]Claim, []error, error) {
	ids, untils := make([]string, len(cs)), make([]time.Time, len(cs))
	for i, c := range cs {
		ids[i], untils[i] = c.deliveryID, c.until
	}
	claimed, err := b.Store.claimAttempts(ctx, ids, untils)
	if err != nil {
		return nil, nil, err
	}
	out, first := make([]Claim, len(cs)), firsts(cs)
	for i, c := range cs {
		out[i] = claimed[c.deliveryID]
		if !first[i] && out[i] == Claimed {
			// One statement claimed the delivery once, for the first call
			// that named it: the other's request would be a second one on
			// the wire.
			out[i] = ClaimOnTheWire
		}
	}
	return out, nil, nil
}

// firsts says of each call of cs whether it is the first to name its
// delivery.
func firsts(cs []claim) []bool {
	seen := make(map[string]bool, len(cs))
	out := make([]bool, len(cs))
	for i, c := range cs {
		out[i] = !seen[c.deliveryID]
		seen[c.deliveryID] = true
	}
	return out
}

// ClaimTarget is Store.ClaimTarget, loaded and claimed with the concurrent
// ones in one statement (keys valid when the statement runs).
func (b *Batched) ClaimTarget(ctx context.Context, deliveryID string, _, until time.Time) (Target, bool, error) {
	ct, err := b.both.Do(ctx, claim{deliveryID: deliveryID, until: until})
	return ct.Target, ct.Claimed, err
}

func (b *Batched) claimTargetBatch(ctx context.Context, cs []claim) ([]ClaimedTarget, []error, error) {
	ids, untils := make([]string, len(cs)), make([]time.Time, len(cs))
	for i, c := range cs {
		ids[i], untils[i] = c.deliveryID, c.until
	}
	got, opened, err := b.Store.claimTargets(ctx, ids, time.Now(), untils)
	if err != nil {
		return nil, nil, err
	}
	out, errs, first := make([]ClaimedTarget, len(cs)), make([]error, len(cs)), firsts(cs)
	for i, c := range cs {
		ct, ok := got[c.deliveryID]
		switch {
		case opened[c.deliveryID] != nil:
			errs[i] = opened[c.deliveryID]
		case !ok:
			errs[i] = fmt.Errorf("load delivery %s: %w", c.deliveryID, ErrNotFound)
		}
		// A repeat goes the long way: its ClaimAttempt finds the first
		// call's request on the wire.
		ct.Claimed = ct.Claimed && first[i]
		out[i] = ct
	}
	return out, errs, nil
}

// RecordAttempts is Store.RecordAttempts, recorded with the concurrent
// ones in one statement (split where two calls name the same attempt).
func (b *Batched) RecordAttempts(ctx context.Context, as []Attempt) ([]error, error) {
	return b.records.Do(ctx, as)
}

func (b *Batched) recordBatch(ctx context.Context, calls [][]Attempt) ([][]error, []error, error) {
	out := make([][]error, len(calls))
	failed := make([]error, len(calls))
	type key struct {
		id            string
		cycle, number int
	}
	for start := 0; start < len(calls); {
		seen := map[key]bool{}
		var all []Attempt
		end := start
	group:
		for ; end < len(calls); end++ {
			for _, a := range calls[end] {
				if seen[key{a.DeliveryID, a.Cycle, a.Number}] {
					break group
				}
			}
			for _, a := range calls[end] {
				seen[key{a.DeliveryID, a.Cycle, a.Number}] = true
			}
			all = append(all, calls[end]...)
		}
		end = max(end, start+1)
		if len(all) == 0 {
			all = calls[start]
		}
		errs, err := b.Store.RecordAttempts(ctx, all)
		at := 0
		for i := start; i < end; i++ {
			if err != nil {
				failed[i] = err
				continue
			}
			out[i] = errs[at : at+len(calls[i])]
			at += len(calls[i])
		}
		start = end
	}
	return out, failed, nil
}
