package store

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
)

// MarkDelivery sets a delivery's state as its workflow decided and returns
// the status the row holds afterwards. It applies only as the transition
// table allows (a new cycle, a dead letter and a cancel change an in-flight
// delivery only, so a 2xx recorded during a cancel stays succeeded and a
// cancel never touches a dead letter) and only for the row's current cycle
// or a later one: a retried mark of an earlier cycle, after a replay gave
// the row its next cycle, changes nothing. A delivery that no longer exists
// is ErrNotFound.
func (s *Store) MarkDelivery(ctx context.Context, m Mark) (Marked, error) {
	var r *string
	if m.Reason != "" {
		r = &m.Reason
	}
	ev, ok := markEvent(m.Status)
	if !ok {
		return Marked{}, &delivery.TransitionError{DeliveryID: m.DeliveryID, To: m.Status}
	}
	var out Marked
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var before, now *string
		var appID, endpointID, eventID string
		err := tx.QueryRow(ctx, `
			WITH prev AS (
			  SELECT status, app_id, endpoint_id, event_id FROM deliveries WHERE id = $1 FOR UPDATE
			), upd AS (
			  -- A dead letter decided after a cancel found the request on
			  -- the wire (cancel_reason) is that cancel: the cancel wins
			  -- whatever the answer's class (a 2xx was recorded as
			  -- succeeded before this).
			  UPDATE deliveries SET status = CASE WHEN $2 = $9 AND cancel_reason IS NOT NULL THEN $8 ELSE $2 END,
			    dead_letter_reason = CASE WHEN $2 = $9 AND cancel_reason IS NOT NULL THEN cancel_reason
			      WHEN $2 = $8 THEN COALESCE(dead_letter_reason, $3) ELSE $3 END,
			    cycle = GREATEST(cycle, $4), replay_id = GREATEST(replay_id, $5), next_attempt_at = $6, updated_at = now()
			  WHERE id = $1 AND $4 >= cycle AND (status = ANY ($7) OR status = $2)
			  RETURNING status
			)
			SELECT (SELECT status FROM prev), COALESCE((SELECT status FROM upd), (SELECT status FROM prev)),
			       COALESCE((SELECT app_id FROM prev), ''), COALESCE((SELECT endpoint_id FROM prev), ''), COALESCE((SELECT event_id FROM prev), '')`,
			m.DeliveryID, m.Status, r, m.Cycle, m.ReplayID, m.NextAttemptAt, delivery.From(ev), delivery.StatusCanceled, delivery.StatusDeadLettered).Scan(&before, &now, &appID, &endpointID, &eventID)
		if err != nil {
			return fmt.Errorf("mark delivery %s %s: %w", m.DeliveryID, m.Status, transitionError(err))
		}
		if before == nil || now == nil {
			return fmt.Errorf("mark delivery %s: %w", m.DeliveryID, ErrNotFound)
		}
		out = Marked{Status: delivery.Status(*now), Changed: *now != *before}
		if out.Status == delivery.StatusDeadLettered && out.Changed {
			return s.deadLettered(ctx, tx, appID, endpointID, eventID, m.DeliveryID, m.Reason, m.LastClass.OperatorFault())
		}
		return nil
	})
	return out, err
}

// Marked is what MarkDelivery left: the status the row holds and whether
// this call moved it there (false for a repeat, or when a finished status
// kept the row).
type Marked struct {
	Status  delivery.Status
	Changed bool
}

// deadLettered tells the operator about a new dead letter and counts it
// against its endpoint: FailingAfter in a row make it failing. A dead
// letter whose last attempt was an operator fault (the egress proxy could
// not be used) says nothing about the endpoint: it neither extends its
// streak (failing, auto-disable) nor resets it.
func (s *Store) deadLettered(ctx context.Context, tx pgx.Tx, appID, endpointID, eventID, deliveryID, reason string, operatorFault bool) error {
	if err := emit(ctx, tx, appID, OpDeadLettered, map[string]any{
		"app_id": appID, "endpoint_id": endpointID, "delivery_id": deliveryID, "event_id": eventID, "reason": reason,
	}); err != nil {
		return err
	}
	if operatorFault {
		return nil
	}
	var failures int
	var becameFailing, sustained bool
	after := s.AutoDisableAfter
	if after == 0 {
		after = AutoDisableAfterDefault
	}
	err := tx.QueryRow(ctx, `
		UPDATE endpoints SET consecutive_failures = consecutive_failures + 1,
		  failing = failing OR consecutive_failures + 1 >= $2,
		  failing_since = COALESCE(failing_since, now())
		WHERE id = $1
		RETURNING consecutive_failures, consecutive_failures = $2,
		  $3 > 0 AND consecutive_failures >= $4 AND failing_since <= now() - $3 * interval '1 millisecond' AND NOT disabled`,
		endpointID, s.failingAfter(), after.Milliseconds(), cmp.Or(s.AutoDisableMin, AutoDisableMinDefault)).Scan(&failures, &becameFailing, &sustained)
	if err != nil {
		return fmt.Errorf("count failures of %s: %w", endpointID, err)
	}
	if becameFailing {
		if err := emit(ctx, tx, appID, OpEndpointFailing, map[string]any{"app_id": appID, "endpoint_id": endpointID, "consecutive_failures": failures}); err != nil {
			return err
		}
	}
	if sustained {
		return s.disable(ctx, tx, endpointID, DisabledSustained,
			fmt.Sprintf("every delivery failed for %s (%d dead letters in a row)", after, failures), deliveryID)
	}
	return nil
}

// Mark is a state a delivery's workflow decided.
type Mark struct {
	DeliveryID string
	Status     delivery.Status
	Reason     string
	Cycle      int
	// ReplayID is the replay (its outbox row ID) that started the cycle.
	ReplayID int64
	// NextAttemptAt is when the cycle's next attempt is due, if any.
	NextAttemptAt *time.Time
	// LastClass is the class of the cycle's last attempt ("" for none):
	// a dead letter whose last attempt was an operator fault
	// (delivery.Class.OperatorFault, the egress proxy's) is not counted
	// against its endpoint.
	LastClass delivery.Class
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
		set := delivery.StoredSettings(sched, deadline, timeout).WithDefaults()
		out = append(out, started.Sub(delivery.Plan(set, id, 1, nil, created, created.Add(set.Deadline)).At))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("first-request lateness of %s: %w", appID, err)
	}
	return out, nil
}
