package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/ids"
	"hookrelay/store"
)

// Audited delivery calls.
var (
	actReplayDelivery = action{"POST", "/v1/apps/:app/deliveries/:dlv/replay", 202}
	actReplayEndpoint = action{"POST", "/v1/apps/:app/endpoints/:ep/replay", 202}
	actReplayDryRun   = action{"POST", "/v1/apps/:app/endpoints/:ep/replay", 200}
	actRelease        = action{"POST", "/v1/apps/:app/deliveries/:dlv/release", 202}
)

// ReleaseDelivery frees the fifo sequence that dead letter id blocks
// (fifo_on_dead_letter block): the next delivery of its sequence is sent;
// the dead letter itself stays, replayable. Anything else is a
// *ConflictError.
func (s *Service) ReleaseDelivery(ctx context.Context, p principal, appID, id string) error {
	if err := can(p, appID, access.CapResend); err != nil {
		return err
	}
	d, err := s.delivery(ctx, p, appID, id)
	if err != nil {
		return err
	}
	released, err := store.ReleaseDelivery(ctx, s.store.Pool(), appID, d.ID, p.ID)
	if err != nil {
		return typed(err)
	}
	if !released {
		return &ConflictError{Field: "status", Detail: fmt.Sprintf("delivery %s is %s; only a dead letter that blocks its fifo sequence (fifo_on_dead_letter block), not released before, can be released", d.ID, d.Status)}
	}
	s.record(ctx, p, appID, actRelease, "/v1/apps/"+appID+"/deliveries/"+id+"/release")
	return nil
}

// DeliveryQuery selects deliveries; every field is optional.
type DeliveryQuery struct {
	Status      delivery.Status
	EndpointIDs []string
	EventID     string
	EventType   string
	Since       time.Time
	Until       time.Time
}

// ListDeliveries lists a page of app appID's deliveries matching q. A
// session limited to some endpoints sees only theirs; naming another is a
// *NotFoundError.
func (s *Service) ListDeliveries(ctx context.Context, p principal, appID string, q DeliveryQuery, pg Page) (List[store.Delivery], error) {
	if err := Authorize(p, appID); err != nil {
		return List[store.Delivery]{}, err
	}
	sp, err := pg.store()
	if err != nil {
		return List[store.Delivery]{}, err
	}
	if q.Status != "" && !slices.Contains(delivery.Statuses(), q.Status) {
		return List[store.Delivery]{}, invalidf("status", "status must be one of %v", delivery.Statuses())
	}
	if p.Limited() {
		for _, id := range q.EndpointIDs {
			if err := sees(p, appID, id); err != nil {
				return List[store.Delivery]{}, err
			}
		}
		if len(q.EndpointIDs) == 0 {
			q.EndpointIDs = p.EndpointIDs
		}
	}
	if _, err := s.store.GetApp(ctx, appID); err != nil {
		return List[store.Delivery]{}, typed(err)
	}
	ds, err := s.store.ListDeliveries(ctx, appID, store.DeliveryFilter{Status: q.Status, EndpointIDs: q.EndpointIDs, EventID: q.EventID,
		EventType: q.EventType, Since: q.Since, Until: q.Until}, sp)
	if err != nil {
		return List[store.Delivery]{}, typed(err)
	}
	return listOf(sp, ds, func(d store.Delivery) string { return d.ID }), nil
}

// GetDelivery answers the three questions of a delivery: its state, its
// last failure and its next attempt (the running workflow's, when the
// engine answers within EngineQueryTimeout). One pruned past its
// retention is a *GoneError.
func (s *Service) GetDelivery(ctx context.Context, p principal, appID, id string) (store.Delivery, error) {
	d, err := s.delivery(ctx, p, appID, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if keep, ok := s.pruned(ctx, appID, id); ok {
				return d, &GoneError{Detail: fmt.Sprintf("delivery %s was made more than %s ago and has been pruned (the app's retention, else HOOKRELAY_RETENTION)", id, keep)}
			}
		}
		return d, err
	}
	if s.engine != nil && d.Status.InFlight() {
		qctx, cancel := context.WithTimeout(ctx, EngineQueryTimeout)
		defer cancel()
		if at, err := s.engine.NextAttemptAt(qctx, d.ID); err == nil {
			d.NextAttemptAt = at
		}
	}
	return d, nil
}

// delivery loads delivery id of app appID if p sees its endpoint.
func (s *Service) delivery(ctx context.Context, p principal, appID, id string) (store.Delivery, error) {
	if err := Authorize(p, appID); err != nil {
		return store.Delivery{}, err
	}
	d, err := s.store.GetDelivery(ctx, appID, id)
	if err != nil {
		return d, typed(err)
	}
	if !p.SeesEndpoint(d.EndpointID) {
		return store.Delivery{}, &NotFoundError{Detail: fmt.Errorf("delivery %s: %w", id, store.ErrNotFound).Error(), err: store.ErrNotFound}
	}
	return d, nil
}

