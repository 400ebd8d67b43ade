package store

import (
	"context"
	"fmt"
	"hookrelay/ids"
	"time"

	"github.com/jackc/pgx/v5"
)

// SlotSpacing is how much wider than 1/rate rate-limit slots are spaced:
// a send leaves a few milliseconds after its slot, and the margin keeps
// the receiver's count in any one-second window within the limit.
const SlotSpacing = 1.01

// SlotStep is the time between two of an endpoint's rate-limit slots.
func SlotStep(rate int) time.Duration {
	return time.Duration(float64(time.Second) * SlotSpacing / float64(rate))
}

// ReserveSlot reserves the next time endpointID may be sent to under its
// rate limit of rate per second, shared by every worker: slots are spaced
// SlotStep apart, and the returned one is never before now, nor before
// from (zero: no such bound), the time the caller's request is due: an
// attempt claimed ahead of its due time is counted on a slot at or after
// that time, so the endpoint's next slot is a full step after its request.
// The caller sends at (or just after) it and must not reserve again for
// the same attempt.
func (s *Store) ReserveSlot(ctx context.Context, endpointID string, rate int, from time.Time) (time.Time, error) {
	step := SlotStep(rate).Microseconds()
	var floor *time.Time
	if !from.IsZero() {
		floor = &from
	}
	var slot time.Time
	err := s.pool.QueryRow(ctx, `
		INSERT INTO endpoint_slots (endpoint_id, next_slot) VALUES ($1, GREATEST(now(), $3) + $2 * interval '1 microsecond')
		ON CONFLICT (endpoint_id) DO UPDATE SET next_slot = GREATEST(endpoint_slots.next_slot, now(), $3) + $2 * interval '1 microsecond'
		RETURNING next_slot - $2 * interval '1 microsecond'`, endpointID, step, floor).Scan(&slot)
	if err != nil {
		return time.Time{}, fmt.Errorf("reserve a slot of %s: %w", endpointID, err)
	}
	return slot, nil
}

// AcquireFlight takes one of endpointID's max concurrent request leases
// for ttl, across every worker; ok is false when all are taken. Release it
// with ReleaseFlight; a lease whose holder died expires.
func (s *Store) AcquireFlight(ctx context.Context, endpointID string, max int, ttl time.Duration) (lease string, ok bool, err error) {
	lease = ids.New("flt_")
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// The endpoint row serialises the count and the insert.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM endpoints WHERE id = $1 FOR UPDATE`, endpointID); err != nil {
			return err
		}
		// Leases of workers that died are dropped here, the only place
		// that counts them.
		if _, err := tx.Exec(ctx, `DELETE FROM endpoint_flights WHERE endpoint_id = $1 AND expires_at <= now()`, endpointID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO endpoint_flights (id, endpoint_id, expires_at)
			SELECT $1, $2, now() + $4 * interval '1 millisecond'
			WHERE (SELECT count(*) FROM endpoint_flights WHERE endpoint_id = $2 AND expires_at > now()) < $3`,
			lease, endpointID, max, ttl.Milliseconds())
		if err != nil {
			return err
		}
		ok = tag.RowsAffected() == 1
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("acquire a flight of %s: %w", endpointID, err)
	}
	return lease, ok, nil
}

// ReleaseFlight frees a lease AcquireFlight gave.
func (s *Store) ReleaseFlight(ctx context.Context, lease string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM endpoint_flights WHERE id = $1`, lease); err != nil {
		return fmt.Errorf("release flight %s: %w", lease, err)
	}
	return nil
}

// ReleaseClaim ends the claim ClaimAttempt made until until when its
// request was not written after all (its attempt ended while it waited for
// its rate-limit slot): the delivery's next attempt need not wait for the
// claim to lapse. A claim made since (the old one lapsed) is left alone.
func (s *Store) ReleaseClaim(ctx context.Context, deliveryID string, until time.Time) error {
	return s.releaseClaims(ctx, []string{deliveryID}, []time.Time{until})
}

// releaseClaims is ReleaseClaim for many deliveries, each with its own
// claim's end.
func (s *Store) releaseClaims(ctx context.Context, ids []string, untils []time.Time) error {
	if _, err := s.HotPool().Exec(ctx, `
		UPDATE deliveries d SET inflight_until = NULL
		FROM unnest($1::text[], $2::timestamptz[]) AS v(id, until)
		WHERE d.id = v.id AND d.inflight_until = v.until`, ids, untils); err != nil {
		return fmt.Errorf("release claims of %d deliveries: %w", len(ids), err)
	}
	return nil
}
