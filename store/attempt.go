package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
)

// ClaimAttempt marks a delivery's attempt as on the wire until until, just
// before its request is written, and reports whether it may be sent: only
// a pending or delivering delivery of an enabled endpoint with no other
// request on the wire may. Until the
// attempt is recorded (RecordAttempts clears the mark) or until passes, a
// cancel leaves the delivery delivering (see cancelDeliveries), so the log
// never says canceled while a request is open. One statement; it waits for
// a disable or delete that holds the row, so after either returned nothing
// more is sent.
func (s *Store) ClaimAttempt(ctx context.Context, deliveryID string, until time.Time) (Claim, error) {
	claimed, err := s.claimAttempts(ctx, []string{deliveryID}, []time.Time{until})
	return claimed[deliveryID], err
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
	rows, err := s.HotPool().Query(ctx, `
		WITH v AS (
		  SELECT * FROM unnest($1::text[], $2::timestamptz[]) AS v(id, until)
		), l AS MATERIALIZED (
		  -- Locked first, by key: the kept (generic) plan then reaches
		  -- each row and its endpoint by key too.
		  SELECT d.id, d.endpoint_id FROM deliveries d WHERE d.id = ANY ($1) ORDER BY d.id FOR UPDATE OF d
		), upd AS (
		  UPDATE deliveries d SET status = $3, inflight_until = v.until
		  FROM l JOIN v ON v.id = l.id JOIN endpoints e ON e.id = l.endpoint_id
		  WHERE d.id = l.id
		    AND d.status = ANY ($4) AND NOT e.disabled AND e.deleted_at IS NULL
		    AND (d.inflight_until IS NULL OR d.inflight_until < now())
		  RETURNING d.id
		)
		SELECT v.id, v.id IN (SELECT id FROM upd), COALESCE(d.status = ANY ($4) AND d.inflight_until >= now(), false)
		FROM v LEFT JOIN deliveries d ON d.id = v.id`, ids, untils, delivery.To(delivery.EventClaim), delivery.From(delivery.EventClaim))
	if err != nil {
		return nil, fmt.Errorf("claim %d attempts: %w", len(ids), transitionError(err))
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

// FollowUpError is a recorded attempt's follow-up that failed: resetting
// its endpoint's failure count after a 2xx, or disabling it after a 410.
// The attempt itself is recorded and must not be made again.
type FollowUpError struct {
	DeliveryID string
	Err        error
}

func (e *FollowUpError) Error() string {
	return "follow-up of the attempt of " + e.DeliveryID + ": " + e.Err.Error()
}

func (e *FollowUpError) Unwrap() error { return e.Err }

// followUp wraps a recorded attempt's follow-up failure, nil for none.
func followUp(deliveryID string, err error) error {
	if err == nil {
		return nil
	}
	return &FollowUpError{DeliveryID: deliveryID, Err: err}
}

// FirstRequestLateness is, for each delivery of app that made a request in
// its first cycle (of the given events only, when eventIDs is not nil), how
// late its first request started: its start minus its due time, the
// delivery's acceptance plus its jittered first wait (delivery.Plan).
// Benchmarks and tests read isolation from it.
func (s *Store) FirstRequestLateness(ctx context.Context, appID string, eventIDs []string) ([]time.Duration, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT d.id, d.created_at, min(a.started_at), e.retry_schedule_ms, e.deadline_ms, e.request_timeout_ms
		FROM deliveries d
		JOIN attempts a ON a.delivery_id = d.id AND a.cycle = 1
		JOIN endpoints e ON e.id = d.endpoint_id
		WHERE d.app_id = $1 AND ($2::text[] IS NULL OR d.event_id = ANY ($2))
		GROUP BY d.id, d.created_at, e.retry_schedule_ms, e.deadline_ms, e.request_timeout_ms`, appID, eventIDs)
	if err != nil {
		return nil, fmt.Errorf("first-request lateness of %s: %w", appID, err)
	}
	var out []time.Duration
	var id string
	var created, started time.Time
	var sched []int64
	var deadline, timeout int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &created, &started, &sched, &deadline, &timeout}, func() error {
		set := delivery.Settings{Schedule: delivery.Durations(sched), Deadline: time.Duration(deadline) * time.Millisecond,
			RequestTimeout: time.Duration(timeout) * time.Millisecond}.WithDefaults()
		out = append(out, started.Sub(delivery.Plan(set, id, 1, nil, created, created.Add(set.Deadline)).At))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("first-request lateness of %s: %w", appID, err)
	}
	return out, nil
}
