package store

// The outbox's statements: what the dispatcher and the sender claim, lease
// and delete, and the replays and cancels the API and the store queue.
// Publish, which runs in a producer's own transaction, is package outbox's.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
	"hookrelay/outbox"
)

// rowSelect reads outbox rows with what their dispatch needs (a statement
// that uses it names no CTE apps: the app's name is read from the table).
const rowSelect = `
	SELECT o.id, o.kind, COALESCE(o.requested_by, ''), o.created_at, o.delivery_id, d.id IS NOT NULL,
	       COALESCE(d.status, ''), COALESCE(d.replay_id, 0), COALESCE(d.app_id, ''), COALESCE(d.event_id, ''),
	       COALESCE(ev.type, ''), COALESCE(d.endpoint_id, ''), COALESCE(d.cycle, 0),
	       COALESCE(e.retry_schedule_ms, '{}'), COALESCE(e.deadline_ms, 0), COALESCE(e.request_timeout_ms, 0),
	       COALESCE(o.carrier_id, ''), o.outcome, COALESCE(ev.traceparent, ''), COALESCE(ev.tracestate, ''),
	       COALESCE(e.url, ''), COALESCE(a.name, ''), COALESCE(d.ordering_key, ''), COALESCE(d.sequence, 0),
	       COALESCE(d.fifo_block, false)
	` + outboxRows + `
	LEFT JOIN events ev ON ev.app_id = d.app_id AND ev.id = d.event_id
	LEFT JOIN apps a ON a.id = d.app_id`

func collectRows(rows pgx.Rows) ([]outbox.Row, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Row, error) {
		var it outbox.Row
		var sched []int64
		var deadline, timeout int64
		err := r.Scan(&it.ID, &it.Kind, &it.RequestedBy, &it.CreatedAt, &it.DeliveryID, &it.Exists,
			&it.Status, &it.ReplayID, &it.AppID, &it.EventID, &it.EventType, &it.EndpointID, &it.Cycle, &sched, &deadline, &timeout,
			&it.CarrierID, &it.Outcome, &it.Traceparent, &it.Tracestate, &it.EndpointURL, &it.AppName, &it.OrderingKey, &it.Sequence, &it.Block)
		it.Settings = delivery.StoredSettings(sched, deadline, timeout)
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox rows: %w", err)
	}
	return out, nil
}

// ClaimOutbox locks up to limit rows in tx (FOR UPDATE SKIP LOCKED, so several
// dispatchers can run), fairly across apps: each app's oldest rows are
// taken in turn (its first, then every app's second, …), so a flood from
// one app delays another app's rows by at most one round. Only a
// delivery's oldest row is claimed, so a cancel is dispatched after the
// start a sender holds and before a later replay. Rows leased to a sender
// (Round.Lease) are not read until their lease lapses; starts and replays
// of a paused endpoint wait in the outbox.
func ClaimOutbox(ctx context.Context, tx pgx.Tx, limit int) ([]outbox.Row, error) {
	rows, err := tx.Query(ctx, ClaimSQL, ClaimArgs(limit)...)
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	return collectRows(rows)
}

// outboxRows is the outbox's rows o with their deliveries d and
// endpoints e (LEFT JOINed: unheld and holding read them).
const outboxRows = `FROM outbox o LEFT JOIN deliveries d ON d.id = o.delivery_id LEFT JOIN endpoints e ON e.id = d.endpoint_id`

// unheld is whether outbox row o (with its endpoint e, see outboxRows)
// is neither held nor held back by a paused endpoint ($1 is
// outbox.KindCancel: a cancel is not held back).
const unheld = `NOT o.held AND NOT (o.kind <> $1 AND COALESCE(` + holding + `, false))`

// oldest is whether outbox row o is its delivery's oldest: only that one
// may be claimed.
const oldest = `NOT EXISTS (SELECT 1 FROM outbox p WHERE p.delivery_id = o.delivery_id AND p.id < o.id)`

