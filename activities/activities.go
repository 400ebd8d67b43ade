// Package activities holds the delivery workflow's side effects: one signed
// HTTP attempt (SendSigned) and the delivery state changes the workflow
// decides (MarkDelivery). Both read and write Postgres through the store.
package activities

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/sdk/temporal"

	"hookrelay/attempt"
	"hookrelay/delivery"
	"hookrelay/internal/tracing"
	"hookrelay/metrics"
	"hookrelay/store"
)

// Limits of one attempt.
const (
	// MaxResponseBytes is how much of a response body is read.
	MaxResponseBytes = 64 << 10
	// ExcerptBytes is how much of it is stored with the attempt.
	ExcerptBytes = 2 << 10
)

// The types and bounds a delivery's workflow and its activities exchange
// live in the leaf package attempt (the workflows link neither pgx nor the
// receiver kit); these are their names here.
type (
	SendRequest = attempt.SendRequest
	SendResult  = attempt.SendResult
	SendOutcome = attempt.SendOutcome
	MarkRequest = attempt.MarkRequest
	MarkResult  = attempt.MarkResult
)

// Names of attempt's error types and bounds, as the activities use them.
const (
	ErrDeliveryGone    = attempt.ErrDeliveryGone
	ErrNoSigningKey    = attempt.ErrNoSigningKey
	SlotWaitInActivity = attempt.SlotWaitInActivity
	SlotLead           = attempt.SlotLead
	ClaimLead          = attempt.ClaimLead
	ClaimMargin        = attempt.ClaimMargin
	RecordLinger       = attempt.RecordLinger
	ReasonCanceled     = attempt.ReasonCanceled
	RecordSlack        = attempt.RecordSlack
)

// Outcome is SendSigned's answer (res, err) as a SendOutcome.
func Outcome(res SendResult, err error) SendOutcome { return attempt.Outcome(res, err) }

// CompleteTimeout bounds reporting an asynchronous attempt to its workflow;
// reportSlack is the part of the activity's time kept for that report.
const (
	CompleteTimeout = 10 * time.Second
	reportSlack     = time.Second
)

// FlightSlack is how much longer than the request timeout a max_in_flight
// lease lasts before it expires (its holder died).
const FlightSlack = 5 * time.Second

// Recording an attempt while Postgres is unreachable is retried this many
// times, the first after RecordRetryWait, then doubling.
const (
	RecordRetries   = 3
	RecordRetryWait = 250 * time.Millisecond
)

// Store is what the activities need from Postgres.
type Store interface {
	LoadTarget(ctx context.Context, deliveryID string, now time.Time) (store.Target, error)
	LoadTargets(ctx context.Context, deliveryIDs []string, now time.Time) ([]store.Target, error)
	ReserveSlot(ctx context.Context, endpointID string, rate int, from time.Time) (time.Time, error)
	AcquireFlight(ctx context.Context, endpointID string, max int, ttl time.Duration) (string, bool, error)
	ReleaseFlight(ctx context.Context, lease string) error
	ClaimAttempt(ctx context.Context, deliveryID string, until time.Time) (store.Claim, error)
	ClaimTarget(ctx context.Context, deliveryID string, now, until time.Time) (store.Target, bool, error)
	ReleaseClaim(ctx context.Context, deliveryID string, until time.Time) error
	RecordAttempts(ctx context.Context, as []store.Attempt) ([]error, error)
	MarkDelivery(ctx context.Context, m store.Mark) (store.Marked, error)
}

var _ Store = (*store.Store)(nil)

// Activities holds the dependencies of the delivery activities. Register a
// value with the worker; workflows refer to methods of a nil *Activities.
type Activities struct {
	Store Store
	// HTTP sends attempts. It must not follow redirects (see NewHTTPClient).
	HTTP *http.Client
	// Egress sends the attempts of endpoints whose egress_proxy overrides
	// the deployment's proxy setting. Defaults to nil: HTTP sends every
	// attempt.
	Egress *Egress
	// UserAgent is sent on every attempt.
	UserAgent string
	// Logger receives one line per attempt; it must never receive secrets
	// or full signatures. Defaults to slog.Default().
	Logger *slog.Logger
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// Metrics receives the attempt and delivery series; nil records
	// nothing.
	Metrics *metrics.Sender
	// Shares bounds open requests per endpoint and per worker; nil bounds
	// nothing.
	Shares *Shares
	// Local chooses which new deliveries make their first attempt as a
	// local activity (see LocalFirsts); nil makes none local.
	Local *LocalFirsts
	// FirstBegun, when set, is told when the first attempt of a
	// delivery's first cycle begins in this worker (its run's first task
	// ran): the dispatcher gives back its app's place
	// (dispatch.Dispatcher.FirstBegun).
	FirstBegun func(deliveryID string)
	// Breaker holds the attempts of endpoints that stopped answering; nil
	// holds nothing.
	Breaker *Breaker
	// Completer completes SendSigned activities asynchronously: with it, a
	// regular SendSigned activity returns at once (freeing its task slot)
	// and its request is made in a goroutine, so a slow receiver holds a
	// goroutine and a socket, never a slot another endpoint needs. Nil
	// makes every attempt inside its activity.
	Completer Completer

	// Tracing makes each attempt a span and sends it as W3C traceparent;
	// nil is tracing off (no span, no traceparent).
	Tracing *tracing.Tracing
	// ReceiverTraces is the trace context a receiver is sent when its
	// endpoint names none ("" is delivery.TraceContextDefault).
	ReceiverTraces delivery.TraceContext

	// Open tracks asynchronous attempts not yet completed.
	Open Open
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// gone turns a missing delivery row into the non-retryable ErrDeliveryGone.
func gone(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrDeliveryGone, err)
	}
	return err
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// MarkDelivery records a state the workflow decided (new cycle, dead
// letter, canceled) and answers the status the row holds afterwards. It is
// idempotent, so Temporal may retry it; a delivery whose row is gone fails
// with the non-retryable ErrDeliveryGone.
func (a *Activities) MarkDelivery(ctx context.Context, req MarkRequest) (MarkResult, error) {
	marked, err := a.Store.MarkDelivery(ctx, store.Mark{
		DeliveryID: req.DeliveryID, Status: req.Status, Reason: req.Reason, Cycle: req.Cycle,
		ReplayID: req.ReplayID, NextAttemptAt: req.NextAttemptAt, LastClass: req.LastClass,
	})
	if err != nil {
		return MarkResult{}, gone(err)
	}
	status := marked.Status
	// Counted once: a retried mark finds the row already moved.
	if marked.Changed && status == req.Status && (status == delivery.StatusDeadLettered || status == delivery.StatusCanceled) {
		a.Metrics.Finished(string(status))
		if status == delivery.StatusDeadLettered {
			a.Metrics.DeadLettered(string(req.LastClass))
		}
	}
	a.logger().Info("delivery state", "delivery_id", req.DeliveryID, "status", status, "asked", req.Status, "cycle", req.Cycle, "reason", req.Reason)
	return MarkResult{Status: status}, nil
}
