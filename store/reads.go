package store

import (
	"context"
	"fmt"
	"hookrelay/delivery"
	"time"

	"github.com/jackc/pgx/v5"
)

// Delivery is a delivery row with its latest attempt and replays.
type Delivery struct {
	ID           string          `json:"id"`
	AppID        string          `json:"-"`
	EventID      string          `json:"event_id"`
	EndpointID   string          `json:"endpoint_id"`
	EventType    string          `json:"event_type"`
	Status       delivery.Status `json:"status"`
	Cycle        int             `json:"cycle"`
	AttemptCount int             `json:"attempt_count"`
	// LastStatusCode is the last attempt's HTTP status (nil: none, or no
	// answer).
	LastStatusCode   *int       `json:"last_status_code"`
	NextAttemptAt    *time.Time `json:"next_attempt_at"`
	LastAttempt      *Attempt   `json:"last_attempt"`
	DeadLetterReason *string    `json:"dead_letter_reason"`
	Replays          []Replay   `json:"replays"`
	// Sequence is an ordered delivery's place in its endpoint's sequence
	// of its key (webhook-sequence); absent for an unordered delivery.
	Sequence *int64 `json:"sequence,omitempty"`
	// WaitingFor is the nearest delivery ahead of a pending ordered
	// delivery in its sequence that has not ended, or is a dead letter
	// that blocks it (fifo_on_dead_letter block, not released): its first
	// attempt waits for it.
	WaitingFor *string `json:"waiting_for,omitempty"`
	// BlocksSequence is set on a dead letter that holds its fifo sequence
	// (fifo_on_dead_letter block, not released): it can be released.
	BlocksSequence bool      `json:"blocks_sequence,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// Replay records who asked for a replay and when.
type Replay struct {
	At time.Time `json:"at"`
	// By is the API key's or portal session's ID; ByName its name then.
	By     string `json:"by"`
	ByName string `json:"by_name"`
}

// DeliveryFilter narrows ListDeliveries.
type DeliveryFilter struct {
	Status delivery.Status
	// EndpointIDs keeps the deliveries to any of these endpoints (none:
	// every endpoint).
	EndpointIDs        []string
	EventID, EventType string
	Since, Until       time.Time
}

// deliveryCols are a Delivery's columns, read from deliveryFrom.
const deliveryCols = `d.id, d.app_id, d.event_id, d.endpoint_id, coalesce(ev.type, ''), d.status, d.cycle, d.attempt_count,
	(SELECT a.status_code FROM attempts a WHERE a.delivery_id = d.id ORDER BY a.cycle DESC, a.number DESC LIMIT 1),
	d.next_attempt_at, d.dead_letter_reason, d.created_at, d.updated_at, d.sequence,
	` + waitingFor + `, ` + blocksSequence

// deliveryFrom joins each delivery d to its event ev.
const deliveryFrom = ` FROM deliveries d LEFT JOIN events ev ON ev.app_id = d.app_id AND ev.id = d.event_id `

func scanDelivery(r pgx.Row) (Delivery, error) {
	var d Delivery
	err := r.Scan(&d.ID, &d.AppID, &d.EventID, &d.EndpointID, &d.EventType, &d.Status, &d.Cycle, &d.AttemptCount, &d.LastStatusCode,
		&d.NextAttemptAt, &d.DeadLetterReason, &d.CreatedAt, &d.UpdatedAt, &d.Sequence, &d.WaitingFor, &d.BlocksSequence)
	d.Replays = []Replay{}
	return d, err
}

// GetDelivery loads a delivery of app with its last attempt and replays.
func (s *Store) GetDelivery(ctx context.Context, appID, id string) (Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryCols+deliveryFrom+`WHERE d.app_id = $1 AND d.id = $2`, appID, id))
	if err != nil {
		return Delivery{}, notFound(err, "delivery "+id)
	}
	atts, err := s.ListAttempts(ctx, appID, id, 1)
	if err != nil {
		return Delivery{}, err
	}
	if len(atts) > 0 {
		d.LastAttempt = &atts[0]
	}
	rows, err := s.pool.Query(ctx, `SELECT requested_at, requested_by, requested_by_name FROM replays WHERE delivery_id = $1 ORDER BY requested_at`, id)
	if err != nil {
		return Delivery{}, fmt.Errorf("replays of %s: %w", id, err)
	}
	if d.Replays, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Replay]); err != nil {
		return Delivery{}, fmt.Errorf("replays of %s: %w", id, err)
	}
	return d, nil
}

// ListDeliveries lists an app's deliveries, newest first.
func (s *Store) ListDeliveries(ctx context.Context, appID string, f DeliveryFilter, p Page) ([]Delivery, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryCols+deliveryFrom+`
		WHERE d.app_id = $1
		  AND ($2 = '' OR d.status = $2) AND (cardinality($3::text[]) = 0 OR d.endpoint_id = ANY ($3)) AND ($4 = '' OR d.event_id = $4)
		  AND ($5::timestamptz IS NULL OR d.created_at >= $5) AND ($6::timestamptz IS NULL OR d.created_at < $6)
		  AND ($7 = '' OR d.id < $7) AND ($9 = '' OR ev.type = $9)
		ORDER BY d.id DESC LIMIT $8`,
		appID, f.Status, nonNil(f.EndpointIDs), f.EventID, nullTime(f.Since), nullTime(f.Until), p.Cursor, p.Limit, f.EventType)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) { return scanDelivery(r) })
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ListAttempts lists a delivery's attempts, newest first; limit 0 means all.
func (s *Store) ListAttempts(ctx context.Context, appID, deliveryID string, limit int) ([]Attempt, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.pool.Query(ctx, `
		SELECT a.id, a.delivery_id, a.cycle, a.number, a.started_at, a.duration_ms, a.status_code, a.class, a.error, a.response_excerpt, a.key_ids
		FROM attempts a JOIN deliveries d ON d.id = a.delivery_id
		WHERE d.app_id = $1 AND a.delivery_id = $2
		ORDER BY a.cycle DESC, a.number DESC LIMIT $3`, appID, deliveryID, limit)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", deliveryID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Attempt])
}

// EventRecord is a stored event.
type EventRecord struct {
	ID         string
	Type       string
	Payload    []byte
	ReceivedAt time.Time
	// FilteredOut is the JSON list of endpoints whose filter skipped the
	// event (outbox.FilteredOut), nil for none.
	FilteredOut []byte
	// OrderingKey is the event's ordering key, "" for none.
	OrderingKey string
}

// eventCols are an EventRecord's columns, in its order.
const eventCols = `id, type, payload, received_at, filtered_out, COALESCE(ordering_key, '')`

// GetEvent loads an event of app.
func (s *Store) GetEvent(ctx context.Context, appID, id string) (EventRecord, error) {
	var e EventRecord
	err := s.pool.QueryRow(ctx, `SELECT `+eventCols+` FROM events WHERE app_id = $1 AND id = $2`, appID, id).
		Scan(&e.ID, &e.Type, &e.Payload, &e.ReceivedAt, &e.FilteredOut, &e.OrderingKey)
	if err != nil {
		return EventRecord{}, notFound(err, "event "+id)
	}
	return e, nil
}

// ListEvents lists an app's events, newest first.
func (s *Store) ListEvents(ctx context.Context, appID, typ string, since, until time.Time, p Page) ([]EventRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM events
		WHERE app_id = $1 AND ($2 = '' OR type = $2)
		  AND ($3::timestamptz IS NULL OR received_at >= $3) AND ($4::timestamptz IS NULL OR received_at < $4)
		  AND ($5 = '' OR id < $5)
		ORDER BY id DESC LIMIT $6`, appID, typ, nullTime(since), nullTime(until), p.Cursor, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[EventRecord])
}

