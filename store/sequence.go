package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
	"hookrelay/outbox"
)

// sequenceOpen is the predicate of an open delivery of a sequence (alias
// p): not ended, or a dead letter that blocks it, and not released from it.
// It is the predicate of the partial index deliveries_sequence_open
// (migration 022), so each statement below reads only open rows.
const sequenceOpen = `p.sequence IS NOT NULL AND p.released_at IS NULL
	AND (p.status IN ('pending', 'delivering') OR (p.status = 'dead_lettered' AND p.fifo_block))`

// Head is the first open delivery of a sequence (see SequenceHead).
type Head struct {
	DeliveryID string
	Sequence   int64
	Status     delivery.Status
	// Cycle is the delivery's current cycle when Row is nil.
	Cycle int
	// Row is its start or replay row when one waits: the sequencer sends
	// or hands off that row. Nil when the delivery is in its own workflow
	// (a retry, a replay's cycle) or is a dead letter that blocks.
	Row *outbox.Row
}

// SequenceHead reads the first open delivery of endpointID's sequence for
// key, with its oldest start or replay row; ok is false when the sequence
// has none (every delivery in it ended).
func SequenceHead(ctx context.Context, q outbox.Querier, endpointID, key string) (h Head, ok bool, err error) {
	const head = `SELECT p.id FROM deliveries p
		WHERE p.endpoint_id = $1 AND p.ordering_key = $2 AND ` + sequenceOpen + `
		ORDER BY p.sequence LIMIT 1`
	// Mostly the head has its row: one statement.
	rows, err := q.Query(ctx, rowSelect+`
		WHERE o.delivery_id = (`+head+`) AND o.kind IN ($3, $4)
		ORDER BY o.id LIMIT 1`, endpointID, key, outbox.KindStart, outbox.KindReplay)
	if err != nil {
		return Head{}, false, fmt.Errorf("head of sequence %s/%s: %w", endpointID, key, err)
	}
	found, err := collectRows(rows)
	if err != nil {
		return Head{}, false, err
	}
	if len(found) > 0 {
		r := found[0]
		return Head{DeliveryID: r.DeliveryID, Sequence: r.Sequence, Status: r.Status, Row: &r}, true, nil
	}
	err = q.QueryRow(ctx, `SELECT p.id, p.sequence, p.status, p.cycle FROM deliveries p
		WHERE p.id = (`+head+`)`, endpointID, key).Scan(&h.DeliveryID, &h.Sequence, &h.Status, &h.Cycle)
	if errors.Is(err, pgx.ErrNoRows) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, fmt.Errorf("head of sequence %s/%s: %w", endpointID, key, err)
	}
	return h, true, nil
}

