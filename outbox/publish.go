// Package outbox is hookrelay's transactional outbox and owns its table.
// Publish writes an event, its deliveries and their start rows inside the
// caller's pgx transaction, so a producer's business row and its event
// commit together; Replay and Cancel queue the other two kinds of row; the
// dispatcher (package dispatch) claims rows with Claim and carries them to
// Temporal, even if Temporal was down when they were written. The package
// links no Temporal code, so a producer that publishes in its own
// transaction does not either.
package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"hookrelay/delivery"
	"hookrelay/ids"
)

// APIVersionDefault is the api_version of events that name none.
const APIVersionDefault = "2026-11-01"

// CreatedFormat is how the envelope writes created: RFC 3339 in UTC with
// milliseconds, so receivers can order two changes of one second.
const CreatedFormat = "2006-01-02T15:04:05.000Z07:00"

// Limits on events.
const (
	// MaxCreatedAhead is how far in the future a producer's created may
	// be: a receiver that orders by created would take every later real
	// event for stale.
	MaxCreatedAhead = 5 * time.Minute
	MaxPayloadBytes = 256 << 10
	MaxTypeLength   = 128
	MaxIDLength     = 128
	// MaxOrderingKeyLength bounds an event's ordering key.
	MaxOrderingKeyLength = 128
)

var (
	typePattern = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)+$`)
	// No '.': the signed content is id.timestamp.body (Standard Webhooks).
	idPattern = regexp.MustCompile(`^[A-Za-z0-9_:\-]+$`)
	// orderingKeyPattern is an ordering key's alphabet.
	orderingKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_:.\-]+$`)
)

// Event is what a producer publishes.
type Event struct {
	// ID is optional: supplying it makes publishing idempotent.
	ID   string
	Type string
	// Data is the JSON object carried in the envelope's data field.
	Data json.RawMessage
	// Created defaults to now; APIVersion to APIVersionDefault.
	Created    time.Time
	APIVersion string
	// Endpoint, when set, sends the event to this one endpoint of the app
	// whatever its event-type filter (a test event), and to no other; its
	// delivery joins no sequence of an ordered endpoint.
	Endpoint string
	// OrderingKey, optional, puts the event's deliveries to fifo endpoints
	// in the sequence of that key; without it they join each endpoint's
	// default sequence (docs/contract.md#14-ordered-delivery).
	OrderingKey string
}

// TestType is the type of the test events an endpoint is sent on demand.
const TestType = "webhook.test"

// DeliveryRef is one delivery created for an event.
type DeliveryRef struct {
	ID         string          `json:"id"`
	EndpointID string          `json:"endpoint_id"`
	Status     delivery.Status `json:"status"`
}

// Published is the stored event.
type Published struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Created    time.Time       `json:"created"`
	APIVersion string          `json:"api_version"`
	Data       json.RawMessage `json:"data"`
	// OrderingKey is the event's ordering key, "" when it has none.
	OrderingKey string        `json:"ordering_key,omitempty"`
	Deliveries  []DeliveryRef `json:"deliveries"`
	// FilteredOut are the subscribed endpoints whose filter skipped the
	// event (docs/contract.md#13-payload-filters).
	FilteredOut []FilteredOut `json:"filtered_out,omitempty"`
	// Duplicate is true when the ID was published before with the same
	// content; nothing new was written.
	Duplicate bool `json:"-"`
	// ClaimBy is when a dispatcher must claim the event's new outbox rows;
	// zero when it wrote none a dispatcher can claim (a duplicate, no
	// subscribed endpoint, only paused ones).
	ClaimBy time.Time `json:"-"`
	// Ordered counts the deliveries that joined a keyed sequence (to fifo
	// endpoints, the event having an ordering key): their rows are their
	// key's backlog, not the app's.
	Ordered int `json:"-"`
	// Notified is true when the publish woke the dispatchers (NOTIFY).
	// False when an unleased row to claim no later was waiting: its round
	// takes these rows too, unless that round had claimed before they
	// committed (see dispatch.Dispatcher.Wake).
	Notified bool `json:"-"`
	// Leased are the start rows the publish leased to its process's sender,
	// and those it leased until their endpoint's probe (Held; see
	// Handoff), nil without a Handoff.
	Leased []Leased `json:"-"`
}

