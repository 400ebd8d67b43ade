package api

import (
	"context"
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
	"hookrelay/service"
)

type eventRequest struct {
	ID         *string         `json:"id"`
	Type       *string         `json:"type"`
	Data       json.RawMessage `json:"data"`
	Created    *time.Time      `json:"created"`
	APIVersion *string         `json:"api_version"`
	// OrderingKey places the event in a sequence on fifo endpoints.
	OrderingKey *string `json:"ordering_key"`
}

// decodeEvent turns an ingest body (and Idempotency-Key header) into a
// validated event, or the problem to answer.
func decodeEvent(body []byte, idempotencyKey string) (outbox.Event, *Problem) {
	var req eventRequest
	if p := decodeStrict(body, &req); p != nil {
		return outbox.Event{}, p
	}
	ev := outbox.Event{ID: deref(req.ID), Type: deref(req.Type), Data: req.Data, APIVersion: deref(req.APIVersion), OrderingKey: deref(req.OrderingKey)}
	if req.OrderingKey != nil && *req.OrderingKey == "" {
		return ev, &Problem{Status: http.StatusUnprocessableEntity, Detail: fmt.Sprintf("ordering_key must be 1–%d characters of [A-Za-z0-9_:.-], or absent", outbox.MaxOrderingKeyLength), Fields: []string{"ordering_key"}}
	}
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
	var pub outbox.Published
	end := s.traceIngest(c)
	defer func() { end(&pub) }()
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
	if s.shedKey(c, app, ev.OrderingKey) {
		s.metrics.Ingested(metrics.IngestShed)
		return
	}
	var err error
	if err := s.types.admit(ctx, app, ev.Type); err != nil {
		if invalid(err) != nil {
			s.metrics.Ingested(metrics.IngestInvalid)
		}
		s.fail(c, err)
		return
	}
	pub, err = s.publish(ctx, app, ev)
	if err != nil {
		if errors.Is(err, delivery.ErrConflict) {
			s.metrics.Ingested(metrics.IngestConflict)
		}
		s.fail(c, err)
		return
	}
	if len(pub.Leased) > 0 {
		s.taker.Take(pub.Leased)
	}
	if at, ok := pub.WakeAt(); ok && s.dispatcher != nil {
		s.dispatcher.Wake(at)
	}
	status := http.StatusAccepted
	outcome := metrics.IngestAccepted
	if pub.Duplicate {
		status, outcome = http.StatusOK, metrics.IngestRepeat
	} else {
		s.backlogs.added(app, len(pub.Deliveries)-pub.Ordered)
	}
	s.metrics.Ingested(outcome)
	c.JSON(status, pub)
}

// publish publishes ev for app in a statement of its own, leasing the rows
// due at once to this process's sender when it takes them (see Taker).
// Such a publish is not canceled with the request: a statement that
// committed as its client went away is still followed by Take, or its rows
// would wait for their leases to lapse.
func (s *Server) publish(ctx context.Context, app string, ev outbox.Event) (outbox.Published, error) {
	if s.taker != nil {
		if h, ok := s.taker.Handoff(app); ok {
			return s.publisher.PublishHandoff(context.WithoutCancel(ctx), s.store.HotPool(), app, ev, h)
		}
	}
	return s.publisher.PublishNow(ctx, s.store.HotPool(), app, ev)
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

func (s *Server) listEvents(c *gin.Context) {
	since, until, ok := rangeQuery(c)
	if !ok {
		return
	}
	l, err := s.svc.ListEvents(c.Request.Context(), principal(c), c.Param("app"), service.EventQuery{Type: c.Query("type"), Since: since, Until: until}, pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) getEvent(c *gin.Context) {
	ev, err := s.svc.GetEvent(c.Request.Context(), principal(c), c.Param("app"), c.Param("evt"))
	s.answer(c, http.StatusOK, ev, err)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