// SequenceMember reads delivery id as SequenceHead reads a head; ok is
// false when it is no longer open (it ended, or was released). A sequencer
// asks for the delivery it waits for first: while that one runs in its own
// workflow, an older delivery's replay queued meanwhile waits too.
func SequenceMember(ctx context.Context, q outbox.Querier, id string) (h Head, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT p.id, p.sequence, p.status, p.cycle FROM deliveries p WHERE p.id = $1 AND `+sequenceOpen, id).
		Scan(&h.DeliveryID, &h.Sequence, &h.Status, &h.Cycle)
	if errors.Is(err, pgx.ErrNoRows) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, fmt.Errorf("sequence member %s: %w", id, err)
	}
	rows, err := q.Query(ctx, rowSelect+`
		WHERE o.delivery_id = $1 AND o.kind IN ($2, $3)
		ORDER BY o.id LIMIT 1`, id, outbox.KindStart, outbox.KindReplay)
	if err != nil {
		return Head{}, false, fmt.Errorf("row of %s: %w", id, err)
	}
	found, err := collectRows(rows)
	if err != nil {
		return Head{}, false, err
	}
	if len(found) > 0 {
		h.Row = &found[0]
	}
	return h, true, nil
}

// LeaseSequence gives endpointID's sequence for key to holder for hold,
// when no other holder's lease runs: a sequence is sent by one run at a
// time. The lease (sequence_holds) ends at the database's clock plus hold,
// the clock every lease is compared on, so a worker whose clock is behind
// cannot hold a sequence past its time; and it is no row a publish locks,
// so taking or renewing it never waits for a producer's open transaction.
// A holder renews its lease by calling it again. False when another holder
// holds it, or the sequence has no counter row (see SequenceExists).
func LeaseSequence(ctx context.Context, q outbox.Querier, endpointID, key, holder string, hold time.Duration) (bool, error) {
	tag, err := q.Exec(ctx, `
		INSERT INTO sequence_holds (endpoint_id, ordering_key, leased_by, leased_until)
		SELECT endpoint_id, ordering_key, $3, now() + $4 * interval '1 millisecond' FROM sequences
		WHERE endpoint_id = $1 AND ordering_key = $2
		ON CONFLICT (endpoint_id, ordering_key) DO UPDATE SET leased_by = EXCLUDED.leased_by, leased_until = EXCLUDED.leased_until
		WHERE sequence_holds.leased_by = $3 OR sequence_holds.leased_until < now()`, endpointID, key, holder, hold.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("lease sequence %s/%s: %w", endpointID, key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RenewSequence extends holder's lease of the sequence to the database's
// clock plus hold; false when holder holds it no more (it let go, or
// another run took it).
func RenewSequence(ctx context.Context, q outbox.Querier, endpointID, key, holder string, hold time.Duration) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE sequence_holds SET leased_until = now() + $4 * interval '1 millisecond'
		WHERE endpoint_id = $1 AND ordering_key = $2 AND leased_by = $3 AND leased_until >= now()`,
		endpointID, key, holder, hold.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("renew lease of sequence %s/%s: %w", endpointID, key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// HoldsSequence reports whether holder still holds endpointID's sequence
// for key on the database's clock: a run checks it again just before each
// send, so a run that lost its hold (frozen past its end) sends nothing.
func HoldsSequence(ctx context.Context, q outbox.Querier, endpointID, key, holder string) (bool, error) {
	var held bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sequence_holds
		WHERE endpoint_id = $1 AND ordering_key = $2 AND leased_by = $3 AND leased_until > now())`, endpointID, key, holder).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("sequence %s/%s held by %s: %w", endpointID, key, holder, err)
	}
	return held, nil
}

// SequenceKey names one endpoint's sequence for an ordering key ("" is the
// endpoint's default sequence).
type SequenceKey struct {
	EndpointID  string
	OrderingKey string
}

// SequencesHeld reports, in one statement, which of keys a run holds now
// (a lease running on the database's clock).
func SequencesHeld(ctx context.Context, q outbox.Querier, keys []SequenceKey) (map[SequenceKey]bool, error) {
	return sequencesWhere(ctx, q, keys, "held", `EXISTS (SELECT 1 FROM sequence_holds h
		WHERE h.endpoint_id = k.endpoint_id AND h.ordering_key = k.ordering_key AND h.leased_until > now())`)
}

// SequencesOpen reports, in one statement, which of keys still have an open
// delivery: a sequence that has none (its deliveries ended, or its app or
// endpoint was deleted) needs no sequencer.
func SequencesOpen(ctx context.Context, q outbox.Querier, keys []SequenceKey) (map[SequenceKey]bool, error) {
	return sequencesWhere(ctx, q, keys, "open", `EXISTS (SELECT 1 FROM deliveries p
		WHERE p.endpoint_id = k.endpoint_id AND p.ordering_key = k.ordering_key AND `+sequenceOpen+`)`)
}

// sequencesWhere returns which of keys (alias k) meet cond, in one
// statement; what names cond in errors.
func sequencesWhere(ctx context.Context, q outbox.Querier, keys []SequenceKey, what, cond string) (map[SequenceKey]bool, error) {
	eps := make([]string, len(keys))
	ks := make([]string, len(keys))
	for i, k := range keys {
		eps[i], ks[i] = k.EndpointID, k.OrderingKey
	}
	rows, err := q.Query(ctx, `SELECT k.endpoint_id, k.ordering_key FROM unnest($1::text[], $2::text[]) AS k(endpoint_id, ordering_key)
		WHERE `+cond, eps, ks)
	if err != nil {
		return nil, fmt.Errorf("%d sequences %s: %w", len(keys), what, err)
	}
	found := map[SequenceKey]bool{}
	var k SequenceKey
	if _, err := pgx.ForEachRow(rows, []any{&k.EndpointID, &k.OrderingKey}, func() error {
		found[k] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%d sequences %s: %w", len(keys), what, err)
	}
	return found, nil
}

// SequenceExists reports whether endpointID's sequence for key has its
// counter row (it goes with its endpoint's app).
func SequenceExists(ctx context.Context, q outbox.Querier, endpointID, key string) (bool, error) {
	var exists bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sequences WHERE endpoint_id = $1 AND ordering_key = $2)`,
		endpointID, key).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("sequence %s/%s exists: %w", endpointID, key, err)
	}
	return exists, nil
}

// UnleaseSequence ends holder's lease of the sequence.
func UnleaseSequence(ctx context.Context, q outbox.Querier, endpointID, key, holder string) error {
	_, err := q.Exec(ctx, `DELETE FROM sequence_holds WHERE endpoint_id = $1 AND ordering_key = $2 AND leased_by = $3`, endpointID, key, holder)
	if err != nil {
		return fmt.Errorf("end lease of sequence %s/%s: %w", endpointID, key, err)
	}
	return nil
}

// waitingFor is deliveryCols' waiting_for: the nearest open delivery ahead
// of a pending ordered delivery d.
const waitingFor = `CASE WHEN d.sequence IS NOT NULL AND d.status = 'pending' THEN (
	  SELECT p.id FROM deliveries p
	  WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key AND p.sequence < d.sequence
	    AND ` + sequenceOpen + `
	  ORDER BY p.sequence DESC LIMIT 1) END`

// blocksSequence is deliveryCols' blocks_sequence: d is a dead letter that
// holds its sequence.
const blocksSequence = `(d.sequence IS NOT NULL AND d.status = 'dead_lettered' AND COALESCE(d.fifo_block, false) AND d.released_at IS NULL)`

// EndpointPaused reports whether endpoint id is paused (and still
// enabled): its sequences send nothing.
func EndpointPaused(ctx context.Context, q outbox.Querier, id string) (bool, error) {
	var paused bool
	err := q.QueryRow(ctx, `SELECT `+holding+` FROM endpoints e WHERE e.id = $1`, id).Scan(&paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("endpoint %s paused: %w", id, err)
	}
	return paused, nil
}