// pruned reports whether a delivery ID of appID not found is older than
// the retention that applies to it (the app's, else the server's), so it
// was pruned rather than never there; keep is that retention.
func (s *Service) pruned(ctx context.Context, appID, id string) (keep time.Duration, ok bool) {
	made, ok := ids.Time(id)
	if !ok {
		return 0, false
	}
	keep = s.retention
	if a, err := s.store.GetApp(ctx, appID); err == nil && a.Retention > 0 {
		keep = a.Retention
	}
	return keep, keep > 0 && time.Since(made) > keep
}

// ListAttempts is every attempt of delivery id, oldest first.
func (s *Service) ListAttempts(ctx context.Context, p principal, appID, id string) ([]store.Attempt, error) {
	if _, err := s.delivery(ctx, p, appID, id); err != nil {
		return nil, err
	}
	atts, err := s.store.ListAttempts(ctx, appID, id, 0)
	if err != nil {
		return nil, typed(err)
	}
	if atts == nil {
		atts = []store.Attempt{}
	}
	return atts, nil
}

// ReplayDelivery queues a new cycle of a finished delivery. One still in
// flight, or whose endpoint is disabled or deleted, is a *ConflictError.
func (s *Service) ReplayDelivery(ctx context.Context, p principal, appID, id string) error {
	if err := can(p, appID, access.CapResend); err != nil {
		return err
	}
	d, err := s.delivery(ctx, p, appID, id)
	if err != nil {
		return err
	}
	queued, err := store.ReplayDeliveries(ctx, s.store.Pool(), appID, []string{d.ID}, p.ID, p.Name)
	if err != nil {
		return typed(err)
	}
	if len(queued) == 0 {
		if err := s.endpointEnabled(ctx, appID, d.EndpointID, false); err != nil {
			return err
		}
		return &ConflictError{Field: "status", Detail: fmt.Sprintf("delivery %s is %s; only finished (succeeded, dead-lettered or canceled) deliveries can be replayed", d.ID, d.Status)}
	}
	s.record(ctx, p, appID, actReplayDelivery, "/v1/apps/"+appID+"/deliveries/"+id+"/replay")
	return nil
}

// ReplayRange selects an endpoint's dead letters by when they were made.
type ReplayRange struct {
	// Since is required.
	Since *time.Time `json:"since"`
	// Until defaults to now; it must be after Since.
	Until *time.Time `json:"until"`
	// DryRun counts the dead letters the range would replay and replays
	// nothing.
	DryRun bool `json:"dry_run"`
}

// ReplayEndpoint replays (or, dry, counts) endpoint id's dead letters
// made in the range, returning how many.
func (s *Service) ReplayEndpoint(ctx context.Context, p principal, appID, id string, in ReplayRange) (int, error) {
	if err := sees(p, appID, id); err != nil {
		return 0, err
	}
	if err := can(p, appID, access.CapResend); err != nil {
		return 0, err
	}
	if in.Since == nil {
		return 0, invalidf("since", "since is required (RFC 3339)")
	}
	until := time.Now()
	if in.Until != nil {
		until = *in.Until
	}
	if !until.After(*in.Since) {
		return 0, invalidf("until", "until must be after since")
	}
	if err := s.endpointEnabled(ctx, appID, id, true); err != nil {
		return 0, err
	}
	dead, err := s.store.DeadLettered(ctx, appID, id, *in.Since, until)
	if err != nil {
		return 0, typed(err)
	}
	path := endpointPath(appID, id) + "/replay"
	if in.DryRun {
		s.record(ctx, p, appID, actReplayDryRun, path)
		return len(dead), nil
	}
	queued, err := store.ReplayDeliveries(ctx, s.store.Pool(), appID, dead, p.ID, p.Name)
	if err != nil {
		return 0, typed(err)
	}
	s.record(ctx, p, appID, actReplayEndpoint, path)
	return len(queued), nil
}

// Stats are the acceptance figures over app appID's latest last events
// (0: StatsLastDefault), of endpointIDs only when given (a limited
// session: of its own endpoints only).
func (s *Service) Stats(ctx context.Context, p principal, appID string, last int, endpointIDs []string) (store.Stats, error) {
	if err := Authorize(p, appID); err != nil {
		return store.Stats{}, err
	}
	n, err := lastOf("last", last, StatsLastDefault, MaxStatsLast, "last must be an integer from 1 to %d")
	if err != nil {
		return store.Stats{}, err
	}
	if p.Limited() {
		for _, id := range endpointIDs {
			if err := sees(p, appID, id); err != nil {
				return store.Stats{}, err
			}
		}
		if len(endpointIDs) == 0 {
			endpointIDs = p.EndpointIDs
		}
	}
	if _, err := s.store.GetApp(ctx, appID); err != nil {
		return store.Stats{}, typed(err)
	}
	st, err := s.store.Stats(ctx, appID, n, endpointIDs, time.Now())
	if err != nil {
		return st, typed(err)
	}
	return st, nil
}
