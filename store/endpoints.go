package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"hookrelay/delivery"
	"hookrelay/ids"
	"hookrelay/signing"
)

// Endpoint is a subscriber's URL with its settings. Secrets are never part
// of it.
type Endpoint struct {
	ID             string
	AppID          string
	URL            string
	Description    string
	EventTypes     []string
	Environment    string
	Disabled       bool
	DisabledReason *string
	// Paused keeps new deliveries pending and sends nothing until resumed.
	Paused bool
	// RateLimit bounds sends per second across every worker; 0 is none.
	RateLimit int
	// MaxInFlight bounds concurrent requests across every worker; 0 is none.
	MaxInFlight    int
	RetrySchedule  []time.Duration
	Deadline       time.Duration
	RequestTimeout time.Duration
	Headers        map[string]string
	// Filter is a CEL expression an event must satisfy to be delivered
	// here (package filter); "" delivers every subscribed event.
	Filter string
	// SignatureScheme is signing.SchemeHMAC or signing.SchemeEd25519, fixed
	// at creation. Defaults to signing.SchemeHMAC.
	SignatureScheme string
	// PublicKey is the current Ed25519 key's public key ("whpk_…"); empty
	// for HMAC endpoints.
	PublicKey string
	// EgressProxy is the operator's override of the deployment's egress
	// proxy: "" follows the deployment, "direct" sends without a proxy,
	// else a proxy URL without credentials. Only the admin key sets it.
	EgressProxy string
	// Ordering is delivery.OrderingNone (the default) or
	// delivery.OrderingFIFO.
	Ordering delivery.Ordering
	// FIFOOnDeadLetter is delivery.DeadLetterSkip (the default) or
	// delivery.DeadLetterBlock.
	FIFOOnDeadLetter delivery.DeadLetterChoice
	// TraceContext is what trace context the receiver is sent
	// (delivery.TraceContext*), "" for the deployment's --receiver-traces.
	TraceContext string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

const endpointCols = `id, app_id, url, description, event_types, environment, disabled, disabled_reason, paused, COALESCE(rate_limit, 0), COALESCE(max_in_flight, 0),
	retry_schedule_ms, deadline_ms, request_timeout_ms, headers, filter, signature_scheme,
	COALESCE((SELECT s.public_key FROM endpoint_secrets s WHERE s.endpoint_id = endpoints.id AND s.status = 'current' ORDER BY s.created_at DESC LIMIT 1), ''),
	created_at, updated_at, COALESCE(egress_proxy, ''), ordering, fifo_on_dead_letter, COALESCE(trace_context, '')`

func scanEndpoint(r pgx.Row) (Endpoint, error) {
	var e Endpoint
	var sched []int64
	var deadline, timeout int64
	var headers []byte
	if err := r.Scan(&e.ID, &e.AppID, &e.URL, &e.Description, &e.EventTypes, &e.Environment, &e.Disabled, &e.DisabledReason, &e.Paused, &e.RateLimit, &e.MaxInFlight,
		&sched, &deadline, &timeout, &headers, &e.Filter, &e.SignatureScheme, &e.PublicKey, &e.CreatedAt, &e.UpdatedAt, &e.EgressProxy, &e.Ordering, &e.FIFOOnDeadLetter, &e.TraceContext); err != nil {
		return Endpoint{}, err
	}
	e.RetrySchedule = delivery.Durations(sched)
	e.Deadline = time.Duration(deadline) * time.Millisecond
	e.RequestTimeout = time.Duration(timeout) * time.Millisecond
	if err := json.Unmarshal(headers, &e.Headers); err != nil {
		return Endpoint{}, fmt.Errorf("endpoint headers: %w", err)
	}
	return e, nil
}

// normalize stores empty lists and maps rather than NULL.
func (e *Endpoint) normalize() {
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	if e.Headers == nil {
		e.Headers = map[string]string{}
	}
	if e.SignatureScheme == "" {
		e.SignatureScheme = signing.SchemeHMAC
	}
	if e.Ordering == "" {
		e.Ordering = delivery.OrderingNone
	}
	if e.FIFOOnDeadLetter == "" {
		e.FIFOOnDeadLetter = delivery.DeadLetterSkip
	}
}

func toMS(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Milliseconds()
	}
	return out
}

