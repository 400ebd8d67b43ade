package store

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"hookrelay/delivery"
)

// Retention defaults.
const (
	// RetentionDefault is how long finished deliveries, their attempts and
	// replays, and their events' payloads are kept.
	RetentionDefault = 30 * 24 * time.Hour
	// PruneBatch is how many rows one pruning statement deletes.
	PruneBatch = 500
)

// Pruned counts what one Prune deleted.
type Pruned struct {
	Deliveries, Events, Sequences int
}

// Prune deletes, in batches of PruneBatch, what is older than its app's
// retention at now (App.Retention, else keep): finished deliveries
// (succeeded or canceled, last changed before then) with their attempts and
// replays; dead letters only once also past their own retention
// (delivery.DeadLetterWindowDefault), so one that can still be replayed survives;
// then events left with no delivery, then sequences idle past it with no
// open delivery. A delivery in flight or with an outbox row is never
// touched, nor a dead letter that blocks its sequence. Expired portal sessions and links go too, and
// audit entries older than keep. keep defaults to RetentionDefault.
func (s *Store) Prune(ctx context.Context, now time.Time, keep time.Duration) (Pruned, error) {
	keep = cmp.Or(keep, RetentionDefault)
	var p Pruned
	keepMS, deadMS := keep.Milliseconds(), delivery.DeadLetterWindowDefault.Milliseconds()
	for {
		tag, err := s.pool.Exec(ctx, `
			DELETE FROM deliveries WHERE id IN (
			  SELECT d.id FROM deliveries d JOIN apps a ON a.id = d.app_id,
			    LATERAL (SELECT coalesce(a.retention_ms, $2::bigint) * interval '1 millisecond' AS keep) r
			  WHERE ((d.status = ANY ($3) AND d.updated_at < $1::timestamptz - r.keep)
			      OR (d.status = $4 AND d.updated_at < $1::timestamptz - greatest(r.keep, $5::bigint * interval '1 millisecond')))
			    AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id)
			    -- A dead letter that blocks its sequence stays until it is
			    -- replayed or released: pruning it would unblock the
			    -- sequence with no one's say.
			    AND NOT (d.status = $4 AND d.sequence IS NOT NULL AND d.fifo_block AND d.released_at IS NULL)
			  LIMIT $6)`,
			now, keepMS, []delivery.Status{delivery.StatusSucceeded, delivery.StatusCanceled}, delivery.StatusDeadLettered, deadMS, PruneBatch)
		if err != nil {
			return p, fmt.Errorf("prune deliveries: %w", err)
		}
		p.Deliveries += int(tag.RowsAffected())
		if tag.RowsAffected() < PruneBatch {
			break
		}
	}
	for {
		tag, err := s.pool.Exec(ctx, `
			DELETE FROM events WHERE (app_id, id) IN (
			  SELECT e.app_id, e.id FROM events e JOIN apps a ON a.id = e.app_id
			  WHERE e.received_at < $1::timestamptz - coalesce(a.retention_ms, $2::bigint) * interval '1 millisecond'
			    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.app_id = e.app_id AND d.event_id = e.id)
			  LIMIT $3)`, now, keepMS, PruneBatch)
		if err != nil {
			return p, fmt.Errorf("prune events: %w", err)
		}
		p.Events += int(tag.RowsAffected())
		if tag.RowsAffected() < PruneBatch {
			break
		}
	}
	if err := s.pruneSequences(ctx, now, keepMS, &p); err != nil {
		return p, err
	}
	return p, s.prunePortal(ctx, now.Add(-keep))
}

// pruneSequences deletes the sequences (counter rows) that took no
// delivery within their app's retention and have no delivery left at all
// (a dead letter kept for its own retention may still be replayed into its
// sequence): such a key starts again at 1
// (docs/contract.md#14-ordered-delivery).
// Holds of sequences that lapsed go too: a lapsed hold holds nothing.
func (s *Store) pruneSequences(ctx context.Context, now time.Time, keepMS int64, p *Pruned) error {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM sequences sq USING endpoints e, apps a
		WHERE e.id = sq.endpoint_id AND a.id = e.app_id
		  AND sq.touched_at < $1::timestamptz - coalesce(a.retention_ms, $2::bigint) * interval '1 millisecond'
		  AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.endpoint_id = sq.endpoint_id AND p.ordering_key = sq.ordering_key)`,
		now, keepMS)
	if err != nil {
		return fmt.Errorf("prune sequences: %w", err)
	}
	p.Sequences = int(tag.RowsAffected())
	if _, err := s.pool.Exec(ctx, `DELETE FROM sequence_holds WHERE leased_until < $1::timestamptz`, now.Add(-time.Minute)); err != nil {
		return fmt.Errorf("prune sequence holds: %w", err)
	}
	return nil
}