// ClaimSQL is ClaimOutbox's statement, with ClaimArgs (tests read its
// plan). For each app it reads its first unleased rows by key
// (outbox_app_unleased) and its first rows whose leases lapsed, in the
// order they lapsed (outbox_app_lapse), at most $2 (the limit) of each, never a
// leased row: a tenant's backlog of rows its senders hold, or of leases
// that lapsed together, costs a round no more than $2 rows of it.
const ClaimSQL = `
		WITH RECURSIVE queued(app_id) AS (
		  (SELECT app_id FROM outbox ORDER BY app_id LIMIT 1)
		  UNION ALL
		  SELECT (SELECT o.app_id FROM outbox o WHERE o.app_id > queued.app_id ORDER BY o.app_id LIMIT 1)
		  FROM queued WHERE queued.app_id IS NOT NULL
		), picked AS (
		  SELECT c.id FROM queued CROSS JOIN LATERAL (
		    SELECT r.id, row_number() OVER (ORDER BY r.id) AS rn FROM (
		      (SELECT o.id ` + outboxRows + `
		       WHERE o.app_id = queued.app_id AND o.leased_until IS NULL AND ` + unheld + ` AND ` + oldest + `
		       ORDER BY o.id LIMIT $2)
		      UNION ALL
		      (SELECT o.id ` + outboxRows + `
		       WHERE o.app_id = queued.app_id AND o.leased_until < now() AND ` + unheld + ` AND ` + oldest + `
		       ORDER BY o.leased_until, o.id LIMIT $2)
		    ) r
		    ORDER BY r.id LIMIT $2
		  ) c
		  WHERE queued.app_id IS NOT NULL
		  ORDER BY c.rn, c.id LIMIT $2
		)` + rowSelect + `
		WHERE o.id = ANY (ARRAY(SELECT id FROM picked))
		  -- Checked again on the locked row: another dispatcher may have
		  -- leased it since this statement's snapshot.
		  AND (o.leased_until IS NULL OR o.leased_until < now())
		ORDER BY o.id
		FOR UPDATE OF o SKIP LOCKED`

// ClaimArgs are ClaimSQL's parameters for a round of limit rows.
func ClaimArgs(limit int) []any { return []any{outbox.KindCancel, limit} }

