package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/delivery"
	"hookrelay/internal/netguard"
	"hookrelay/outbox"
	"hookrelay/store"
	"hookrelay/workflows"
)

// maxBody bounds every request body; events are further bounded by
// outbox.MaxPayloadBytes.
const maxBody = outbox.MaxPayloadBytes + 16<<10

// readBody reads at most maxBody bytes of the request body.
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			problem(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes (event payload limit %d bytes)", maxBody, outbox.MaxPayloadBytes))
			return nil, false
		}
		problem(c, http.StatusBadRequest, "could not read request body")
		return nil, false
	}
	return body, true
}

// bind decodes a JSON body strictly into dst; it answers and returns false
// on any error, naming the field at fault.
func bind(c *gin.Context, dst any) bool {
	body, ok := readBody(c)
	if !ok {
		return false
	}
	if p := decodeStrict(body, dst); p != nil {
		problem(c, p.Status, p.Detail, p.Fields...)
		return false
	}
	return true
}

// decodeStrict decodes exactly one JSON value into dst, rejecting unknown
// fields, and names the field at fault.
func decodeStrict(body []byte, dst any) *Problem {
	bad := func(status int, detail string, fields ...string) *Problem {
		return &Problem{Status: status, Detail: detail, Fields: fields}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			return bad(http.StatusUnprocessableEntity, fmt.Sprintf("%s must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String())), typeErr.Field)
		case errors.As(err, &syntaxErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return bad(http.StatusBadRequest, "request body is not valid JSON")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return bad(http.StatusUnprocessableEntity, "unknown field "+f, f)
		case strings.Contains(err.Error(), "parsing time"):
			f := timeField(body, err)
			return bad(http.StatusUnprocessableEntity, f+" must be an RFC 3339 time", f)
		default:
			return bad(http.StatusUnprocessableEntity, err.Error())
		}
	}
	if dec.More() {
		return bad(http.StatusBadRequest, "request body has trailing data after the JSON value")
	}
	return nil
}

// timeField finds which top-level field held the time that failed to
// parse: encoding/json does not say.
func timeField(body []byte, err error) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		for k, v := range fields {
			var sv string
			if json.Unmarshal(v, &sv) == nil && strings.Contains(err.Error(), "parsing time "+strconv.Quote(sv)) {
				return k
			}
		}
	}
	return "time"
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	default:
		return "a number"
	}
}

// page reads ?limit=&cursor=.
func page(c *gin.Context) (store.Page, bool) {
	p := store.Page{Limit: 50, Cursor: c.Query("cursor")}
	if l := c.Query("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 250 {
			problem(c, http.StatusUnprocessableEntity, "limit must be an integer from 1 to 250", "limit")
			return p, false
		}
		p.Limit = n
	}
	return p, true
}

// list answers {"data": [...], "next_cursor": ...}.
func list[T any](c *gin.Context, p store.Page, items []T, id func(T) string) {
	var next *string
	if len(items) == p.Limit && len(items) > 0 {
		n := id(items[len(items)-1])
		next = &n
	}
	if items == nil {
		items = []T{}
	}
	c.JSON(http.StatusOK, gin.H{"data": items, "next_cursor": next})
}

func timeQuery(c *gin.Context, name string) (time.Time, bool) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		problem(c, http.StatusUnprocessableEntity, name+" must be an RFC 3339 time", name)
		return time.Time{}, false
	}
	return t, true
}

// ---- apps

type appRequest struct {
	Name *string `json:"name"`
}

func validName(c *gin.Context, name *string) bool {
	if name == nil || strings.TrimSpace(*name) == "" || len(*name) > 256 {
		problem(c, http.StatusUnprocessableEntity, "name is required (1–256 characters)", "name")
		return false
	}
	return true
}

func (s *Server) createApp(c *gin.Context) {
	var req appRequest
	if !bind(c, &req) || !validName(c, req.Name) {
		return
	}
	a, err := s.store.CreateApp(c.Request.Context(), *req.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, a)
}