// LatestEvents returns app's latest n events but those of type except,
// newest first; with endpointIDs, only events one of them got or filtered
// out. It reads no more than maxBytes of payloads: past them it stops (at
// least one event is read), and more reports that it did.
func (s *Store) LatestEvents(ctx context.Context, appID, except string, n int, endpointIDs []string, maxBytes int64) (evs []EventRecord, more bool, err error) {
	rows, err := s.pool.Query(ctx, `WITH latest AS (
		  SELECT ev.id AS latest_id, ev.received_at AS latest_at,
		         sum(octet_length(ev.payload)) OVER (ORDER BY ev.received_at DESC, ev.id DESC) AS upto,
		         row_number() OVER (ORDER BY ev.received_at DESC, ev.id DESC) AS nth
		  FROM events ev
		  WHERE app_id = $1 AND type <> $2
		    AND (cardinality($4::text[]) = 0
		         OR EXISTS (SELECT 1 FROM deliveries d WHERE d.app_id = ev.app_id AND d.event_id = ev.id AND d.endpoint_id = ANY ($4))
		         OR EXISTS (SELECT 1 FROM jsonb_array_elements(ev.filtered_out) f WHERE f->>'endpoint_id' = ANY ($4)))
		  ORDER BY ev.received_at DESC, ev.id DESC LIMIT $3)
		SELECT `+eventCols+`, (SELECT count(*) FROM latest) FROM events JOIN latest ON app_id = $1 AND id = latest_id
		WHERE upto <= $5 OR nth = 1
		ORDER BY latest_at DESC, latest_id DESC`, appID, except, n, nonNil(endpointIDs), maxBytes)
	if err != nil {
		return nil, false, fmt.Errorf("latest events of %s: %w", appID, err)
	}
	var found int64
	evs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventRecord, error) {
		var e EventRecord
		err := r.Scan(&e.ID, &e.Type, &e.Payload, &e.ReceivedAt, &e.FilteredOut, &e.OrderingKey, &found)
		return e, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("latest events of %s: %w", appID, err)
	}
	return evs, int64(len(evs)) < found, nil
}

