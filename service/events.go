package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"hookrelay/outbox"
	"hookrelay/store"
)

// eventView is a stored event as callers see it: its frozen envelope.
func eventView(e store.EventRecord) (outbox.Published, error) {
	var v outbox.Published
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		return v, fmt.Errorf("decode event %s: %w", e.ID, err)
	}
	v.OrderingKey = e.OrderingKey
	if e.FilteredOut != nil {
		if err := json.Unmarshal(e.FilteredOut, &v.FilteredOut); err != nil {
			return v, fmt.Errorf("decode event %s: %w", e.ID, err)
		}
	}
	return v, nil
}

// EventQuery selects events; every field is optional.
type EventQuery struct {
	Type         string
	Since, Until time.Time
}

// ListEvents lists a page of app appID's events matching q. A session
// limited to some endpoints may not list them (the page would show the
// payloads its endpoints never got); it reaches an event through its
// deliveries (GetEvent).
func (s *Service) ListEvents(ctx context.Context, p principal, appID string, q EventQuery, pg Page) (List[outbox.Published], error) {
	if err := Authorize(p, appID); err != nil {
		return List[outbox.Published]{}, err
	}
	if p.Limited() {
		return List[outbox.Published]{}, &ForbiddenError{Detail: MsgNotAllowed}
	}
	sp, err := s.appPage(ctx, p, appID, pg)
	if err != nil {
		return List[outbox.Published]{}, err
	}
	evs, err := s.store.ListEvents(ctx, appID, q.Type, q.Since, q.Until, sp)
	if err != nil {
		return List[outbox.Published]{}, typed(err)
	}
	views := make([]outbox.Published, 0, len(evs))
	for _, e := range evs {
		v, err := eventView(e)
		if err != nil {
			return List[outbox.Published]{}, err
		}
		views = append(views, v)
	}
	return listOf(sp, views, func(v outbox.Published) string { return v.ID }), nil
}

// GetEvent is event id of app appID with its deliveries (up to
// MaxEventDeliveries). A session limited to some endpoints sees only its
// endpoints' deliveries and filter skips; an event with none of them is a
// *NotFoundError.
func (s *Service) GetEvent(ctx context.Context, p principal, appID, id string) (outbox.Published, error) {
	if err := Authorize(p, appID); err != nil {
		return outbox.Published{}, err
	}
	e, err := s.store.GetEvent(ctx, appID, id)
	if err != nil {
		return outbox.Published{}, typed(err)
	}
	v, err := eventView(e)
	if err != nil {
		return v, err
	}
	ds, err := s.store.ListDeliveries(ctx, appID, store.DeliveryFilter{EventID: e.ID}, store.Page{Limit: MaxEventDeliveries})
	if err != nil {
		return v, typed(err)
	}
	v.Deliveries = make([]outbox.DeliveryRef, len(ds))
	for i, d := range ds {
		v.Deliveries[i] = outbox.DeliveryRef{ID: d.ID, EndpointID: d.EndpointID, Status: d.Status}
	}
	if p.Limited() {
		v.Deliveries = slices.DeleteFunc(v.Deliveries, func(d outbox.DeliveryRef) bool { return !p.SeesEndpoint(d.EndpointID) })
		v.FilteredOut = slices.DeleteFunc(v.FilteredOut, func(f outbox.FilteredOut) bool { return !p.SeesEndpoint(f.EndpointID) })
		if len(v.Deliveries) == 0 && len(v.FilteredOut) == 0 {
			return outbox.Published{}, &NotFoundError{Detail: fmt.Errorf("event %s: %w", id, store.ErrNotFound).Error(), err: store.ErrNotFound}
		}
	}
	return v, nil
}
