package api

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/net/http/httpguts"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/internal/egress"
	"hookrelay/internal/netguard"
	"hookrelay/outbox"
	"hookrelay/signing"
	"hookrelay/store"
)

type endpointRequest struct {
	URL            *string            `json:"url"`
	Description    *string            `json:"description"`
	EventTypes     *[]string          `json:"event_types"`
	Environment    *string            `json:"environment"`
	Disabled       *bool              `json:"disabled"`
	Paused         *bool              `json:"paused"`
	RateLimit      *int               `json:"rate_limit"`
	MaxInFlight    *int               `json:"max_in_flight"`
	RetrySchedule  *[]string          `json:"retry_schedule"`
	Deadline       *string            `json:"deadline"`
	RequestTimeout *string            `json:"request_timeout"`
	Headers        *map[string]string `json:"headers"`
	// Filter is a CEL expression (docs/contract.md#13-payload-filters);
	// "" delivers every subscribed event.
	Filter *string `json:"filter"`
	// SignatureScheme is "hmac-sha256" (the default) or "ed25519", fixed at
	// creation.
	SignatureScheme *string `json:"signature_scheme"`
	// EgressProxy overrides the deployment's --egress-proxy: "direct", a
	// proxy URL without credentials, or "" for the deployment's. Admin key
	// only: an app key giving it gets 403 naming the field.
	EgressProxy *string `json:"egress_proxy"`
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
	Paused         bool              `json:"paused"`
	RateLimit      *int              `json:"rate_limit"`
	MaxInFlight    *int              `json:"max_in_flight"`
	RetrySchedule  []string          `json:"retry_schedule"`
	Deadline       string            `json:"deadline"`
	RequestTimeout string            `json:"request_timeout"`
	Headers        map[string]string `json:"headers"`
	Filter         string            `json:"filter"`
	// SignatureScheme is "hmac-sha256" or "ed25519"; PublicKey the current
	// Ed25519 key's "whpk_…", which receivers verify v1a signatures with.
	SignatureScheme string `json:"signature_scheme"`
	PublicKey       string `json:"public_key,omitempty"`
	// EgressProxy is the operator's override of the egress proxy, absent
	// when the endpoint follows the deployment's.
	EgressProxy string    `json:"egress_proxy,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Secret is an HMAC endpoint's "whsec_…", in the response that made it
	// only.
	Secret string `json:"secret,omitempty"`
}

func viewEndpoint(e store.Endpoint) EndpointView {
	v := EndpointView{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: e.EventTypes, Environment: e.Environment,
		Disabled: e.Disabled, DisabledReason: e.DisabledReason, Paused: e.Paused, RateLimit: nonZero(e.RateLimit), MaxInFlight: nonZero(e.MaxInFlight), Deadline: e.Deadline.String(), RequestTimeout: e.RequestTimeout.String(),
		Headers: e.Headers, Filter: e.Filter, SignatureScheme: e.SignatureScheme, PublicKey: e.PublicKey, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
		EgressProxy: e.EgressProxy}
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
		if len(*req.Description) > MaxDescriptionLength {
			return bad("description", fmt.Sprintf("at most %d characters", MaxDescriptionLength))
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
	if req.Paused != nil {
		e.Paused = *req.Paused
	}
	if req.RateLimit != nil {
		if *req.RateLimit < 0 || *req.RateLimit > MaxRateLimit {
			return bad("rate_limit", fmt.Sprintf("must be deliveries per second from 1 to %d, or 0 for none", MaxRateLimit))
		}
		e.RateLimit = *req.RateLimit
	}
	if req.MaxInFlight != nil {
		if *req.MaxInFlight < 0 || *req.MaxInFlight > MaxMaxInFlight {
			return bad("max_in_flight", fmt.Sprintf("must be concurrent requests from 1 to %d, or 0 for none", MaxMaxInFlight))
		}
		e.MaxInFlight = *req.MaxInFlight
	}
	if req.RetrySchedule != nil {
		e.RetrySchedule = []time.Duration{}
		for _, s := range *req.RetrySchedule {
			d, err := time.ParseDuration(s)
			if err != nil {
				return bad("retry_schedule", fmt.Sprintf("%q is not a Go duration", s))
			}
			e.RetrySchedule = append(e.RetrySchedule, d)
		}
	}
	for _, f := range []struct {
		name string
		in   *string
		out  *time.Duration
	}{{"deadline", req.Deadline, &e.Deadline}, {"request_timeout", req.RequestTimeout, &e.RequestTimeout}} {
		if f.in == nil {
			continue
		}
		d, err := time.ParseDuration(*f.in)
		if err != nil {
			return bad(f.name, fmt.Sprintf("%q is not a Go duration", *f.in))
		}
		*f.out = d
	}
	if req.Headers != nil {
		if field, msg := checkHeaders(*req.Headers); field != "" {
			return bad(field, msg)
		}
		e.Headers = *req.Headers
	}
	if req.Filter != nil {
		if msg := s.checkFilter(*req.Filter); msg != "" {
			return bad("filter", msg)
		}
		e.Filter = *req.Filter
	}
	if req.EgressProxy != nil {
		if principal(c).Role != access.RoleAdmin {
			problem(c, http.StatusForbidden, "egress_proxy: only the admin key may set an endpoint's egress proxy", "egress_proxy")
			return false
		}
		if v := *req.EgressProxy; v != "" && v != egress.Direct {
			if p, err := egress.Parse(v, "", ""); err != nil || p.User != "" || len(v) > MaxURLLength {
				return bad("egress_proxy", `must be "direct", an http:// or https:// proxy URL without credentials, or "" for the deployment's proxy`)
			}
		}
		e.EgressProxy = *req.EgressProxy
	}
	set := delivery.Settings{Schedule: e.RetrySchedule, Deadline: e.Deadline, RequestTimeout: e.RequestTimeout}
	if err := set.Validate(); err != nil {
		var fe *delivery.FieldError
		errors.As(err, &fe)
		return bad(fe.Field, fe.Reason)
	}
	return true
}

