package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/metrics"
	"hookrelay/outbox"
	"hookrelay/store"
)

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
		if p := invalid(err); p != nil {
			return ev, p
		}
		return ev, &Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error()}
	}
	return ev, nil
}

// createEvent publishes an event: refused first by the cheapest checks
// (the key's ingest rate, then its app's backlog), then validated, its type
// admitted to the app's catalog, and published.
func (s *Server) createEvent(c *gin.Context) {
	if s.limited(c) || s.shed(c) {
		s.metrics.Ingested(metrics.IngestShed)
		return
	}
	body, ok := readBody(c)
	if !ok {
		s.metrics.Ingested(metrics.IngestInvalid)
		return
	}
	ev, p := decodeEvent(body, c.GetHeader("Idempotency-Key"))
	if p != nil {
		s.metrics.Ingested(metrics.IngestInvalid)
		problem(c, p.Status, p.Detail, p.Fields...)
		return
	}
	ctx, app := c.Request.Context(), c.Param("app")
	if err := s.types.admit(ctx, app, ev.Type); err != nil {
		if invalid(err) != nil {
			s.metrics.Ingested(metrics.IngestInvalid)
		}
		s.fail(c, err)
		return
	}
	pub, err := s.publisher.PublishNow(ctx, s.store.HotPool(), app, ev)
	if err != nil {
		if errors.Is(err, delivery.ErrConflict) {
			s.metrics.Ingested(metrics.IngestConflict)
		}
		s.fail(c, err)
		return
	}
	status := http.StatusAccepted
	outcome := metrics.IngestAccepted
	if pub.Duplicate {
		status, outcome = http.StatusOK, metrics.IngestRepeat
	} else {
		s.backlogs.added(app, len(pub.Deliveries))
	}
	s.metrics.Ingested(outcome)
	for _, f := range pub.FilteredOut {
		if f.Error != "" && !pub.Duplicate {
			s.metrics.FilterError(f.EndpointID)
		}
	}
	c.JSON(status, pub)
}

// limited answers 429 with Retry-After when an app key publishes past its
// ingest rate. Admin keys and portal sessions are not limited.
func (s *Server) limited(c *gin.Context) bool {
	p := principal(c)
	if p.Kind != access.KindKey || p.Role != access.RoleApp {
		return false
	}
	now := time.Now()
	next, ok := s.ingest.take(p.ID, now)
	if ok {
		return false
	}
	c.Header("Retry-After", retryAfter(next, now))
	problem(c, http.StatusTooManyRequests, fmt.Sprintf("this key publishes past its ingest rate (%g events/s, bursts of %g); retry after the Retry-After seconds", s.ingest.rate, s.ingest.burst))
	return true
}

// eventView is the API form of a stored event: its frozen envelope.
func eventView(e store.EventRecord) (outbox.Published, error) {
	var v outbox.Published
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		return v, fmt.Errorf("decode event %s: %w", e.ID, err)
	}
	if e.FilteredOut != nil {
		if err := json.Unmarshal(e.FilteredOut, &v.FilteredOut); err != nil {
			return v, fmt.Errorf("decode event %s: %w", e.ID, err)
		}
	}
	return v, nil
}

func (s *Server) listEvents(c *gin.Context) {
	p, since, until, ok := rangeQuery(c)
	if !ok {
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
	ds, err := s.store.ListDeliveries(ctx, c.Param("app"), store.DeliveryFilter{EventID: e.ID}, store.Page{Limit: MaxEventDeliveries})
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

// testEndpoint sends the endpoint a test event (outbox.TestType), whatever
// its event-type filter, and to no other endpoint: a delivery like any
// other, with attempts, retries and replays.
func (s *Server) testEndpoint(c *gin.Context) {
	if !s.endpointEnabled(c, c.Param("ep")) {
		return
	}
	data, err := json.Marshal(map[string]string{"message": "This is a test event from hookrelay.", "endpoint_id": c.Param("ep")})
	if err != nil {
		s.fail(c, err)
		return
	}
	pub, err := s.publisher.PublishNow(c.Request.Context(), s.store.Pool(), c.Param("app"), outbox.Event{Type: outbox.TestType, Data: data, Endpoint: c.Param("ep")})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, pub)
}
