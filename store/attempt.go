package store

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
	"hookrelay/ids"
)

// An attempt's statements, in the order it runs them: its target
// (LoadTarget, target.go), its claim (ClaimAttempt), or both at once
// (ClaimTarget, target.go), and its record (RecordAttempts).

// Attempt is the record of one HTTP attempt.
type Attempt struct {
	ID              string    `json:"id"`
	DeliveryID      string    `json:"delivery_id"`
	Cycle           int       `json:"cycle"`
	Number          int       `json:"number"`
	StartedAt       time.Time `json:"started_at"`
	DurationMS      int64     `json:"duration_ms"`
	StatusCode      *int      `json:"status_code"`
	Class           string    `json:"class"`
	Error           string    `json:"error"`
	ResponseExcerpt string    `json:"response_excerpt"`
	KeyIDs          []string  `json:"key_ids"`
	// NextAttemptAt is when the workflow will make the next attempt of this
	// cycle (delivery.Plan), nil when there is none. It is written to the
	// delivery, not to the attempt.
	NextAttemptAt *time.Time `json:"-" db:"-"`
	// OutboxID and Outcome record a sender's first attempt on its start row
	// in the same statement (see outbox.Row.Outcome), or delete the row when
	// the attempt succeeded; zero and nil for an attempt a workflow made.
	OutboxID int64  `json:"-" db:"-"`
	Outcome  []byte `json:"-" db:"-"`
}

// RecordAttempt records one attempt (see RecordAttempts).
func (s *Store) RecordAttempt(ctx context.Context, a Attempt) error {
	errs, err := s.RecordAttempts(ctx, []Attempt{a})
	if err != nil {
		return err
	}
	return errs[0]
}