// CreateEndpoint stores e (ID assigned here) with a new signing key and
// returns an HMAC endpoint's secret, never readable again; an Ed25519
// endpoint's public key is in the returned Endpoint.
func (s *Store) CreateEndpoint(ctx context.Context, e Endpoint) (Endpoint, string, error) {
	e.ID = ids.New(ids.Endpoint)
	e.normalize()
	secret, public, err := signing.GenerateKey(e.SignatureScheme)
	if err != nil {
		return Endpoint{}, "", err
	}
	masked, sealed, err := s.sealHeaders(e.ID, e.Headers)
	if err != nil {
		return Endpoint{}, "", err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		row := tx.QueryRow(ctx, `
			INSERT INTO endpoints (id, app_id, url, description, event_types, environment, disabled,
			                       retry_schedule_ms, deadline_ms, request_timeout_ms, headers, headers_sealed, signature_scheme, paused, rate_limit, max_in_flight, filter, egress_proxy, ordering, fifo_on_dead_letter, trace_context)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, NULLIF($15, 0), NULLIF($16, 0), $17, NULLIF($18, ''), $19, $20, NULLIF($21, ''))
			RETURNING `+endpointCols,
			e.ID, e.AppID, e.URL, e.Description, e.EventTypes, e.Environment, e.Disabled,
			toMS(e.RetrySchedule), e.Deadline.Milliseconds(), e.RequestTimeout.Milliseconds(), masked, sealed, e.SignatureScheme, e.Paused, e.RateLimit, e.MaxInFlight, e.Filter, e.EgressProxy, e.Ordering, e.FIFOOnDeadLetter, e.TraceContext)
		var err error
		if e, err = scanEndpoint(row); err != nil {
			return foreignApp(err, e.AppID)
		}
		e.PublicKey = public
		return s.insertSecret(ctx, tx, e.ID, secret, public)
	})
	if err != nil {
		return Endpoint{}, "", err
	}
	if public != "" {
		// hookrelay's own signing key is never shown: receivers get the
		// public key.
		return e, "", nil
	}
	return e, secret, nil
}

func foreignApp(err error, appID string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return fmt.Errorf("app %s: %w", appID, ErrNotFound)
	}
	return fmt.Errorf("write: %w", err)
}

// GetEndpoint loads an endpoint of app.
func (s *Store) GetEndpoint(ctx context.Context, appID, id string) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointCols+` FROM endpoints
		WHERE app_id = $1 AND id = $2 AND deleted_at IS NULL`, appID, id))
	if err != nil {
		return Endpoint{}, notFound(err, "endpoint "+id)
	}
	return e, nil
}

// ListEndpoints lists an app's endpoints, newest first.
func (s *Store) ListEndpoints(ctx context.Context, appID string, p Page) ([]Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointCols+` FROM endpoints
		WHERE app_id = $1 AND deleted_at IS NULL AND ($2 = '' OR id < $2)
		ORDER BY id DESC LIMIT $3`, appID, p.Cursor, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
}

// EndpointPatch holds the fields a PATCH gives; nil fields are left as
// they are, so a concurrent change of another field (a 410 disabling the
// endpoint) is never undone.
type EndpointPatch struct {
	URL         *string
	Description *string
	EventTypes  *[]string
	Environment *string
	Disabled    *bool
	Paused      *bool
	// RateLimit and MaxInFlight 0 remove the bound.
	RateLimit      *int
	MaxInFlight    *int
	RetrySchedule  *[]time.Duration
	Deadline       *time.Duration
	RequestTimeout *time.Duration
	Headers        *map[string]string
	// Filter "" removes the filter.
	Filter *string
	// EgressProxy "" removes the override.
	EgressProxy *string
	// Ordering changes the endpoint's ordering; deliveries accepted before
	// keep the order they were accepted with.
	Ordering *delivery.Ordering
	// FIFOOnDeadLetter changes the dead-letter choice of deliveries
	// accepted from now on.
	FIFOOnDeadLetter *delivery.DeadLetterChoice
	// TraceContext "" follows the deployment's --receiver-traces again.
	TraceContext *string
}

// ReasonDisabledByAPI is the disabled_reason of an endpoint disabled by
// PATCH.
const ReasonDisabledByAPI = "disabled by API"

