package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"hookrelay/outbox"
	"hookrelay/store"
)

// EventTypeInput is an event type's fields as a call gives them.
type EventTypeInput struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Deprecated  *bool           `json:"deprecated"`
}

// Audited catalog calls.
var (
	actCreateEventType = action{"POST", "/v1/event-types", 201}
	actPatchEventType  = action{"PATCH", "/v1/event-types/:name", 200}
)

func validSchema(schema json.RawMessage) error {
	if len(schema) > 0 && (!json.Valid(schema) || bytes.TrimSpace(schema)[0] != '{') {
		return invalidf("schema", "schema must be a JSON object (a JSON Schema)")
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// CreateEventType adds a type to the operator's catalog (admin only).
func (s *Service) CreateEventType(ctx context.Context, p principal, in EventTypeInput) (store.EventType, error) {
	if err := AdminOnly(p); err != nil {
		return store.EventType{}, err
	}
	if err := outbox.ValidateType(deref(in.Name)); err != nil {
		return store.EventType{}, invalidf("name", "name: %s", err)
	}
	if err := validSchema(in.Schema); err != nil {
		return store.EventType{}, err
	}
	et, err := s.store.CreateEventType(ctx, store.EventType{Name: *in.Name, Description: deref(in.Description),
		Schema: in.Schema, Deprecated: deref(in.Deprecated)})
	if errors.Is(err, store.ErrConflict) {
		return et, &ConflictError{Field: "name", Detail: "event type " + *in.Name + " exists; PATCH it", err: err}
	}
	if err != nil {
		return et, typed(err)
	}
	s.record(ctx, p, "", actCreateEventType, "/v1/event-types")
	return et, nil
}

// ListEventTypes lists a page of the whole catalog (admin only).
func (s *Service) ListEventTypes(ctx context.Context, p principal, pg Page) (List[store.EventType], error) {
	if err := AdminOnly(p); err != nil {
		return List[store.EventType]{}, err
	}
	sp, err := pg.store()
	if err != nil {
		return List[store.EventType]{}, err
	}
	ets, err := s.store.ListEventTypes(ctx, sp)
	if err != nil {
		return List[store.EventType]{}, typed(err)
	}
	return listOf(sp, ets, func(e store.EventType) string { return e.Name }), nil
}

// GetEventType is the type name (admin only).
func (s *Service) GetEventType(ctx context.Context, p principal, name string) (store.EventType, error) {
	if err := AdminOnly(p); err != nil {
		return store.EventType{}, err
	}
	et, err := s.store.GetEventType(ctx, name)
	return et, typed(err)
}

// PatchEventType describes a type; it becomes the operator's, in every
// app's catalog (admin only).
func (s *Service) PatchEventType(ctx context.Context, p principal, name string, in EventTypeInput) (store.EventType, error) {
	if err := AdminOnly(p); err != nil {
		return store.EventType{}, err
	}
	if in.Name != nil {
		return store.EventType{}, invalidf("name", "name cannot be changed; create a new type")
	}
	if err := validSchema(in.Schema); err != nil {
		return store.EventType{}, err
	}
	et, err := s.store.UpdateEventType(ctx, name, in.Description, in.Schema, in.Deprecated)
	if err != nil {
		return et, typed(err)
	}
	s.record(ctx, p, "", actPatchEventType, "/v1/event-types/"+name)
	return et, nil
}

// ListAppEventTypes is the catalog as app appID's endpoints can subscribe
// to it: the operator's types and those its own events used, without the
// operational types unless it is the operations app.
func (s *Service) ListAppEventTypes(ctx context.Context, p principal, appID string, pg Page) (List[store.EventType], error) {
	sp, err := s.appPage(ctx, p, appID, pg)
	if err != nil {
		return List[store.EventType]{}, err
	}
	ets, err := s.store.ListAppEventTypes(ctx, appID, sp)
	if err != nil {
		return List[store.EventType]{}, typed(err)
	}
	return listOf(sp, ets, func(e store.EventType) string { return e.Name }), nil
}