// RecordAttempts stores attempts (of distinct deliveries) and folds each
// into its delivery, in one statement: count, last status, next attempt
// time, and on success the succeeded state. Recording is idempotent per
// (delivery, cycle, number): a retried activity does not count twice. A 2xx
// wins over a cancel that arrived during the request; nothing else
// overrides a finished delivery, and an attempt of an earlier cycle than the
// row's (recorded late, after a replay) is kept but changes no status. A 410 also disables the endpoint and
// cancels its other in-flight deliveries. errs[i] is attempts[i]'s own
// failure (ErrNotFound: its delivery no longer exists); err fails them all.
func (s *Store) RecordAttempts(ctx context.Context, attempts []Attempt) (errs []error, err error) {
	n := len(attempts)
	var (
		attemptIDs, deliveryIDs, classes, errTexts, excerpts, keyIDs []string
		cycles, numbers                                              []int
		started                                                      []time.Time
		durations                                                    []int64
		codes, succeeded                                             []*int
		statuses                                                     []delivery.Status
		next                                                         []*time.Time
		outboxIDs                                                    []int64
		outcomes                                                     []*string
	)
	for _, a := range attempts {
		if a.ID == "" {
			a.ID = ids.NewAt(ids.Attempt, a.StartedAt)
		}
		status, ok, nextAt := delivery.To(delivery.EventRecord), (*int)(nil), a.NextAttemptAt
		if a.Class == string(delivery.ClassSuccess) {
			number := a.Number
			status, ok, nextAt = delivery.To(delivery.EventSucceed), &number, nil
		}
		attemptIDs, deliveryIDs, classes = append(attemptIDs, a.ID), append(deliveryIDs, a.DeliveryID), append(classes, a.Class)
		errTexts, excerpts = append(errTexts, a.Error), append(excerpts, a.ResponseExcerpt)
		keyIDs = append(keyIDs, strings.Join(a.KeyIDs, ","))
		cycles, numbers, started, durations = append(cycles, a.Cycle), append(numbers, a.Number), append(started, a.StartedAt), append(durations, a.DurationMS)
		codes, succeeded, statuses, next = append(codes, a.StatusCode), append(succeeded, ok), append(statuses, status), append(next, nextAt)
		var outcome *string
		if a.Outcome != nil {
			o := string(a.Outcome)
			outcome = &o
		}
		outboxIDs, outcomes = append(outboxIDs, a.OutboxID), append(outcomes, outcome)
	}
	// The snapshot's count of attempts does not see the rows this statement
	// inserts, so it adds one for each attempt that is new. Rows are locked
	// in ID order, so concurrent batches cannot deadlock.
	rows, err := s.HotPool().Query(ctx, `
		WITH i AS (
		  SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[], $6::bigint[], $7::int[], $8::text[],
		                       $9::text[], $10::text[], $11::text[], $14::text[], $15::int[], $16::timestamptz[])
		    AS t(id, delivery_id, cycle, number, started_at, duration_ms, status_code, class, error, response_excerpt, key_ids, status, succeeded, next_at)
		), d AS (
		  -- The deliveries are locked first, in ID order, before any of
		  -- their outbox rows (ob and obdone wait for the whole of d): an
		  -- app's delete, which locks them in the same order first, never
		  -- deadlocks with a record.
		  SELECT id, endpoint_id FROM deliveries WHERE id = ANY ($2) ORDER BY id FOR UPDATE
		), ob AS (
		  UPDATE outbox o SET outcome = v.outcome::jsonb
		  FROM unnest($17::bigint[], $18::text[], $8::text[]) AS v(id, outcome, class)
		  WHERE o.id = v.id AND v.id > 0 AND v.class <> $19 AND (SELECT count(*) FROM d) >= 0
		), obdone AS (
		  -- A sender's first attempt that succeeded ends its start row here.
		  DELETE FROM outbox o USING unnest($17::bigint[], $8::text[]) AS v(id, class)
		  WHERE o.id = v.id AND v.id > 0 AND v.class = $19 AND (SELECT count(*) FROM d) >= 0
		), ins AS (
		  INSERT INTO attempts (id, delivery_id, cycle, number, started_at, duration_ms, status_code, class, error, response_excerpt, key_ids)
		  SELECT i.id, i.delivery_id, i.cycle, i.number, i.started_at, i.duration_ms, i.status_code, i.class, i.error, i.response_excerpt,
		         CASE WHEN i.key_ids = '' THEN '{}'::text[] ELSE string_to_array(i.key_ids, ',') END
		  FROM i JOIN d ON d.id = i.delivery_id
		  ON CONFLICT (delivery_id, cycle, number) DO UPDATE SET
		    started_at = EXCLUDED.started_at, duration_ms = EXCLUDED.duration_ms, status_code = EXCLUDED.status_code,
		    class = EXCLUDED.class, error = EXCLUDED.error, response_excerpt = EXCLUDED.response_excerpt, key_ids = EXCLUDED.key_ids
		  RETURNING delivery_id, (xmax = 0) AS inserted
		), upd AS (
		  UPDATE deliveries dl SET
		    attempt_count = (SELECT count(*) FROM attempts a WHERE a.delivery_id = dl.id)
		                  + (SELECT count(*) FROM ins WHERE ins.delivery_id = dl.id AND ins.inserted),
		    last_status_code = CASE WHEN i.cycle >= dl.cycle THEN i.status_code ELSE dl.last_status_code END,
		    status = CASE WHEN dl.status = ANY ($12) AND i.cycle >= dl.cycle THEN i.status ELSE dl.status END,
		    dead_letter_reason = CASE WHEN i.status = $13 AND dl.status = ANY ($12) AND i.cycle >= dl.cycle THEN NULL ELSE dl.dead_letter_reason END,
		    succeeded_attempt = CASE WHEN dl.status = ANY ($12) AND i.cycle >= dl.cycle THEN COALESCE(i.succeeded, dl.succeeded_attempt) ELSE dl.succeeded_attempt END,
		    next_attempt_at = CASE WHEN dl.status = ANY ($12) AND i.cycle >= dl.cycle THEN i.next_at WHEN i.cycle >= dl.cycle THEN NULL ELSE dl.next_attempt_at END,
		    inflight_until = CASE WHEN i.cycle >= dl.cycle THEN NULL ELSE dl.inflight_until END,
		    updated_at = now()
		  FROM i WHERE dl.id = i.delivery_id AND dl.id = ANY ($2) AND dl.id IN (SELECT id FROM d)
		)
		SELECT i.delivery_id, d.endpoint_id, COALESCE(e.consecutive_failures, 0)
		FROM i LEFT JOIN d ON d.id = i.delivery_id LEFT JOIN endpoints e ON e.id = d.endpoint_id`,
		attemptIDs, deliveryIDs, cycles, numbers, started, durations, codes, classes, errTexts, excerpts, keyIDs,
		delivery.From(delivery.EventRecord), delivery.StatusSucceeded, statuses, succeeded, next, outboxIDs, outcomes, delivery.ClassSuccess)
	if err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, transitionError(err))
	}
	type folded struct {
		endpointID *string
		failures   int
	}
	byDelivery := make(map[string]folded, n)
	var id string
	var f folded
	if _, err := pgx.ForEachRow(rows, []any{&id, &f.endpointID, &f.failures}, func() error {
		byDelivery[id] = f
		return nil
	}); err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, err)
	}
	errs = make([]error, n)
	for i, a := range attempts {
		f := byDelivery[a.DeliveryID]
		switch {
		case f.endpointID == nil:
			errs[i] = fmt.Errorf("record attempt of %s: %w", a.DeliveryID, ErrNotFound)
		case a.Class == string(delivery.ClassSuccess) && f.failures > 0:
			errs[i] = followUp(a.DeliveryID, s.recovered(ctx, *f.endpointID))
		case a.StatusCode != nil && *a.StatusCode == http.StatusGone:
			errs[i] = followUp(a.DeliveryID, s.inTx(ctx, func(tx pgx.Tx) error {
				return s.disable(ctx, tx, *f.endpointID, DisabledGone, "receiver answered 410 Gone", a.DeliveryID)
			}))
		}
	}
	return errs, nil
}