// WakeAt is when a dispatcher must claim the event's new rows, when no
// NOTIFY announced them; ok is false when nobody need be asked (they were
// announced, or none can be claimed). An API or operation in a worker's
// process asks that worker's dispatcher for a round by then, once the
// publish committed.
func (p Published) WakeAt() (at time.Time, ok bool) {
	return p.ClaimBy, !p.Notified && !p.ClaimBy.IsZero()
}

// envelope is the frozen body (docs/contract.md#2-envelope); field order is fixed here.
type envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Created    string          `json:"created"`
	APIVersion string          `json:"api_version"`
	Data       json.RawMessage `json:"data"`
}

// Publish stores ev for app in tx: the frozen envelope, one pending delivery
// per enabled endpoint subscribed to its type whose filter accepts it, and
// an outbox row for each. Nothing is visible until tx commits; a rollback
// leaves no trace. It returns delivery.ErrNotFound for an unknown app and
// delivery.ErrConflict when ev.ID was published before with different
// content. Each call compiles the app's filters afresh and counts no filter
// error; a producer that publishes often keeps a Publisher instead
// (Publisher.Publish), counting filter errors with WithFilterErrors.
func Publish(ctx context.Context, tx pgx.Tx, appID string, ev Event) (Published, error) {
	return NewPublisher().publish(ctx, tx, appID, ev, nil)
}

// Querier runs statements: a pgx.Tx, a *pgx.Conn or a *pgxpool.Pool.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PublishNow is Publish outside any transaction of the caller's: the single
// statement it runs is atomic by itself (the API's ingest path).
func PublishNow(ctx context.Context, q Querier, appID string, ev Event) (Published, error) {
	return NewPublisher().publish(ctx, q, appID, ev, nil)
}

// FilteredOut is an endpoint whose filter skipped an event.
type FilteredOut struct {
	EndpointID string `json:"endpoint_id"`
	// Error is the filter's evaluation error on the event, "" when it
	// evaluated to false.
	Error string `json:"error,omitempty"`
}

// StaleFiltersError is a publish whose app's filters changed under it
// maxStaleRounds times in a row; nothing was written.
type StaleFiltersError struct{ AppID string }

func (e *StaleFiltersError) Error() string {
	return "the filters of app " + e.AppID + " kept changing during the publish; nothing was written, publish again"
}

