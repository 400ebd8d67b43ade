package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/outbox"
	"hookrelay/store"
)

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
