package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
)

// Reasons a delivery was canceled, as its row records them.
const (
	ReasonEndpointDisabled = "canceled: endpoint disabled"
	ReasonEndpointDeleted  = "canceled: endpoint deleted"
)

// cancelScope says which deliveries' workflows a change ends.
type cancelScope int

const (
	// inFlightOnly cancels pending and delivering deliveries; dead letters
	// keep their status, reason and parked workflow, so they can be
	// replayed once the endpoint is enabled again (endpoint disabled).
	inFlightOnly cancelScope = iota
	// withDeadLetters also ends the parked workflows of dead letters; their
	// rows stay dead_lettered with their reason (endpoint deleted).
	withDeadLetters
)

// cancelDeliveries marks an endpoint's in-flight deliveries (other than
// except, and other than those with a request on the wire) canceled with
// reason and queues a cancel through the outbox for
// each workflow that may still run, all in tx. A start row whose delivery
// is canceled here is dropped by the dispatcher instead of started, so
// nothing is sent.
func cancelDeliveries(ctx context.Context, tx pgx.Tx, endpointID, reason, except string, scope cancelScope) error {
	rows, err := tx.Query(ctx, `
		WITH target AS (
		  SELECT id, status FROM deliveries
		  WHERE endpoint_id = $1 AND id <> $3 AND (status = ANY ($5) OR ($4 AND status = $6))
		  -- Locked in ID order, as records and claims lock: two statements
		  -- that lock the same deliveries in another order deadlock.
		  ORDER BY id
		  FOR UPDATE
		), upd AS (
		  -- A delivery whose request is on the wire stays delivering: its
		  -- owner records the cancel once the answer is recorded.
		  UPDATE deliveries d SET status = $7, dead_letter_reason = $2, next_attempt_at = NULL, updated_at = now()
		  FROM target WHERE d.id = target.id AND target.status = ANY ($5)
		    AND (d.inflight_until IS NULL OR d.inflight_until < now())
		), wire AS (
		  -- Its owner judges the answer; a dead letter it decides is
		  -- recorded as this cancel (MarkDelivery).
		  UPDATE deliveries d SET cancel_reason = $2, updated_at = now()
		  FROM target WHERE d.id = target.id AND target.status = ANY ($5) AND d.inflight_until >= now()
		)
		SELECT id FROM target`,
		endpointID, reason, except, scope == withDeadLetters, delivery.From(delivery.EventCancel), delivery.StatusDeadLettered, delivery.To(delivery.EventCancel))
	if err != nil {
		return fmt.Errorf("cancel deliveries of %s: %w", endpointID, transitionError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("cancel deliveries of %s: %w", endpointID, err)
	}
	return CancelWorkflows(ctx, tx, ids, reason)
}

// disable disables an endpoint for cause (DisabledGone after a 410,
// DisabledSustained), cancels its in-flight deliveries other than except
// (the delivery whose attempt disabled it), and tells the operator
// (endpoint.disabled).
func (s *Store) disable(ctx context.Context, tx pgx.Tx, endpointID, cause, reason, except string) error {
	var appID string
	err := tx.QueryRow(ctx, `UPDATE endpoints SET disabled = true, disabled_reason = $2, updated_at = now()
		WHERE id = $1 AND NOT disabled RETURNING app_id`, endpointID, reason).Scan(&appID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // already disabled
	}
	if err != nil {
		return fmt.Errorf("disable endpoint %s: %w", endpointID, err)
	}
	if err := cancelDeliveries(ctx, tx, endpointID, ReasonEndpointDisabled, except, inFlightOnly); err != nil {
		return err
	}
	return emit(ctx, tx, appID, OpEndpointDisabled, map[string]any{"app_id": appID, "endpoint_id": endpointID, "reason": cause, "detail": reason})
}
