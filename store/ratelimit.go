package store

import (
	"context"
	"fmt"
	"time"
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
// SlotStep apart, and the returned one is never before now. The caller
// sends at (or just after) it and must not reserve again for the same
// attempt.
func (s *Store) ReserveSlot(ctx context.Context, endpointID string, rate int) (time.Time, error) {
	step := SlotStep(rate).Microseconds()
	var slot time.Time
	err := s.pool.QueryRow(ctx, `
		INSERT INTO endpoint_slots (endpoint_id, next_slot) VALUES ($1, now() + $2 * interval '1 microsecond')
		ON CONFLICT (endpoint_id) DO UPDATE SET next_slot = GREATEST(endpoint_slots.next_slot, now()) + $2 * interval '1 microsecond'
		RETURNING next_slot - $2 * interval '1 microsecond'`, endpointID, step).Scan(&slot)
	if err != nil {
		return time.Time{}, fmt.Errorf("reserve a slot of %s: %w", endpointID, err)
	}
	return slot, nil
}
