package store

import (
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

// Prune deletes, in batches of PruneBatch, what is older than keep at now:
// finished deliveries (succeeded or canceled, last changed before now −
// keep) with their attempts and replays; dead letters only once also past
// their own retention (delivery.RetentionDefault), so one that can still be
// replayed survives; then events left with no delivery. A delivery in flight
// or with an outbox row is never touched.
func (s *Store) Prune(ctx context.Context, now time.Time, keep time.Duration) (Pruned, error) {
	var p Pruned
	cutoff := now.Add(-keep)
	deadCutoff := now.Add(-max(keep, delivery.RetentionDefault))
	for {
		tag, err := s.pool.Exec(ctx, `
			DELETE FROM deliveries WHERE id IN (
			  SELECT d.id FROM deliveries d
			  WHERE ((d.status = ANY ($1) AND d.updated_at < $2) OR (d.status = $3 AND d.updated_at < $4))
			    AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id)
			  LIMIT $5)`,
			[]delivery.Status{delivery.StatusSucceeded, delivery.StatusCanceled}, cutoff, delivery.StatusDeadLettered, deadCutoff, PruneBatch)
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
			  SELECT e.app_id, e.id FROM events e
			  WHERE e.received_at < $1
			    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.app_id = e.app_id AND d.event_id = e.id)
			  LIMIT $2)`, cutoff, PruneBatch)
		if err != nil {
			return p, fmt.Errorf("prune events: %w", err)
		}
		p.Events += int(tag.RowsAffected())
		if tag.RowsAffected() < PruneBatch {
			return p, nil
		}
	}
}
