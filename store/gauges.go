package store

import (
	"context"
	"fmt"

	"hookrelay/delivery"
	"hookrelay/metrics"
)

// Gauges reads the figures /metrics reports from Postgres
// (metrics.Gauges) in one statement.
func (s *Store) Gauges(ctx context.Context) (metrics.Gauges, error) {
	var g metrics.Gauges
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM outbox),
		       COALESCE((SELECT EXTRACT(EPOCH FROM now() - min(created_at)) FROM outbox), 0),
		       (SELECT count(*) FROM deliveries WHERE status = $1 AND next_attempt_at IS NOT NULL),
		       (SELECT count(*) FROM deliveries WHERE status = $2),
		       (SELECT count(*) FROM endpoints WHERE disabled AND deleted_at IS NULL)`,
		delivery.StatusDelivering, delivery.StatusDeadLettered).Scan(&g.OutboxBacklog, &g.OutboxOldestSeconds, &g.WaitingRetry, &g.DeadLetters, &g.EndpointsDisabled)
	if err != nil {
		return g, fmt.Errorf("read gauges: %w", err)
	}
	return g, nil
}

// AppBacklogs counts each app's outbox rows, at most limit each (an index
// scan of outbox_app_backlog per app), but for the rows of deliveries in
// keyed sequences, which wait behind their sequences' heads (see
// KeyBacklog).
func (s *Store) AppBacklogs(ctx context.Context, appIDs []string, limit int) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.id, (SELECT count(*) FROM (SELECT 1 FROM outbox o WHERE o.app_id = a.id AND NOT o.ordered LIMIT $2) b)
		FROM unnest($1::text[]) AS a(id)`, appIDs, limit)
	if err != nil {
		return nil, fmt.Errorf("count outbox backlogs: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64, len(appIDs))
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count outbox backlogs: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count outbox backlogs: %w", err)
	}
	return out, nil
}

// KeyBacklog is the backlog of app's sequences for key (one per fifo
// endpoint): the most sequence numbers given past the first open one, in
// any of them; a bound of its ingest as AppBacklogs is the app's. Two
// index lookups per fifo endpoint, whatever the backlog.
func (s *Store) KeyBacklog(ctx context.Context, appID, key string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(sq.last - (SELECT min(p.sequence) FROM deliveries p
		    WHERE p.endpoint_id = sq.endpoint_id AND p.ordering_key = sq.ordering_key AND `+sequenceOpen+`) + 1), 0)
		FROM sequences sq
		WHERE sq.endpoint_id IN (SELECT id FROM endpoints WHERE app_id = $1 AND ordering = $3) AND sq.ordering_key = $2`,
		appID, key, delivery.OrderingFIFO).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count backlog of key %q: %w", key, err)
	}
	return n, nil
}
