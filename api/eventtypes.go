package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"

	"hookrelay/outbox"
	"hookrelay/store"
)

// MaxAppEventTypesDefault bounds the event types an app's own events may
// add to its catalog.
const MaxAppEventTypesDefault = 1000

// maxKnownTypes bounds typeBound's memory of known types; past it, it
// starts over.
const maxKnownTypes = 100000

// typeBound adds an event's type to its app's catalog before the event is
// published, within the app's bound, remembering which (app, type) pairs
// are known so that the usual event costs no query: a type, once in an
// app's catalog, stays there.
type typeBound struct {
	st    *store.Store
	limit int
	mu    sync.Mutex
	known map[[2]string]struct{}
}

func newTypeBound(st *store.Store, limit int) *typeBound {
	return &typeBound{st: st, limit: limit, known: map[[2]string]struct{}{}}
}

// admit makes typ part of app's catalog, or answers why not (an
// *store.EventTypeLimitError past the bound).
func (b *typeBound) admit(ctx context.Context, appID, typ string) error {
	key := [2]string{appID, typ}
	b.mu.Lock()
	_, ok := b.known[key]
	b.mu.Unlock()
	if ok {
		return nil
	}
	if err := b.st.AddAppEventType(ctx, appID, typ, b.limit); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.known) >= maxKnownTypes {
		b.known = map[[2]string]struct{}{}
	}
	b.known[key] = struct{}{}
	return nil
}

type eventTypeRequest struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Deprecated  *bool           `json:"deprecated"`
}

func validSchema(c *gin.Context, schema json.RawMessage) bool {
	if len(schema) > 0 && (!json.Valid(schema) || bytes.TrimSpace(schema)[0] != '{') {
		problem(c, http.StatusUnprocessableEntity, "schema must be a JSON object (a JSON Schema)", "schema")
		return false
	}
	return true
}

func (s *Server) createEventType(c *gin.Context) {
	var req eventTypeRequest
	if !bind(c, &req) {
		return
	}
	if err := outbox.ValidateType(deref(req.Name)); err != nil {
		problem(c, http.StatusUnprocessableEntity, "name: "+err.Error(), "name")
		return
	}
	if !validSchema(c, req.Schema) {
		return
	}
	et, err := s.store.CreateEventType(c.Request.Context(), store.EventType{Name: *req.Name, Description: deref(req.Description),
		Schema: req.Schema, Deprecated: deref(req.Deprecated)})
	if errors.Is(err, store.ErrConflict) {
		problem(c, http.StatusConflict, "event type "+*req.Name+" exists; PATCH it", "name")
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, et)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (s *Server) listEventTypes(c *gin.Context) {
	p, ok := page(c)
	if !ok {
		return
	}
	ets, err := s.store.ListEventTypes(c.Request.Context(), p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, ets, func(e store.EventType) string { return e.Name })
}

func (s *Server) getEventType(c *gin.Context) {
	et, err := s.store.GetEventType(c.Request.Context(), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, et)
}

// patchEventType describes a type; it becomes the operator's, in every
// app's catalog.
func (s *Server) patchEventType(c *gin.Context) {
	var req eventTypeRequest
	if !bind(c, &req) {
		return
	}
	if req.Name != nil {
		problem(c, http.StatusUnprocessableEntity, "name cannot be changed; create a new type", "name")
		return
	}
	if !validSchema(c, req.Schema) {
		return
	}
	et, err := s.store.UpdateEventType(c.Request.Context(), c.Param("name"), req.Description, req.Schema, req.Deprecated)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, et)
}
