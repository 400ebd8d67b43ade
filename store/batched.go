package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
	"hookrelay/internal/coalesce"
)

// Batched is a Store whose hot attempt statements (LoadTarget,
// ClaimAttempt, RecordAttempts) are coalesced across concurrent attempts:
// under load hundreds of attempts load, claim and record in one statement
// each; at low rates each runs at once. Close stops it.
type Batched struct {
	*Store
	loads   *coalesce.Coalescer[string, Target]
	claims  *coalesce.Coalescer[claim, Claim]
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
	b.records = coalesce.New(b.recordBatch)
	return b
}

// Close stops the coalescers once their batches end.
func (b *Batched) Close() {
	b.loads.Close()
	b.claims.Close()
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
	out := make([]Claim, len(cs))
	for i, c := range cs {
		out[i] = claimed[c.deliveryID]
	}
	return out, nil, nil
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

// Claim is ClaimAttempt's answer.
type Claim int

// Answers of ClaimAttempt.
const (
	// ClaimRefused: the delivery is no longer in flight (canceled,
	// finished, gone) or its endpoint is disabled or deleted; send nothing.
	ClaimRefused Claim = iota
	// Claimed: the request may be written now.
	Claimed
	// ClaimOnTheWire: another request of the delivery is on the wire (a
	// sender that lost its lease, a worker that lost its activity); send
	// nothing until it is recorded or its mark lapses.
	ClaimOnTheWire
)

// claimAttempts is ClaimAttempt for many deliveries in one statement; it
// locks their rows in ID order, as RecordAttempts does.
func (s *Store) claimAttempts(ctx context.Context, ids []string, untils []time.Time) (map[string]Claim, error) {
	rows, err := s.pool.Query(ctx, `
		WITH v AS (
		  SELECT * FROM unnest($1::text[], $2::timestamptz[]) AS v(id, until)
		), l AS (
		  SELECT d.id FROM deliveries d WHERE d.id = ANY ($1) ORDER BY d.id FOR UPDATE OF d
		), upd AS (
		  UPDATE deliveries d SET status = $3, inflight_until = v.until
		  FROM v, endpoints e
		  WHERE d.id = v.id AND d.id = ANY ($1) AND d.id IN (SELECT id FROM l) AND e.id = d.endpoint_id
		    AND d.status = ANY ($4) AND NOT e.disabled AND e.deleted_at IS NULL
		    AND (d.inflight_until IS NULL OR d.inflight_until < now())
		  RETURNING d.id
		)
		SELECT v.id, v.id IN (SELECT id FROM upd), COALESCE(d.status = ANY ($4) AND d.inflight_until >= now(), false)
		FROM v LEFT JOIN deliveries d ON d.id = v.id`, ids, untils, delivery.StatusDelivering, delivery.InFlight())
	if err != nil {
		return nil, fmt.Errorf("claim %d attempts: %w", len(ids), err)
	}
	out := make(map[string]Claim, len(ids))
	var id string
	var claimed, onTheWire bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &claimed, &onTheWire}, func() error {
		switch {
		case claimed:
			out[id] = Claimed
		case onTheWire:
			out[id] = ClaimOnTheWire
		default:
			out[id] = ClaimRefused
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("claim %d attempts: %w", len(ids), err)
	}
	return out, nil
}
