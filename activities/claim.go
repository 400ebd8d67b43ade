package activities

import (
	"context"
	"time"

	"hookrelay/delivery"
	"hookrelay/internal/coalesce"
	"hookrelay/store"
)

// An attempt's claim: made with its target when nothing must come between
// (load), or on its own once its share, slot and flight are taken (try).

// load loads req's target at started. When req names its endpoint, needs
// no slot (none reserved), the worker is not stopping and the endpoint's
// share has a place free now, it takes the place and claims the attempt in
// the same statement if the endpoint has no limits to wait for
// (store.ClaimTarget): claimed then holds the claim and the place, for the
// request to be made at once (or at req.At, which the claim covers).
// Otherwise claimed is nil and the attempt goes the long way (its share,
// slot and flight, then ClaimAttempt), nothing claimed and no place held:
// a delivery waiting for its share stays pending, as nothing of it is on
// the wire.
func (a *Activities) load(ctx context.Context, req SendRequest, started time.Time) (t store.Target, claimed *claim, err error) {
	if req.EndpointID == "" || !req.Slot.IsZero() || a.Open.draining() {
		t, err = a.Store.LoadTarget(ctx, req.DeliveryID, started)
		return t, nil, err
	}
	release, _, ok := a.Shares.acquire(ctx, a.Open.stopping(), req.EndpointID, time.Time{})
	if !ok {
		t, err = a.Store.LoadTarget(ctx, req.DeliveryID, started)
		return t, nil, err
	}
	c := &claim{until: claimEnd(req, delivery.Later(started, req.At)), release: release}
	cctx := ctx
	if !req.At.IsZero() {
		// A coalescing store may wait for the claims of attempts due soon
		// after this one, up to ClaimMargin before its due time.
		cctx = coalesce.Linger(ctx, req.At.Add(-ClaimMargin))
	}
	t, ok, err = a.Store.ClaimTarget(cctx, req.DeliveryID, started, c.until)
	if ok && t.EndpointID != req.EndpointID {
		// The place taken is another endpoint's (a delivery never changes
		// endpoint; a caller named the wrong one): the long way takes the
		// right one.
		a.releaseClaim(ctx, req.DeliveryID, c.until)
		ok = false
	}
	if err != nil || !ok {
		release()
		return t, nil, err
	}
	return t, c, nil
}

// claim is an attempt claimed with its target: on the wire until until,
// with a place of its endpoint's share that release gives back.
type claim struct {
	until   time.Time
	release func()
}

// claimEnd is how long an attempt of req whose request starts at from is
// marked on the wire: its timeout and FlightSlack.
func claimEnd(req SendRequest, from time.Time) time.Time {
	return from.Add(req.Timeout + FlightSlack).Truncate(time.Microsecond)
}

// releaseClaim gives back the claim (until until) of an attempt not sent.
func (a *Activities) releaseClaim(ctx context.Context, deliveryID string, until time.Time) {
	if err := a.Store.ReleaseClaim(context.WithoutCancel(ctx), deliveryID, until); err != nil {
		a.logger().Warn("claim of an attempt not sent not released; it lapses", "delivery_id", deliveryID, "err", err)
	}
}

// recordLinger is ctx for the record of an attempt to t: an unordered
// attempt's record may wait for company (RecordLinger); an ordered key's
// next message waits for this one's record.
func (a *Activities) recordLinger(ctx context.Context, t store.Target) context.Context {
	if t.Sequence != 0 {
		return ctx
	}
	return coalesce.Linger(ctx, a.now().Add(RecordLinger))
}