// NextOutboxClaim is when a round should next claim rows: the earliest
// claim_by of the unleased rows a round could claim (not held by a paused
// endpoint), or now when a row's lease lapsed; ok is false when there are
// none.
func NextOutboxClaim(ctx context.Context, q outbox.Querier) (at time.Time, ok bool, err error) {
	var next *time.Time
	if err = q.QueryRow(ctx, NextClaimSQL, outbox.KindCancel).Scan(&next); err != nil {
		return time.Time{}, false, fmt.Errorf("next claim: %w", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return *next, true, nil
}

// NextClaimSQL is NextOutboxClaim's statement, $1 outbox.KindCancel
// (tests read its plan): the earliest unleased row by claim_by
// (outbox_unleased), and the first lease that lapsed (outbox_lapse).
const NextClaimSQL = `
		SELECT LEAST(
		  (SELECT o.claim_by ` + outboxRows + `
		   WHERE o.leased_until IS NULL AND ` + unheld + `
		   ORDER BY o.claim_by LIMIT 1),
		  (SELECT LEAST(o.claim_by, now()) ` + outboxRows + `
		   WHERE o.leased_until < now() AND ` + unheld + `
		   ORDER BY o.leased_until, o.id LIMIT 1))`

// ReleaseOutbox ends the lease of a start row whose first attempt was not made
// or not handed off, so the next dispatcher round takes it again.
func ReleaseOutbox(ctx context.Context, q outbox.Querier, id int64) error {
	if _, err := q.Exec(ctx, `UPDATE outbox SET leased_until = NULL WHERE id = $1`, id); err != nil {
		return fmt.Errorf("release outbox row %d: %w", id, err)
	}
	return WakeDispatcher(ctx, q)
}

// KeepOutcome writes a first attempt's outcome (outbox.Row.Outcome) on its
// start row when the attempt's own record could not: from then on the row
// is handed off from it, never sent again.
func KeepOutcome(ctx context.Context, q outbox.Querier, id int64, outcome []byte) error {
	if _, err := q.Exec(ctx, `UPDATE outbox SET outcome = $2::jsonb WHERE id = $1`, id, string(outcome)); err != nil {
		return fmt.Errorf("keep the outcome on outbox row %d: %w", id, err)
	}
	return nil
}

// HoldOutbox leases each start row ids[i] until until[i], in one
// statement: its first attempt was held back with nothing sent (its
// endpoint's share in use, or the endpoint not answering), or its failed
// first attempt's hand-off was, and no round takes the row before then.
//
// Its commit does not wait for the WAL to reach the disk (holdSQL): a
// tenant whose endpoint stopped answering holds about a hundred rows a
// second, and each flush it forced would queue before other tenants'
// commits. A crash of Postgres (or a failover to a standby) may lose the
// holds of its last moments, and that sends nothing twice: nothing was
// sent for a held row, a request's record commits synchronously, which
// flushes every hold written before it, and a row whose first attempt has
// a recorded outcome is handed off from it, never sent again. The row
// then keeps its earlier lease: a round takes it back sooner and holds it
// again, or later (an earlier lease is not cut at the delivery's last
// start), when a short deadline may dead-letter what the hold would not.
//
// q must not be a transaction or a batch: the setting would last until
// it ends.
func HoldOutbox(ctx context.Context, q outbox.Querier, ids []int64, until []time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, holdSQL, ids, until); err != nil {
		return fmt.Errorf("hold %d outbox rows: %w", len(ids), err)
	}
	return nil
}

// leaseSQL leases each row $1[i] until $2[i] (Round.Lease).
const leaseSQL = `UPDATE outbox o SET leased_until = v.until FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, until) WHERE o.id = v.id`

// holdSQL is leaseSQL committed without waiting for its WAL flush
// (HoldOutbox).
const holdSQL = leaseSQL + ` AND ` + asyncCommit

// DoneCarriers deletes the rows of carriers that started.
func DoneCarriers(ctx context.Context, q outbox.Querier, carrierIDs []string) error {
	if _, err := q.Exec(ctx, `DELETE FROM outbox WHERE carrier_id = ANY ($1)`, carrierIDs); err != nil {
		return fmt.Errorf("delete carried rows: %w", err)
	}
	return nil
}

// holding is whether endpoint e holds its deliveries' start and replay
// rows: paused, and still enabled (a disabled or deleted endpoint's rows
// are claimed, refused and ended).
const holding = `(e.paused AND NOT e.disabled AND e.deleted_at IS NULL)`

// ReleaseHeldSQL is ReleaseHeld's statement, with ReleaseHeldArgs (tests
// read its plan).
const ReleaseHeldSQL = `
	UPDATE outbox o SET held = false
	FROM deliveries d
	WHERE d.endpoint_id IN (
	    SELECT e.id FROM endpoints e WHERE e.updated_at > now() - $1 * interval '1 millisecond' AND NOT ` + holding + `)
	  AND d.status = $2 AND o.delivery_id = d.id AND o.held`

// ReleaseHeldArgs are ReleaseHeldSQL's parameters.
func ReleaseHeldArgs() []any { return []any{heldRaceWindow.Milliseconds(), delivery.StatusPending} }

// heldRaceWindow is how long after an endpoint stopped holding its rows
// (its updated_at) ReleaseHeld looks at them: longer than any ingest
// statement that overlapped the change.
const heldRaceWindow = time.Minute

// ReleaseHeld lets go the held rows of endpoints that stopped holding them
// in the last heldRaceWindow: the rows an ingest that overlapped a resume
// wrote held after the resume had released the others. It reads only
// those endpoints' pending deliveries, never the held backlogs of paused
// ones. The dispatcher runs it now and then (dispatch.HeldSweepInterval);
// it returns how many rows it released.
func ReleaseHeld(ctx context.Context, q outbox.Querier) (int64, error) {
	tag, err := q.Exec(ctx, ReleaseHeldSQL, ReleaseHeldArgs()...)
	if err != nil {
		return 0, fmt.Errorf("release held rows: %w", err)
	}
	return tag.RowsAffected(), nil
}

// WakeDispatcher wakes the dispatcher when tx commits (rows it was holding back, a
// paused endpoint's, may go now).
func WakeDispatcher(ctx context.Context, q outbox.Querier) error {
	if _, err := q.Exec(ctx, `SELECT pg_notify($1, '')`, outbox.Channel); err != nil {
		return fmt.Errorf("wake dispatcher: %w", err)
	}
	return nil
}

// OutboxRowQueued reports whether outbox row id is still queued (a replay
// deletes the stale start row of an ordered delivery it replays).
func OutboxRowQueued(ctx context.Context, q outbox.Querier, id int64) (bool, error) {
	var queued bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE id = $1)`, id).Scan(&queued); err != nil {
		return false, fmt.Errorf("outbox row %d queued: %w", id, err)
	}
	return queued, nil
}

// OutboxDone deletes rows whose work is done (no statement for none: most
// dispatcher rounds have none).
func OutboxDone(ctx context.Context, q outbox.Querier, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, doneSQL, ids); err != nil {
		return fmt.Errorf("delete dispatched rows: %w", err)
	}
	return nil
}

// doneSQL is OutboxDone's statement.
const doneSQL = `DELETE FROM outbox WHERE id = ANY ($1)`

// ReplayDeliveries records a replay of each delivery (by whom), sets it pending and
// queues it, in one statement that wakes the dispatcher. Only finished
// deliveries (succeeded, dead-lettered, canceled) of an enabled endpoint
// with no start or replay queued are replayed, so a dead letter of a
// disabled endpoint stays a dead letter until it is enabled again. It
// returns the IDs queued. by and byName say who asked: the API key's or
// portal session's ID and name.
func ReplayDeliveries(ctx context.Context, q outbox.Querier, appID string, deliveryIDs []string, by, byName string) ([]string, error) {
	rows, err := q.Query(ctx, `
		WITH r AS (
		  SELECT d.id, e.paused, d.sequence IS NOT NULL AND d.ordering_key <> '' AS ordered FROM deliveries d
		  JOIN endpoints e ON e.id = d.endpoint_id AND NOT e.disabled AND e.deleted_at IS NULL
		  WHERE d.app_id = $1 AND d.id = ANY ($2) AND d.status = ANY ($3)
		    -- A start or replay row left of a finished ordered delivery
		    -- (canceled while it waited; the row stays leased to its
		    -- sequencer, which reads only open deliveries) is stale:
		    -- deleted below, it does not refuse the replay.
		    AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id AND o.kind <> $6
		      AND NOT (o.kind IN ($10, $8) AND d.sequence IS NOT NULL))
		  FOR UPDATE OF d
		), rec AS (
		  INSERT INTO replays (delivery_id, requested_by, requested_by_name) SELECT id, $4, $9 FROM r
		), upd AS (
		  UPDATE deliveries SET status = $7, cycle = cycle + 1, dead_letter_reason = NULL, next_attempt_at = NULL, cancel_reason = NULL,
		    -- A released dead letter's replay is queued in its sequence
		    -- (released_at cleared) but holds nothing once it ends: a new
		    -- dead letter of it does not block.
		    fifo_block = CASE WHEN released_at IS NOT NULL THEN false ELSE fifo_block END, released_at = NULL, updated_at = now()
		  WHERE id IN (SELECT id FROM r)
		), stale AS (
		  DELETE FROM outbox WHERE delivery_id IN (SELECT id FROM r) AND kind IN ($10, $8)
		), ob AS (
		  INSERT INTO outbox (delivery_id, kind, requested_by, app_id, held, ordered) SELECT id, $8, $4, $1, paused, ordered FROM r
		), wake AS (
		  SELECT pg_notify($5, '') FROM (SELECT 1 FROM r LIMIT 1) AS any_replay
		)
		SELECT id FROM r, (SELECT count(*) FROM wake) AS w`,
		appID, deliveryIDs, delivery.From(delivery.EventReplay), by, outbox.Channel, outbox.KindCancel, delivery.To(delivery.EventReplay), outbox.KindReplay, byName, outbox.KindStart)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	queued, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return queued, nil
}

// CancelWorkflows queues a cancel of each delivery's workflow, by whom (a reason),
// and wakes the dispatcher. Call it in the transaction that disables or
// deletes what the deliveries belong to: a cancel row keeps no reference to
// its delivery, so it outlives an app's delete.
func CancelWorkflows(ctx context.Context, q outbox.Querier, deliveryIDs []string, by string) error {
	if len(deliveryIDs) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `
		WITH ob AS (
		  INSERT INTO outbox (delivery_id, kind, requested_by, app_id)
		  SELECT c.id, $2, $3, COALESCE(d.app_id, '') FROM unnest($1::text[]) AS c(id) LEFT JOIN deliveries d ON d.id = c.id
		)
		SELECT pg_notify($4, '')`, deliveryIDs, outbox.KindCancel, by, outbox.Channel)
	if err != nil {
		return fmt.Errorf("queue cancels: %w", err)
	}
	return nil
}

// DropAppOutbox deletes the start and replay rows of an app's deliveries, which
// are about to be deleted with it; their cancel rows stay.
func DropAppOutbox(ctx context.Context, q outbox.Querier, appID string) error {
	_, err := q.Exec(ctx, `DELETE FROM outbox WHERE kind <> $2 AND delivery_id IN (SELECT id FROM deliveries WHERE app_id = $1)`,
		appID, outbox.KindCancel)
	if err != nil {
		return fmt.Errorf("drop outbox rows of app %s: %w", appID, err)
	}
	return nil
}

// OutboxBacklog counts outbox rows, up to limit (counting stops there).
func OutboxBacklog(ctx context.Context, q outbox.Querier, limit int) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM outbox LIMIT $1) b`, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox backlog: %w", err)
	}
	return n, nil
}

// ReleaseDelivery releases delivery id of app from blocking its fifo
// sequence: a dead letter of a fifo_on_dead_letter block delivery, not
// released before, is marked released and a release row queued (the
// dispatcher tells its sequencer). released is false when id is no such
// dead letter.
func ReleaseDelivery(ctx context.Context, q outbox.Querier, appID, id, by string) (released bool, err error) {
	var n int
	err = q.QueryRow(ctx, `
		WITH rel AS (
		  UPDATE deliveries SET released_at = now(), updated_at = now()
		  WHERE app_id = $1 AND id = $2 AND status = $3 AND fifo_block AND released_at IS NULL
		  RETURNING id
		), ob AS (
		  INSERT INTO outbox (delivery_id, kind, requested_by, app_id) SELECT id, $4, $5, $1 FROM rel
		)
		SELECT count(*) FROM rel`, appID, id, delivery.StatusDeadLettered, outbox.KindRelease, by).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("release %s: %w", id, err)
	}
	if n == 0 {
		return false, nil
	}
	return true, WakeDispatcher(ctx, q)
}