// nonNil is ids, or an empty list for nil (Postgres' text[] '{}').
func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// DeadLettered returns an endpoint's dead-lettered deliveries created in
// [since, until).
func (s *Store) DeadLettered(ctx context.Context, appID, endpointID string, since, until time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM deliveries
		WHERE app_id = $1 AND endpoint_id = $2 AND status = $5
		  AND ($3::timestamptz IS NULL OR created_at >= $3) AND ($4::timestamptz IS NULL OR created_at < $4)`,
		appID, endpointID, nullTime(since), nullTime(until), delivery.StatusDeadLettered)
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", endpointID, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Stats are the seed article's acceptance figures over the latest events
// (docs/contract.md#8-acceptance-figures). An event with several endpoints has several deliveries, so
// the success figures and the rate count deliveries, each by its first
// cycle; replays are counted apart and never change the first-cycle
// figures.
type Stats struct {
	// Events is the number of the latest events that had at least one
	// delivery; events no endpoint subscribed to are not counted.
	Events int `json:"events"`
	// Deliveries is the number of those events' deliveries.
	Deliveries int `json:"deliveries"`
	// FirstAttemptSuccess counts deliveries whose first cycle succeeded on
	// attempt 1.
	FirstAttemptSuccess int `json:"first_attempt_success"`
	// RetrySuccess counts deliveries whose first cycle succeeded on a later
	// attempt.
	RetrySuccess int `json:"retry_success"`
	// EffectiveDeliveryRate is (FirstAttemptSuccess + RetrySuccess) ÷
	// Deliveries, 0 when there are none.
	EffectiveDeliveryRate float64 `json:"effective_delivery_rate"`
	// DeadLettered and Pending count deliveries in those states now.
	DeadLettered int `json:"dead_lettered"`
	Pending      int `json:"pending"`
	// Replayed counts deliveries replayed at least once; ReplaySuccess those
	// of them that succeeded in a replayed cycle.
	Replayed      int `json:"replayed"`
	ReplaySuccess int `json:"replay_success"`
	// Hourly counts the deliveries made in each of the last HourlyStatsHours
	// hours, oldest first, by their status now.
	Hourly []HourCount `json:"hourly"`
}

// HourlyStatsHours is how many hours Stats.Hourly covers.
const HourlyStatsHours = 24

// HourCount is the deliveries made in one hour, by status now.
type HourCount struct {
	Hour time.Time `json:"hour"`
	// ByStatus maps each status with deliveries to their number.
	ByStatus map[delivery.Status]int `json:"by_status"`
}

// Stats computes the acceptance figures (docs/contract.md#8-acceptance-figures) over the app's latest n events, and the
// hourly figures at now. Only deliveries to endpointIDs count when any are
// given.
func (s *Store) Stats(ctx context.Context, appID string, n int, endpointIDs []string, now time.Time) (Stats, error) {
	var st Stats
	err := s.pool.QueryRow(ctx, `
		WITH ev AS (
		  SELECT id FROM events WHERE app_id = $1 ORDER BY received_at DESC, id DESC LIMIT $2
		), d AS (
		  SELECT d.event_id, d.status,
		         (SELECT min(a.number) FROM attempts a WHERE a.delivery_id = d.id AND a.cycle = 1 AND a.class = $3) AS first_ok,
		         EXISTS (SELECT 1 FROM replays r WHERE r.delivery_id = d.id) AS replayed,
		         EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_id = d.id AND a.cycle > 1 AND a.class = $3) AS replay_ok
		  FROM ev JOIN deliveries d ON d.app_id = $1 AND d.event_id = ev.id
		  WHERE cardinality($6::text[]) = 0 OR d.endpoint_id = ANY ($6)
		)
		SELECT count(DISTINCT event_id), count(*),
		       count(*) FILTER (WHERE first_ok = 1),
		       count(*) FILTER (WHERE first_ok > 1),
		       count(*) FILTER (WHERE status = $4),
		       count(*) FILTER (WHERE status = ANY ($5)),
		       count(*) FILTER (WHERE replayed),
		       count(*) FILTER (WHERE replayed AND replay_ok)
		FROM d`, appID, n, delivery.ClassSuccess, delivery.StatusDeadLettered, delivery.InFlight(), nonNil(endpointIDs)).Scan(&st.Events, &st.Deliveries, &st.FirstAttemptSuccess, &st.RetrySuccess,
		&st.DeadLettered, &st.Pending, &st.Replayed, &st.ReplaySuccess)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	if st.Deliveries > 0 {
		st.EffectiveDeliveryRate = float64(st.FirstAttemptSuccess+st.RetrySuccess) / float64(st.Deliveries)
	}
	first := now.UTC().Truncate(time.Hour).Add(-(HourlyStatsHours - 1) * time.Hour)
	st.Hourly = make([]HourCount, HourlyStatsHours)
	for i := range st.Hourly {
		st.Hourly[i] = HourCount{Hour: first.Add(time.Duration(i) * time.Hour), ByStatus: map[delivery.Status]int{}}
	}
	rows, err := s.pool.Query(ctx, `SELECT date_trunc('hour', created_at), status, count(*) FROM deliveries
		WHERE app_id = $1 AND created_at >= $2 AND (cardinality($3::text[]) = 0 OR endpoint_id = ANY ($3))
		GROUP BY 1, 2`, appID, first, nonNil(endpointIDs))
	if err != nil {
		return Stats{}, fmt.Errorf("hourly stats: %w", err)
	}
	var hour time.Time
	var status delivery.Status
	var count int
	_, err = pgx.ForEachRow(rows, []any{&hour, &status, &count}, func() error {
		if i := int(hour.Sub(first) / time.Hour); i >= 0 && i < HourlyStatsHours {
			st.Hourly[i].ByStatus[status] = count
		}
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("hourly stats: %w", err)
	}
	return st, nil
}
