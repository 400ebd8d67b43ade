package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/outbox"
)

// OperationsApp is the reserved app whose endpoints receive operational
// webhooks about every other app: register the operator's endpoints on it.
const OperationsApp = "app_operations"

// Failure thresholds.
const (
	// FailingAfterDefault is how many consecutive dead letters make an
	// endpoint failing (endpoint.failing).
	FailingAfterDefault = 5
	// AutoDisableAfterDefault is how long an endpoint's deliveries may all
	// fail before it is disabled (sustained_failure).
	AutoDisableAfterDefault = 5 * 24 * time.Hour
	// AutoDisableMinDefault is the fewest dead letters in that run for the
	// auto-disable.
	AutoDisableMinDefault = 10
)

// Operational event types.
const (
	OpEndpointDisabled  = "endpoint.disabled"
	OpEndpointFailing   = "endpoint.failing"
	OpEndpointRecovered = "endpoint.recovered"
	OpDeadLettered      = "delivery.dead_lettered"
)

// OperationalTypes lists the operational event types.
func OperationalTypes() []string {
	return []string{OpEndpointDisabled, OpEndpointFailing, OpEndpointRecovered, OpDeadLettered}
}

// Reasons of endpoint.disabled.
const (
	DisabledGone      = "gone_410"
	DisabledByHand    = "by_hand"
	DisabledSustained = "sustained_failure"
)

// emit publishes an operational event in tx, through hookrelay's own
// outbox, so it is delivered with the same signing and retries. Nothing is
// emitted about the operations app itself.
func emit(ctx context.Context, tx pgx.Tx, subjectApp, typ string, data map[string]any) error {
	if subjectApp == OperationsApp {
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("operational event %s: %w", typ, err)
	}
	if _, err := outbox.Publish(ctx, tx, OperationsApp, outbox.Event{Type: typ, Data: raw}); err != nil {
		return fmt.Errorf("operational event %s: %w", typ, err)
	}
	return nil
}
