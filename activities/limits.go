package activities

import (
	"context"
	"fmt"
	"time"

	"hookrelay/store"
)

// slotFor is the rate-limit slot req's request leaves on (zero when t's
// endpoint has no rate limit): req's own when it has not passed, else a new
// one. held is true when res now says nothing is sent yet: the slot is more
// than SlotWaitInActivity away (the workflow waits for it), or past the
// last moment the request still fits before the deadline (the workflow
// then dead-letters it).
func (a *Activities) slotFor(ctx context.Context, req SendRequest, t store.Target, res *SendResult) (slot time.Time, held bool, err error) {
	if t.RateLimit <= 0 {
		return time.Time{}, false, nil
	}
	slot = req.Slot
	if step := store.SlotStep(t.RateLimit); !slot.IsZero() && a.now().After(slot.Add(step)) {
		// The slot passed before this try could use it (workers were
		// busy or down): sending now could bunch with the next slots'
		// sends, so take a new one.
		slot = time.Time{}
	}
	if slot.IsZero() {
		if slot, err = a.Store.ReserveSlot(ctx, t.EndpointID, t.RateLimit, req.At); err != nil {
			return time.Time{}, false, fmt.Errorf("send %s: %w", req.DeliveryID, err)
		}
	}
	wait := slot.Sub(a.now())
	if last, ok := lastStart(req); wait > SlotWaitInActivity || (ok && slot.After(last)) {
		res.Class, res.SlotAt = ClassRateLimited, slot
		res.Error = fmt.Sprintf("rate limit of %d/s: next slot in %s; nothing sent yet", t.RateLimit, wait.Round(time.Millisecond))
		return slot, true, nil
	}
	return slot, false, nil
}

// lastStart is the last moment req's request still fits before its
// deadline; ok is false when req has none.
func lastStart(req SendRequest) (last time.Time, ok bool) {
	if req.Deadline.IsZero() {
		return time.Time{}, false
	}
	return req.Settings.LastStart(req.Deadline), true
}

// sleepUntil waits until at (zero or past: not at all); false when ctx
// ended first.
func (a *Activities) sleepUntil(ctx context.Context, at time.Time) bool {
	return a.sleepUntilOr(ctx, at, nil)
}

// sleepUntilOr is sleepUntil, cut short (true) when woken is closed.
func (a *Activities) sleepUntilOr(ctx context.Context, at time.Time, woken <-chan struct{}) bool {
	wait := at.Sub(a.now())
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-woken:
		return true
	}
}

// unavailable fills res when t's endpoint takes no request now (disabled,
// deleted or paused): nothing is sent.
func unavailable(t store.Target, res *SendResult) bool {
	switch {
	case t.Inactive:
		res.Class = ClassEndpointDisabled
		res.Error = "endpoint disabled or deleted; nothing sent"
	case t.Paused:
		res.Class = ClassEndpointPaused
		res.Error = "endpoint paused; nothing sent"
	default:
		return false
	}
	return true
}