// publish publishes ev; h, when not nil, leases the rows due at once to
// the process's sender (see Handoff).
func (p *Publisher) publish(ctx context.Context, q Querier, appID string, ev Event, h *Handoff) (Published, error) {
	now := time.Now().UTC()
	if err := ev.Validate(now); err != nil {
		return Published{}, err
	}
	hash := ev.contentHash()
	if ev.ID == "" {
		ev.ID = ids.NewAt(ids.Event, now)
	}
	created := ev.Created
	if created.IsZero() {
		created = now
	}
	created = created.UTC().Truncate(time.Millisecond)
	body, err := json.Marshal(envelope{ID: ev.ID, Type: ev.Type, Created: created.Format(CreatedFormat), APIVersion: ev.APIVersion, Data: ev.Data})
	if err != nil {
		return Published{}, fmt.Errorf("encode envelope: %w", err)
	}
	if len(body) > MaxPayloadBytes {
		return Published{}, &delivery.TooLargeError{Field: "data", Limit: MaxPayloadBytes}
	}
	out := Published{ID: ev.ID, Type: ev.Type, Created: created, APIVersion: ev.APIVersion, Data: ev.Data, OrderingKey: ev.OrderingKey, Deliveries: []DeliveryRef{}}
	traceparent, tracestate := TraceContext(ctx)
	fs := p.known(appID)
	var lease time.Duration
	var skip []string
	var holdMS []int64
	if h != nil {
		lease, skip, holdMS = h.Lease, h.Skip, h.holdMS(time.Now())
	}
	for round := 0; ; round++ {
		v, err := p.verdicts(fs, ev, created)
		if err != nil {
			return Published{}, err
		}
		var inserted, stale, woke, ordered int
		var dlvIDs, endpoints []string
		var skipped []FilteredOut
		var claimBy *time.Time
		var handed []byte
		err = q.QueryRow(ctx, publishSQL,
			appID, ev.ID, ev.Type, body, hash, created, Channel, ids.Delivery, KindStart, ev.Endpoint,
			delivery.DefaultSchedule()[0].Milliseconds(), delivery.JitterFraction, ClaimGuard.Milliseconds(), ClaimAheadMax.Milliseconds(),
			v.ids, v.exprs, v.matched, v.errs, traceparent, tracestate, ev.OrderingKey,
			lease.Milliseconds(), skip, delivery.RequestTimeoutDefault.Milliseconds(), holdMS, delivery.DeadlineDefault.Milliseconds(),
			delivery.HeldLead.Milliseconds(), v.evaluated).
			Scan(&inserted, &stale, &woke, &dlvIDs, &endpoints, &ordered, &skipped, &claimBy, &handed)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23503" {
				return Published{}, fmt.Errorf("app %s: %w", appID, delivery.ErrNotFound)
			}
			return Published{}, fmt.Errorf("publish event: %w", err)
		}
		if stale > 0 {
			if round+1 == maxStaleRounds {
				return Published{}, &StaleFiltersError{AppID: appID}
			}
			if fs, err = p.reload(ctx, q, appID); err != nil {
				return Published{}, err
			}
			continue
		}
		if inserted == 0 {
			return repeat(ctx, q, appID, ev.ID, hash)
		}
		for i := range dlvIDs {
			out.Deliveries = append(out.Deliveries, DeliveryRef{ID: dlvIDs[i], EndpointID: endpoints[i], Status: delivery.StatusPending})
		}
		out.FilteredOut = skipped
		if p.errs != nil {
			for _, f := range skipped {
				if f.Error != "" {
					p.errs.FilterError(f.EndpointID)
				}
			}
		}
		out.Ordered = ordered
		out.Notified = woke > 0
		if claimBy != nil {
			out.ClaimBy = *claimBy
		}
		if out.Leased, err = leased(handed, appID, ev, traceparent, tracestate); err != nil {
			return Published{}, err
		}
		return out, nil
	}
}

// repeat answers a second Publish of the same ID.
func repeat(ctx context.Context, tx Querier, appID, id string, hash []byte) (Published, error) {
	var stored []byte
	var payload []byte
	var skipped []FilteredOut
	var key *string
	if err := tx.QueryRow(ctx, `SELECT payload_hash, payload, filtered_out, ordering_key FROM events WHERE app_id = $1 AND id = $2`, appID, id).
		Scan(&stored, &payload, &skipped, &key); err != nil {
		return Published{}, fmt.Errorf("load event %s: %w", id, err)
	}
	if !bytes.Equal(stored, hash) {
		return Published{}, fmt.Errorf("event %s was published before with different content: %w", id, delivery.ErrConflict)
	}
	var env envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return Published{}, fmt.Errorf("decode stored event %s: %w", id, err)
	}
	created, _ := time.Parse(time.RFC3339, env.Created)
	out := Published{ID: env.ID, Type: env.Type, Created: created, APIVersion: env.APIVersion, Data: env.Data, FilteredOut: skipped, Duplicate: true}
	if key != nil {
		out.OrderingKey = *key
	}
	rows, err := tx.Query(ctx, `SELECT id, endpoint_id, status FROM deliveries WHERE app_id = $1 AND event_id = $2 ORDER BY endpoint_id`, appID, id)
	if err != nil {
		return Published{}, fmt.Errorf("load deliveries of %s: %w", id, err)
	}
	out.Deliveries, err = pgx.CollectRows(rows, pgx.RowToStructByPos[DeliveryRef])
	if err != nil {
		return Published{}, fmt.Errorf("load deliveries of %s: %w", id, err)
	}
	return out, nil
}