// ClaimAttempt marks a delivery's attempt as on the wire until until, just
// before its request is written (a rate-limited one, before what is left of
// its slot's wait: under a second), and reports whether it may be sent: only
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
		  -- A delivery named twice is claimed until its first until.
		  SELECT DISTINCT ON (id) id, until FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS v(id, until, n)
		  ORDER BY id, n
		), l AS MATERIALIZED (
		  -- Locked first, by key: the kept (generic) plan then reaches
		  -- each row and its endpoint by key too. A row locked after
		  -- waiting for another claim or record is read as that one
		  -- committed it, not as the statement's snapshot had it: the
		  -- answer below is judged on these columns.
		  SELECT d.id, d.endpoint_id, d.status, d.inflight_until FROM deliveries d WHERE d.id = ANY ($1) ORDER BY d.id FOR UPDATE OF d
		), upd AS (
		  UPDATE deliveries d SET status = $3, inflight_until = v.until
		  FROM l JOIN v ON v.id = l.id JOIN endpoints e ON e.id = l.endpoint_id
		  WHERE d.id = l.id
		    AND d.status = ANY ($4) AND NOT e.disabled AND e.deleted_at IS NULL
		    AND (d.inflight_until IS NULL OR d.inflight_until < now())
		  RETURNING d.id
		)
		SELECT v.id, v.id IN (SELECT id FROM upd), COALESCE(l.status = ANY ($4) AND l.inflight_until >= now(), false)
		FROM v LEFT JOIN l ON l.id = v.id`, ids, untils, delivery.To(delivery.EventClaim), delivery.From(delivery.EventClaim))
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

// recovered resets an endpoint's failure count after a success and, when
// it was failing, tells the operator (endpoint.recovered). It costs one
// statement only when there was something to reset.
func (s *Store) recovered(ctx context.Context, endpointID string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var appID string
		var was bool
		err := tx.QueryRow(ctx, `
			UPDATE endpoints e SET consecutive_failures = 0, failing = false, failing_since = NULL
			FROM (SELECT failing FROM endpoints WHERE id = $1 FOR UPDATE) old
			WHERE e.id = $1 RETURNING e.app_id, old.failing`, endpointID).Scan(&appID, &was)
		if err != nil {
			return fmt.Errorf("reset failures of %s: %w", endpointID, err)
		}
		if !was {
			return nil
		}
		return emit(ctx, tx, appID, OpEndpointRecovered, map[string]any{"app_id": appID, "endpoint_id": endpointID})
	})
}