func (s *Server) listApps(c *gin.Context) {
	p, ok := page(c)
	if !ok {
		return
	}
	apps, err := s.store.ListApps(c.Request.Context(), p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, apps, func(a store.App) string { return a.ID })
}

func (s *Server) getApp(c *gin.Context) {
	a, err := s.store.GetApp(c.Request.Context(), c.Param("app"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a)
}

func (s *Server) patchApp(c *gin.Context) {
	var req appRequest
	if !bind(c, &req) || !validName(c, req.Name) {
		return
	}
	a, err := s.store.RenameApp(c.Request.Context(), c.Param("app"), *req.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a)
}

// deleteApp deletes an app; its workflows are canceled through the outbox
// in the same transaction.
func (s *Server) deleteApp(c *gin.Context) {
	if err := s.store.DeleteApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// ---- event types

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

// ---- endpoints

type endpointRequest struct {
	URL            *string            `json:"url"`
	Description    *string            `json:"description"`
	EventTypes     *[]string          `json:"event_types"`
	Environment    *string            `json:"environment"`
	Disabled       *bool              `json:"disabled"`
	RetrySchedule  *[]string          `json:"retry_schedule"`
	Deadline       *string            `json:"deadline"`
	RequestTimeout *string            `json:"request_timeout"`
	Headers        *map[string]string `json:"headers"`
}

// EndpointView is the API form of an endpoint.
type EndpointView struct {
	ID             string            `json:"id"`
	URL            string            `json:"url"`
	Description    string            `json:"description"`
	EventTypes     []string          `json:"event_types"`
	Environment    string            `json:"environment"`
	Disabled       bool              `json:"disabled"`
	DisabledReason *string           `json:"disabled_reason"`
	RetrySchedule  []string          `json:"retry_schedule"`
	Deadline       string            `json:"deadline"`
	RequestTimeout string            `json:"request_timeout"`
	Headers        map[string]string `json:"headers"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	Secret         string            `json:"secret,omitempty"`
}

func viewEndpoint(e store.Endpoint) EndpointView {
	v := EndpointView{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: e.EventTypes, Environment: e.Environment,
		Disabled: e.Disabled, DisabledReason: e.DisabledReason, Deadline: e.Deadline.String(), RequestTimeout: e.RequestTimeout.String(),
		Headers: e.Headers, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	for _, d := range e.RetrySchedule {
		v.RetrySchedule = append(v.RetrySchedule, d.String())
	}
	if v.EventTypes == nil {
		v.EventTypes = []string{}
	}
	return v
}

// applyEndpoint validates req onto e, answering and returning false on the
// first field at fault.
func (s *Server) applyEndpoint(c *gin.Context, req endpointRequest, e *store.Endpoint) bool {
	bad := func(field, msg string) bool {
		problem(c, http.StatusUnprocessableEntity, field+": "+msg, field)
		return false
	}
	if req.URL != nil {
		if err := s.checkURL(*req.URL); err != nil {
			return bad("url", err.Error())
		}
		e.URL = *req.URL
	}
	if e.URL == "" {
		return bad("url", "is required")
	}
	if req.Description != nil {
		if len(*req.Description) > 1024 {
			return bad("description", "at most 1024 characters")
		}
		e.Description = *req.Description
	}
	if req.EventTypes != nil {
		for _, t := range *req.EventTypes {
			if outbox.ValidateType(t) != nil {
				return bad("event_types", fmt.Sprintf("%q is not a valid event type (resource.action)", t))
			}
		}
		e.EventTypes = *req.EventTypes
	}
	if req.Environment != nil {
		if *req.Environment != "live" && *req.Environment != "test" {
			return bad("environment", `must be "live" or "test"`)
		}
		e.Environment = *req.Environment
	}
	if req.Disabled != nil {
		e.Disabled = *req.Disabled
	}
	if req.RetrySchedule != nil {
		if len(*req.RetrySchedule) < 1 || len(*req.RetrySchedule) > 20 {
			return bad("retry_schedule", "must hold 1–20 durations")
		}
		e.RetrySchedule = nil
		for _, s := range *req.RetrySchedule {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 || d > 24*time.Hour {
				return bad("retry_schedule", fmt.Sprintf("%q must be a Go duration from 0s to 24h", s))
			}
			e.RetrySchedule = append(e.RetrySchedule, d)
		}
	}
	if req.Deadline != nil {
		d, err := time.ParseDuration(*req.Deadline)
		if err != nil || d < time.Second || d > 72*time.Hour {
			return bad("deadline", "must be a Go duration from 1s to 72h")
		}
		e.Deadline = d
	}
	if req.RequestTimeout != nil {
		d, err := time.ParseDuration(*req.RequestTimeout)
		if err != nil || d < 100*time.Millisecond || d > time.Minute {
			return bad("request_timeout", "must be a Go duration from 100ms to 1m")
		}
		e.RequestTimeout = d
	}
	if req.Headers != nil {
		for k := range *req.Headers {
			lk := strings.ToLower(k)
			if strings.HasPrefix(lk, "webhook-") || lk == "x-webhook-signature" || lk == "content-type" || lk == "user-agent" || lk == "host" || lk == "content-length" {
				return bad("headers", fmt.Sprintf("%q is set by hookrelay and cannot be overridden", k))
			}
		}
		e.Headers = *req.Headers
	}
	if e.RequestTimeout >= e.Deadline {
		return bad("request_timeout", "must be shorter than deadline")
	}
	return true
}

// checkURL enforces http(s), no credentials, ≤ 2 KiB and, outside dev
// mode, https and no literal private address (hostnames are checked again
// at dial time).
func (s *Server) checkURL(raw string) error {
	if len(raw) > 2048 {
		return errors.New("must be at most 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("must be an absolute http(s) URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !s.allowPrivate {
			return errors.New("must use https outside dev mode")
		}
	default:
		return fmt.Errorf("scheme %q is not allowed; use https", u.Scheme)
	}
	if u.User != nil {
		return errors.New("must not contain credentials")
	}
	if !s.allowPrivate {
		if err := netguard.CheckHost(u.Hostname()); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) createEndpoint(c *gin.Context) {
	var req endpointRequest
	if !bind(c, &req) {
		return
	}
	e := store.Endpoint{AppID: c.Param("app"), Environment: "live", EventTypes: []string{}, Headers: map[string]string{},
		RetrySchedule: delivery.DefaultSchedule(), Deadline: delivery.DeadlineDefault, RequestTimeout: delivery.RequestTimeoutDefault}
	if !s.applyEndpoint(c, req, &e) {
		return
	}
	out, secret, err := s.store.CreateEndpoint(c.Request.Context(), e)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := viewEndpoint(out)
	v.Secret = secret
	c.JSON(http.StatusCreated, v)
}

func (s *Server) listEndpoints(c *gin.Context) {
	p, ok := page(c)
	if !ok {
		return
	}
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	eps, err := s.store.ListEndpoints(c.Request.Context(), c.Param("app"), p)
	if err != nil {
		s.fail(c, err)
		return
	}
	views := make([]EndpointView, len(eps))
	for i, e := range eps {
		views[i] = viewEndpoint(e)
	}
	list(c, p, views, func(v EndpointView) string { return v.ID })
}

func (s *Server) getEndpoint(c *gin.Context) {
	e, err := s.store.GetEndpoint(c.Request.Context(), c.Param("app"), c.Param("ep"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, viewEndpoint(e))
}

// patchEndpoint validates the merged view of the endpoint, then writes
// only the fields the request gave. Disabling cancels its in-flight
// deliveries; a change of environment answers the new secret, once.
func (s *Server) patchEndpoint(c *gin.Context) {
	var req endpointRequest
	if !bind(c, &req) {
		return
	}
	e, err := s.store.GetEndpoint(c.Request.Context(), c.Param("app"), c.Param("ep"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.applyEndpoint(c, req, &e) {
		return
	}
	p := store.EndpointPatch{URL: req.URL, Description: req.Description, EventTypes: req.EventTypes, Environment: req.Environment,
		Disabled: req.Disabled, Headers: req.Headers}
	if req.RetrySchedule != nil {
		p.RetrySchedule = &e.RetrySchedule
	}
	if req.Deadline != nil {
		p.Deadline = &e.Deadline
	}
	if req.RequestTimeout != nil {
		p.RequestTimeout = &e.RequestTimeout
	}
	out, secret, err := s.store.PatchEndpoint(c.Request.Context(), e.AppID, e.ID, p)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := viewEndpoint(out)
	v.Secret = secret
	c.JSON(http.StatusOK, v)
}

// deleteEndpoint soft-deletes an endpoint; its workflows are canceled
// through the outbox in the same transaction.
func (s *Server) deleteEndpoint(c *gin.Context) {
	if err := s.store.DeleteEndpoint(c.Request.Context(), c.Param("app"), c.Param("ep")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

type rotateRequest struct {
	GracePeriod *string `json:"grace_period"`
}

func (s *Server) rotateSecret(c *gin.Context) {
	var req rotateRequest
	if c.Request.ContentLength != 0 && !bind(c, &req) {
		return
	}
	grace := 24 * time.Hour
	if req.GracePeriod != nil {
		d, err := time.ParseDuration(*req.GracePeriod)
		if err != nil || d < 0 || d > 7*24*time.Hour {
			problem(c, http.StatusUnprocessableEntity, "grace_period must be a Go duration from 0s to 168h", "grace_period")
			return
		}
		grace = d
	}
	secret, until, err := s.store.RotateSecret(c.Request.Context(), c.Param("app"), c.Param("ep"), grace)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"secret": secret, "previous_valid_until": until})
}

func (s *Server) revokePrevious(c *gin.Context) {
	n, err := s.store.RevokePrevious(c.Request.Context(), c.Param("app"), c.Param("ep"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"revoked": n})
}

// ---- events

type eventRequest struct {
	ID         *string         `json:"id"`
	Type       *string         `json:"type"`
	Data       json.RawMessage `json:"data"`
	Created    *time.Time      `json:"created"`
	APIVersion *string         `json:"api_version"`
}

// decodeEvent turns an ingest body (and Idempotency-Key header) into a
// validated event, or the problem to answer.
func decodeEvent(body []byte, idempotencyKey string) (outbox.Event, *Problem) {
	var req eventRequest
	if p := decodeStrict(body, &req); p != nil {
		return outbox.Event{}, p
	}
	ev := outbox.Event{ID: deref(req.ID), Type: deref(req.Type), Data: req.Data, APIVersion: deref(req.APIVersion)}
	if idempotencyKey != "" {
		if ev.ID != "" && ev.ID != idempotencyKey {
			return ev, &Problem{Status: http.StatusUnprocessableEntity, Detail: "id and the Idempotency-Key header disagree", Fields: []string{"id"}}
		}
		ev.ID = idempotencyKey
	}
	if req.Created != nil {
		ev.Created = *req.Created
	}
	if err := ev.Validate(time.Now()); err != nil {
		var fe *outbox.FieldError
		if !errors.As(err, &fe) {
			return ev, &Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error()}
		}
		status := http.StatusUnprocessableEntity
		if strings.Contains(fe.Reason, "exceeds") {
			status = http.StatusRequestEntityTooLarge
		}
		return ev, &Problem{Status: status, Detail: err.Error(), Fields: []string{fe.Field}}
	}
	return ev, nil
}

func (s *Server) createEvent(c *gin.Context) {
	if s.shed(c) {
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	ev, p := decodeEvent(body, c.GetHeader("Idempotency-Key"))
	if p != nil {
		problem(c, p.Status, p.Detail, p.Fields...)
		return
	}
	pub, err := outbox.PublishNow(c.Request.Context(), s.store.Pool(), c.Param("app"), ev)
	if err != nil {
		s.fail(c, err)
		return
	}
	status := http.StatusAccepted
	if pub.Duplicate {
		status = http.StatusOK
	}
	c.JSON(status, pub)
}

// eventView is the API form of a stored event: its frozen envelope.
func eventView(e store.EventRecord) (outbox.Published, error) {
	var v outbox.Published
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		return v, fmt.Errorf("decode event %s: %w", e.ID, err)
	}
	return v, nil
}

func (s *Server) listEvents(c *gin.Context) {
	p, ok := page(c)
	if !ok {
		return
	}
	since, ok1 := timeQuery(c, "since")
	until, ok2 := timeQuery(c, "until")
	if !ok1 || !ok2 {
		return
	}
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	evs, err := s.store.ListEvents(c.Request.Context(), c.Param("app"), c.Query("type"), since, until, p)
	if err != nil {
		s.fail(c, err)
		return
	}
	views := make([]outbox.Published, 0, len(evs))
	for _, e := range evs {
		v, err := eventView(e)
		if err != nil {
			s.fail(c, err)
			return
		}
		views = append(views, v)
	}
	list(c, p, views, func(v outbox.Published) string { return v.ID })
}

func (s *Server) getEvent(c *gin.Context) {
	ctx := c.Request.Context()
	e, err := s.store.GetEvent(ctx, c.Param("app"), c.Param("evt"))
	if err != nil {
		s.fail(c, err)
		return
	}
	v, err := eventView(e)
	if err != nil {
		s.fail(c, err)
		return
	}
	ds, err := s.store.ListDeliveries(ctx, c.Param("app"), store.DeliveryFilter{EventID: e.ID}, store.Page{Limit: 1000})
	if err != nil {
		s.fail(c, err)
		return
	}
	v.Deliveries = make([]outbox.DeliveryRef, len(ds))
	for i, d := range ds {
		v.Deliveries[i] = outbox.DeliveryRef{ID: d.ID, EndpointID: d.EndpointID, Status: d.Status}
	}
	c.JSON(http.StatusOK, v)
}

// ---- deliveries

func (s *Server) listDeliveries(c *gin.Context) {
	p, ok := page(c)
	if !ok {
		return
	}
	since, ok1 := timeQuery(c, "since")
	until, ok2 := timeQuery(c, "until")
	if !ok1 || !ok2 {
		return
	}
	f := store.DeliveryFilter{Status: c.Query("status"), EndpointID: c.Query("endpoint_id"), EventID: c.Query("event_id"), Since: since, Until: until}
	switch f.Status {
	case "", store.StatusPending, store.StatusDelivering, store.StatusSucceeded, store.StatusDeadLettered, store.StatusCanceled:
	default:
		problem(c, http.StatusUnprocessableEntity, "status must be pending, delivering, succeeded, dead_lettered or canceled", "status")
		return
	}
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	ds, err := s.store.ListDeliveries(c.Request.Context(), c.Param("app"), f, p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, ds, func(d store.Delivery) string { return d.ID })
}

func (s *Server) getDelivery(c *gin.Context) {
	ctx := c.Request.Context()
	d, err := s.store.GetDelivery(ctx, c.Param("app"), c.Param("dlv"))
	if err != nil {
		s.fail(c, err)
		return
	}
	// When is the next attempt: Postgres has it from the last attempt's
	// record; a running workflow refines it when it answers in time.
	if s.temporal != nil && delivery.Status(d.Status).InFlight() {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if v, err := s.temporal.QueryWorkflow(qctx, d.ID, "", workflows.QueryState); err == nil {
			var st workflows.State
			if v.Get(&st) == nil {
				d.NextAttemptAt = st.NextAttemptAt
			}
		}
	}
	c.JSON(http.StatusOK, d)
}

func (s *Server) listAttempts(c *gin.Context) {
	ctx := c.Request.Context()
	if _, err := s.store.GetDelivery(ctx, c.Param("app"), c.Param("dlv")); err != nil {
		s.fail(c, err)
		return
	}
	atts, err := s.store.ListAttempts(ctx, c.Param("app"), c.Param("dlv"), 0)
	if err != nil {
		s.fail(c, err)
		return
	}
	if atts == nil {
		atts = []store.Attempt{}
	}
	c.JSON(http.StatusOK, gin.H{"data": atts})
}

func (s *Server) replayDelivery(c *gin.Context) {
	ctx := c.Request.Context()
	d, err := s.store.GetDelivery(ctx, c.Param("app"), c.Param("dlv"))
	if err != nil {
		s.fail(c, err)
		return
	}
	queued, err := s.store.RequestReplay(ctx, c.Param("app"), []string{d.ID}, c.GetString("key_id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if len(queued) == 0 {
		if !s.endpointEnabled(c, d.EndpointID) {
			return
		}
		problem(c, http.StatusConflict, fmt.Sprintf("delivery %s is %s; only finished (succeeded, dead-lettered or canceled) deliveries can be replayed", d.ID, d.Status), "status")
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"replayed": 1})
}

// endpointEnabled answers 409 (or 404) and reports false unless the
// endpoint exists and is enabled: a dead letter of a disabled endpoint
// stays a dead letter until the endpoint is enabled again.
// An endpoint named by the path and not found is a 404.
func (s *Server) endpointEnabled(c *gin.Context, endpointID string) bool {
	e, err := s.store.GetEndpoint(c.Request.Context(), c.Param("app"), endpointID)
	switch {
	case errors.Is(err, store.ErrNotFound) && c.Param("ep") == "":
		problem(c, http.StatusConflict, fmt.Sprintf("endpoint %s was deleted; its deliveries cannot be replayed", endpointID), "endpoint_id")
		return false
	case err != nil:
		s.fail(c, err)
		return false
	case e.Disabled:
		problem(c, http.StatusConflict, fmt.Sprintf("endpoint %s is disabled; enable it to replay its deliveries", endpointID), "endpoint_id")
		return false
	}
	return true
}

type rangeRequest struct {
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
}

func (s *Server) replayEndpoint(c *gin.Context) {
	var req rangeRequest
	if !bind(c, &req) {
		return
	}
	if req.Since == nil {
		problem(c, http.StatusUnprocessableEntity, "since is required (RFC 3339)", "since")
		return
	}
	until := time.Now()
	if req.Until != nil {
		until = *req.Until
	}
	if !until.After(*req.Since) {
		problem(c, http.StatusUnprocessableEntity, "until must be after since", "until")
		return
	}
	ctx := c.Request.Context()
	if _, err := s.store.GetEndpoint(ctx, c.Param("app"), c.Param("ep")); err != nil {
		s.fail(c, err)
		return
	}
	if !s.endpointEnabled(c, c.Param("ep")) {
		return
	}
	dead, err := s.store.DeadLettered(ctx, c.Param("app"), c.Param("ep"), *req.Since, until)
	if err != nil {
		s.fail(c, err)
		return
	}
	queued, err := s.store.RequestReplay(ctx, c.Param("app"), dead, c.GetString("key_id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"replayed": len(queued)})
}

func (s *Server) stats(c *gin.Context) {
	n := 1000
	if v := c.Query("last"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 100000 {
			problem(c, http.StatusUnprocessableEntity, "last must be an integer from 1 to 100000", "last")
			return
		}
	}
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	st, err := s.store.Stats(c.Request.Context(), c.Param("app"), n)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}
