package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"hookrelay/store"
)

// SendGroup makes the attempts of reqs, distinct deliveries (a
// carrier's), and answers them in one local-activity result. Requests with
// a due time (SendRequest.At) are each made as SendSigned makes one, at
// that time: loaded and claimed ClaimLead before it (claims and records
// of attempts due close together share statements). Requests without one
// are due together: made at once, all in parallel, their targets loaded in
// one statement and their records stored in one. An error (the targets
// could not be loaded) means nothing was sent.
func (a *Activities) SendGroup(ctx context.Context, reqs []SendRequest) ([]SendOutcome, error) {
	if len(reqs) > 0 && !reqs[0].At.IsZero() {
		return a.sendTimed(ctx, reqs), nil
	}
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.DeliveryID
	}
	ts, err := a.Store.LoadTargets(ctx, ids, a.now())
	if err != nil {
		return nil, fmt.Errorf("send group of %d: %w", len(reqs), err)
	}
	targets := make(map[string]store.Target, len(ts))
	for _, t := range ts {
		targets[t.DeliveryID] = t
	}
	outs := make([]SendOutcome, len(reqs))
	recs := make([]*store.Attempt, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		t, ok := targets[req.DeliveryID]
		if !ok {
			outs[i] = Outcome(SendResult{}, gone(fmt.Errorf("send %s: load delivery %s: %w", req.DeliveryID, req.DeliveryID, store.ErrNotFound)))
			continue
		}
		if res, held := a.held(ctx, req, t.EndpointID, false, time.Time{}); held {
			outs[i] = Outcome(res, nil)
			continue
		}
		wg.Go(func() {
			res, rec, err := a.attempt(ctx, req, t, a.now(), time.Time{}, nil)
			outs[i], recs[i] = Outcome(res, err), rec
		})
	}
	wg.Wait()
	var batch []store.Attempt
	var at []int
	for i, rec := range recs {
		if rec != nil {
			batch, at = append(batch, *rec), append(at, i)
		}
	}
	if len(batch) == 0 {
		return outs, nil
	}
	errs, err := a.record(ctx, batch)
	for j, i := range at {
		req := reqs[i]
		e := err
		if e == nil {
			e = errs[j]
		}
		if e != nil {
			outs[i] = Outcome(a.unrecorded(ctx, req, targets[req.DeliveryID], outs[i].Result, recs[i], e))
			continue
		}
		a.recorded(ctx, req, targets[req.DeliveryID], outs[i].Result, recs[i].KeyIDs)
	}
	return outs, nil
}

// sendTimed makes each of reqs at its own due time (SendRequest.At), all
// in parallel: each waits in the worker until ClaimLead before it, then
// goes as SendSigned goes.
func (a *Activities) sendTimed(ctx context.Context, reqs []SendRequest) []SendOutcome {
	outs := make([]SendOutcome, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			if !a.sleepUntil(ctx, req.At.Add(-ClaimLead)) {
				outs[i] = Outcome(SendResult{}, ctx.Err())
				return
			}
			outs[i] = Outcome(a.send(ctx, req, 0, time.Time{}))
		})
	}
	wg.Wait()
	return outs
}