// checkHeaders finds the first custom header (by name) that cannot be
// sent as given, and returns the field at fault and why ("" when every
// header can be sent): a header hookrelay sets itself ("headers"), or a
// name that is not an HTTP token or a value that is not a valid field value
// (RFC 9110: no control characters but tab), "headers.<name>". Such a
// header would otherwise fail every attempt before it reached the
// receiver.
func checkHeaders(h map[string]string) (field, msg string) {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		switch {
		case delivery.ReservedHeader(k):
			return "headers", fmt.Sprintf("%q is set by hookrelay and cannot be overridden", k)
		case !httpguts.ValidHeaderFieldName(k):
			return "headers." + k, fmt.Sprintf("%q is not a valid HTTP header name", k)
		case !httpguts.ValidHeaderFieldValue(h[k]):
			return "headers." + k, fmt.Sprintf("the value of %q is not a valid HTTP header value (no control characters such as CR or LF)", k)
		}
	}
	return "", ""
}

// checkURL enforces http(s), no credentials, ≤ 2 KiB and, outside dev
// mode, https and no literal private address (hostnames are checked again
// at dial time).
func (s *Server) checkURL(raw string) error {
	if len(raw) > MaxURLLength {
		return fmt.Errorf("must be at most %d bytes", MaxURLLength)
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
	if req.SignatureScheme != nil {
		if *req.SignatureScheme != signing.SchemeHMAC && *req.SignatureScheme != signing.SchemeEd25519 {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("signature_scheme must be %q or %q", signing.SchemeHMAC, signing.SchemeEd25519), "signature_scheme")
			return
		}
		e.SignatureScheme = *req.SignatureScheme
	}
	out, secret, err := s.store.CreateEndpoint(c.Request.Context(), e)
	s.answerEndpoint(c, http.StatusCreated, out, secret, err)
}

// nonZero is n, or nil for 0 (shown as null).
func nonZero(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// answerEndpoint answers a written endpoint, with its new secret (shown
// this once) when it has one.
func (s *Server) answerEndpoint(c *gin.Context, status int, e store.Endpoint, secret string, err error) {
	if err != nil {
		s.fail(c, err)
		return
	}
	v := viewEndpoint(e)
	v.Secret = secret
	c.JSON(status, v)
}

func (s *Server) listEndpoints(c *gin.Context) {
	p, ok := s.appPage(c)
	if !ok {
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
	if req.SignatureScheme != nil {
		problem(c, http.StatusUnprocessableEntity, "signature_scheme is fixed at creation; create a new endpoint to change it", "signature_scheme")
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
		Disabled: req.Disabled, Paused: req.Paused, RateLimit: req.RateLimit, MaxInFlight: req.MaxInFlight, Headers: req.Headers, Filter: req.Filter,
		EgressProxy: req.EgressProxy}
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
	s.answerEndpoint(c, http.StatusOK, out, secret, err)
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
	grace := delivery.RotationGraceDefault
	if req.GracePeriod != nil {
		d, err := time.ParseDuration(*req.GracePeriod)
		if err != nil || d < 0 || d > delivery.MaxRotationGrace {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("grace_period must be a Go duration from 0s to %s", delivery.MaxRotationGrace), "grace_period")
			return
		}
		grace = d
	}
	r, err := s.store.RotateSecret(c.Request.Context(), c.Param("app"), c.Param("ep"), grace)
	if err != nil {
		s.fail(c, err)
		return
	}
	if r.PublicKey != "" {
		c.JSON(http.StatusOK, gin.H{"public_key": r.PublicKey, "previous_valid_until": r.PreviousValidUntil})
		return
	}
	c.JSON(http.StatusOK, gin.H{"secret": r.Secret, "previous_valid_until": r.PreviousValidUntil})
}

func (s *Server) revokePrevious(c *gin.Context) {
	n, err := s.store.RevokePrevious(c.Request.Context(), c.Param("app"), c.Param("ep"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"revoked": n})
}
