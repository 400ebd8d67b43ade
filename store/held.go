package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"hookrelay/outbox"
)

// HoldRows marks the start and replay rows of an endpoint's deliveries
// held or not, in the transaction that pauses, resumes, disables or
// deletes it: held while it is holding (see holding). Claims skip held
// rows through their indexes; whether the endpoint holds its rows is still
// checked on every claim, so a row written unheld by an ingest that
// overlapped a pause is not sent either.
//
// Rows let go end their lease to an ordered sequence too: the dispatcher
// claims them again and wakes their sequencers, which found the endpoint
// paused and otherwise look again only a minute later.
func HoldRows(ctx context.Context, q outbox.Querier, endpointID string, held bool) error {
	if _, err := q.Exec(ctx, `UPDATE outbox o SET held = $2,
		  leased_until = CASE WHEN NOT $2 AND d.sequence IS NOT NULL THEN NULL ELSE o.leased_until END
		FROM deliveries d
		WHERE d.id = o.delivery_id AND d.endpoint_id = $1 AND o.kind <> $3 AND o.held <> $2`, endpointID, held, outbox.KindCancel); err != nil {
		return fmt.Errorf("hold rows of %s: %w", endpointID, err)
	}
	return nil
}

// OutboxHeld returns which of the start rows ids are held (their endpoint
// paused since they were claimed) or gone (canceled, deleted): their first
// attempts must not be made now.
func OutboxHeld(ctx context.Context, q outbox.Querier, ids []int64) (map[int64]bool, error) {
	rows, err := q.Query(ctx, `SELECT v.id FROM unnest($1::bigint[]) AS v(id)
		WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = v.id AND NOT o.held)`, ids)
	if err != nil {
		return nil, fmt.Errorf("held start rows: %w", err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("held start rows: %w", err)
	}
	out := make(map[int64]bool, len(held))
	for _, id := range held {
		out[id] = true
	}
	return out, nil
}
