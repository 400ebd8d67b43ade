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
	Deliveries, Events int
}

// Prune deletes, in batches of PruneBatch, what is older than its app's
// retention at now (App.Retention, else keep): finished deliveries
// (succeeded or canceled, last changed before then) with their attempts and
// replays; dead letters only once also past their own retention
// (delivery.DeadLetterWindowDefault), so one that can still be replayed survives;
// then events left with no delivery. A delivery in flight or with an outbox
// row is never touched. Expired portal sessions and links go too, and
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
			return p, s.prunePortal(ctx, now.Add(-keep))
		}
	}
}
