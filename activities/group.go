package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"hookrelay/store"
)

// SendGroup makes the attempts of reqs, distinct deliveries due together
// (a carrier's), each exactly as SendSigned makes one and all in parallel,
// but loads their targets in one statement and records them in one, and
// answers them in one local-activity result. An error (the targets could
// not be loaded) means nothing was sent.
func (a *Activities) SendGroup(ctx context.Context, reqs []SendRequest) ([]SendOutcome, error) {
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
			outs[i] = Outcome(SendResult{}, gone(fmt.Errorf("send %s: %w", req.DeliveryID, e)))
			continue
		}
		a.recorded(ctx, req, targets[req.DeliveryID], outs[i].Result, recs[i].KeyIDs)
	}
	return outs, nil
}