// PatchEndpoint writes the given fields of an endpoint in one statement.
// Disabling it cancels its in-flight deliveries through the outbox in the
// same transaction. Moving it to the other environment revokes every secret
// it had and returns a new one, shown once: test and live never share a
// secret.
func (s *Store) PatchEndpoint(ctx context.Context, appID, id string, p EndpointPatch) (Endpoint, string, error) {
	var sched []int64
	if p.RetrySchedule != nil {
		sched = toMS(*p.RetrySchedule)
	}
	ms := func(d *time.Duration) *int64 {
		if d == nil {
			return nil
		}
		v := d.Milliseconds()
		return &v
	}
	var out Endpoint
	var secret string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var wasDisabled, wasPaused bool
		var env string
		var storedSealed, storedPlain []byte
		err := tx.QueryRow(ctx, `SELECT disabled, paused, environment, headers_sealed, headers FROM endpoints
			WHERE app_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE`, appID, id).Scan(&wasDisabled, &wasPaused, &env, &storedSealed, &storedPlain)
		if err != nil {
			return notFound(err, "endpoint "+id)
		}
		var masked, sealed []byte
		if p.Headers != nil {
			stored, err := s.openHeaders(id, storedSealed, storedPlain)
			if err != nil {
				return err
			}
			if masked, sealed, err = s.sealHeaders(id, mergeHeaders(*p.Headers, stored)); err != nil {
				return err
			}
		}
		out, err = scanEndpoint(tx.QueryRow(ctx, `
			UPDATE endpoints SET url = COALESCE($3, url), description = COALESCE($4, description),
			  event_types = COALESCE($5, event_types), environment = COALESCE($6, environment),
			  disabled = COALESCE($7, disabled),
			  disabled_reason = CASE WHEN $7 IS NULL THEN disabled_reason WHEN NOT $7 THEN NULL
			                         WHEN disabled THEN disabled_reason ELSE $12 END,
			  retry_schedule_ms = COALESCE($8, retry_schedule_ms), deadline_ms = COALESCE($9, deadline_ms),
			  request_timeout_ms = COALESCE($10, request_timeout_ms), headers = COALESCE($11, headers),
			  headers_sealed = COALESCE($13, headers_sealed), paused = COALESCE($14, paused),
			  rate_limit = CASE WHEN $15::int IS NULL THEN rate_limit ELSE NULLIF($15, 0) END,
			  max_in_flight = CASE WHEN $16::int IS NULL THEN max_in_flight ELSE NULLIF($16, 0) END,
			  filter = COALESCE($17, filter), updated_at = now(),
			  egress_proxy = CASE WHEN $18::text IS NULL THEN egress_proxy ELSE NULLIF($18, '') END,
			  ordering = COALESCE($19, ordering), fifo_on_dead_letter = COALESCE($20, fifo_on_dead_letter),
			  trace_context = CASE WHEN $21::text IS NULL THEN trace_context ELSE NULLIF($21, '') END
			WHERE app_id = $1 AND id = $2
			RETURNING `+endpointCols,
			appID, id, p.URL, p.Description, p.EventTypes, p.Environment, p.Disabled, sched, ms(p.Deadline), ms(p.RequestTimeout),
			masked, ReasonDisabledByAPI, sealed, p.Paused, p.RateLimit, p.MaxInFlight, p.Filter, p.EgressProxy, p.Ordering, p.FIFOOnDeadLetter, p.TraceContext))
		if err != nil {
			return fmt.Errorf("patch endpoint %s: %w", id, err)
		}
		if out.Disabled && !wasDisabled {
			if err := cancelDeliveries(ctx, tx, id, ReasonEndpointDisabled, "", inFlightOnly); err != nil {
				return err
			}
			if err := emit(ctx, tx, appID, OpEndpointDisabled, map[string]any{"app_id": appID, "endpoint_id": id, "reason": DisabledByHand}); err != nil {
				return err
			}
		}
		if holds, held := out.Paused && !out.Disabled, wasPaused && !wasDisabled; holds != held {
			if err := HoldRows(ctx, tx, id, holds); err != nil {
				return err
			}
		}
		if wasPaused && !out.Paused {
			// Resumed: its waiting outbox rows go out now.
			if err := WakeDispatcher(ctx, tx); err != nil {
				return err
			}
		}
		if p.Environment != nil && *p.Environment != env {
			if _, err := tx.Exec(ctx, `UPDATE endpoint_secrets SET status = 'revoked', valid_until = now()
				WHERE endpoint_id = $1 AND status <> 'revoked'`, id); err != nil {
				return fmt.Errorf("revoke secrets of %s: %w", id, err)
			}
			var key, public string
			if key, public, err = signing.GenerateKey(out.SignatureScheme); err != nil {
				return err
			}
			if public != "" {
				out.PublicKey = public // receivers need only this
			} else {
				secret = key
			}
			return s.insertSecret(ctx, tx, id, key, public)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, "", err
	}
	return out, secret, nil
}

// DeleteEndpoint soft-deletes an endpoint (its delivery history stays). In
// the same transaction its in-flight deliveries are canceled and every
// workflow that may still run, parked dead letters included, gets a cancel
// row in the outbox; dead letters keep their status and reason.
func (s *Store) DeleteEndpoint(ctx context.Context, appID, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE endpoints SET deleted_at = now(), updated_at = now()
			WHERE app_id = $1 AND id = $2 AND deleted_at IS NULL`, appID, id)
		if err != nil {
			return fmt.Errorf("delete endpoint %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("endpoint %s: %w", id, ErrNotFound)
		}
		// A paused endpoint's held rows are claimed (and refused) like any.
		if err := HoldRows(ctx, tx, id, false); err != nil {
			return err
		}
		if err := cancelDeliveries(ctx, tx, id, ReasonEndpointDeleted, "", withDeadLetters); err != nil {
			return err
		}
		// A dead letter of a deleted endpoint can no longer be replayed:
		// one that blocks a fifo sequence is released, so the sequence
		// (everything behind it canceled) ends and its sequencer with it.
		if _, err := tx.Exec(ctx, `UPDATE deliveries SET released_at = now(), updated_at = now()
			WHERE endpoint_id = $1 AND sequence IS NOT NULL AND status = $2 AND fifo_block AND released_at IS NULL`,
			id, delivery.StatusDeadLettered); err != nil {
			return fmt.Errorf("release blocking dead letters of %s: %w", id, err)
		}
		return nil
	})
}
