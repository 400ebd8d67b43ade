package service

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/internal/netguard"
	"hookrelay/outbox"
	"hookrelay/signing"
	"hookrelay/store"
)

// EndpointInput is an endpoint's fields as a call gives them: nil keeps
// the field (its default on creation).
type EndpointInput struct {
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
	// only: an app key giving it gets a ForbiddenError naming the field.
	EgressProxy *string `json:"egress_proxy"`
	// Ordering is "none" (the default) or "fifo"
	// (docs/contract.md#14-ordered-delivery).
	Ordering *string `json:"ordering"`
	// FIFOOnDeadLetter is "skip" (the default) or "block": what a fifo
	// sequence does when its head dead-letters.
	FIFOOnDeadLetter *string `json:"fifo_on_dead_letter"`
	// TraceContext is what trace context the receiver is sent while
	// tracing is on: "linked", "fresh" or "off"; "" follows the
	// deployment's --receiver-traces.
	TraceContext *string `json:"trace_context"`
}

// Endpoint is an endpoint as callers see it.
type Endpoint struct {
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
	EgressProxy string `json:"egress_proxy,omitempty"`
	// Ordering is "none" or "fifo".
	Ordering string `json:"ordering"`
	// FIFOOnDeadLetter is "skip" or "block".
	FIFOOnDeadLetter string `json:"fifo_on_dead_letter"`
	// TraceContext is the endpoint's choice of trace context, absent when
	// it follows the deployment's.
	TraceContext string    `json:"trace_context,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Secret is an HMAC endpoint's "whsec_…", in the result that made it
	// only.
	Secret string `json:"secret,omitempty"`
}

func viewEndpoint(e store.Endpoint) Endpoint {
	v := Endpoint{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: e.EventTypes, Environment: e.Environment,
		Disabled: e.Disabled, DisabledReason: e.DisabledReason, Paused: e.Paused, RateLimit: nonZero(e.RateLimit), MaxInFlight: nonZero(e.MaxInFlight), Deadline: e.Deadline.String(), RequestTimeout: e.RequestTimeout.String(),
		Headers: e.Headers, Filter: e.Filter, SignatureScheme: e.SignatureScheme, PublicKey: e.PublicKey, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
		EgressProxy: e.EgressProxy, Ordering: string(e.Ordering), FIFOOnDeadLetter: string(e.FIFOOnDeadLetter), TraceContext: e.TraceContext}
	if v.Ordering == "" {
		v.Ordering = string(delivery.OrderingNone)
	}
	if v.FIFOOnDeadLetter == "" {
		v.FIFOOnDeadLetter = string(delivery.DeadLetterSkip)
	}
	for _, d := range e.RetrySchedule {
		v.RetrySchedule = append(v.RetrySchedule, d.String())
	}
	if v.EventTypes == nil {
		v.EventTypes = []string{}
	}
	return v
}

// nonZero is n, or nil for 0 (shown as null).
func nonZero(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// Audited endpoint calls.
var (
	actCreateEndpoint = action{"POST", "/v1/apps/:app/endpoints", 201}
	actPatchEndpoint  = action{"PATCH", "/v1/apps/:app/endpoints/:ep", 200}
	actDeleteEndpoint = action{"DELETE", "/v1/apps/:app/endpoints/:ep", 204}
	actRotate         = action{"POST", "/v1/apps/:app/endpoints/:ep/secret/rotate", 200}
	actRevokePrevious = action{"POST", "/v1/apps/:app/endpoints/:ep/secret/revoke-previous", 200}
	actTestEndpoint   = action{"POST", "/v1/apps/:app/endpoints/:ep/test", 202}
)

func endpointPath(appID, id string) string { return "/v1/apps/" + appID + "/endpoints/" + id }

// CreateEndpoint validates in and creates an endpoint of app appID with
// it; the result carries its new secret, shown this once. A session
// limited to some endpoints may not create one (it would lie outside its
// limit).
func (s *Service) CreateEndpoint(ctx context.Context, p principal, appID string, in EndpointInput) (Endpoint, error) {
	if err := can(p, appID, access.CapManageEndpoints); err != nil {
		return Endpoint{}, err
	}
	if p.Limited() {
		return Endpoint{}, &ForbiddenError{Detail: MsgNotAllowed}
	}
	e := store.Endpoint{AppID: appID, Environment: "live", EventTypes: []string{}, Headers: map[string]string{},
		RetrySchedule: delivery.DefaultSchedule(), Deadline: delivery.DeadlineDefault, RequestTimeout: delivery.RequestTimeoutDefault}
	if err := s.applyEndpoint(p, in, &e); err != nil {
		return Endpoint{}, err
	}
	if in.SignatureScheme != nil {
		if *in.SignatureScheme != signing.SchemeHMAC && *in.SignatureScheme != signing.SchemeEd25519 {
			return Endpoint{}, invalidf("signature_scheme", "signature_scheme must be %q or %q", signing.SchemeHMAC, signing.SchemeEd25519)
		}
		e.SignatureScheme = *in.SignatureScheme
	}
	out, secret, err := s.store.CreateEndpoint(ctx, e)
	if err != nil {
		return Endpoint{}, typed(err)
	}
	s.record(ctx, p, appID, actCreateEndpoint, "/v1/apps/"+appID+"/endpoints")
	v := viewEndpoint(out)
	v.Secret = secret
	return v, nil
}

// ListEndpoints lists a page of app appID's endpoints (only those a
// limited session sees).
func (s *Service) ListEndpoints(ctx context.Context, p principal, appID string, pg Page) (List[Endpoint], error) {
	sp, err := s.appPage(ctx, p, appID, pg)
	if err != nil {
		return List[Endpoint]{}, err
	}
	eps, err := s.store.ListEndpoints(ctx, appID, sp)
	if err != nil {
		return List[Endpoint]{}, typed(err)
	}
	views := make([]Endpoint, 0, len(eps))
	for _, e := range eps {
		views = append(views, viewEndpoint(e))
	}
	out := listOf(sp, views, func(v Endpoint) string { return v.ID })
	if p.Limited() {
		seen := out.Data[:0]
		for _, v := range out.Data {
			if p.SeesEndpoint(v.ID) {
				seen = append(seen, v)
			}
		}
		out.Data = seen
	}
	return out, nil
}

// GetEndpoint is endpoint id of app appID.
func (s *Service) GetEndpoint(ctx context.Context, p principal, appID, id string) (Endpoint, error) {
	if err := sees(p, appID, id); err != nil {
		return Endpoint{}, err
	}
	e, err := s.store.GetEndpoint(ctx, appID, id)
	if err != nil {
		return Endpoint{}, typed(err)
	}
	return viewEndpoint(e), nil
}

// PatchEndpoint validates the merged endpoint, then writes only the
// fields in gives. Disabling cancels its in-flight deliveries; a change of
// environment returns the new secret, once.
func (s *Service) PatchEndpoint(ctx context.Context, p principal, appID, id string, in EndpointInput) (Endpoint, error) {
	if err := s.manages(p, appID, id); err != nil {
		return Endpoint{}, err
	}
	if in.SignatureScheme != nil {
		return Endpoint{}, invalidf("signature_scheme", "signature_scheme is fixed at creation; create a new endpoint to change it")
	}
	e, err := s.store.GetEndpoint(ctx, appID, id)
	if err != nil {
		return Endpoint{}, typed(err)
	}
	if err := s.applyEndpoint(p, in, &e); err != nil {
		return Endpoint{}, err
	}
	pt := store.EndpointPatch{URL: in.URL, Description: in.Description, EventTypes: in.EventTypes, Environment: in.Environment,
		Disabled: in.Disabled, Paused: in.Paused, RateLimit: in.RateLimit, MaxInFlight: in.MaxInFlight, Headers: in.Headers, Filter: in.Filter,
		EgressProxy: in.EgressProxy, TraceContext: in.TraceContext}
	if in.Ordering != nil {
		pt.Ordering = &e.Ordering
	}
	if in.FIFOOnDeadLetter != nil {
		pt.FIFOOnDeadLetter = &e.FIFOOnDeadLetter
	}
	if in.RetrySchedule != nil {
		pt.RetrySchedule = &e.RetrySchedule
	}
	if in.Deadline != nil {
		pt.Deadline = &e.Deadline
	}
	if in.RequestTimeout != nil {
		pt.RequestTimeout = &e.RequestTimeout
	}
	out, secret, err := s.store.PatchEndpoint(ctx, e.AppID, e.ID, pt)
	if err != nil {
		return Endpoint{}, typed(err)
	}
	s.record(ctx, p, appID, actPatchEndpoint, endpointPath(appID, id))
	v := viewEndpoint(out)
	v.Secret = secret
	return v, nil
}

// manages checks that p may change endpoint id of app appID.
func (s *Service) manages(p principal, appID, id string) error {
	if err := sees(p, appID, id); err != nil {
		return err
	}
	return can(p, appID, access.CapManageEndpoints)
}

// DeleteEndpoint soft-deletes an endpoint; its workflows are canceled
// through the outbox in the same transaction.
func (s *Service) DeleteEndpoint(ctx context.Context, p principal, appID, id string) error {
	if err := s.manages(p, appID, id); err != nil {
		return err
	}
	if err := s.store.DeleteEndpoint(ctx, appID, id); err != nil {
		return typed(err)
	}
	s.record(ctx, p, appID, actDeleteEndpoint, endpointPath(appID, id))
	return nil
}

// RotateInput asks for a secret rotation.
type RotateInput struct {
	// GracePeriod is how long the previous secret still signs, a Go
	// duration up to delivery.MaxRotationGrace; nil is
	// delivery.RotationGraceDefault.
	GracePeriod *string `json:"grace_period"`
}

// RotateSecret gives the endpoint a new signing secret (or Ed25519 key).
func (s *Service) RotateSecret(ctx context.Context, p principal, appID, id string, in RotateInput) (store.Rotated, error) {
	if err := sees(p, appID, id); err != nil {
		return store.Rotated{}, err
	}
	if err := can(p, appID, access.CapRotateSecret); err != nil {
		return store.Rotated{}, err
	}
	grace := delivery.RotationGraceDefault
	if in.GracePeriod != nil {
		d, err := time.ParseDuration(*in.GracePeriod)
		if err != nil || d < 0 || d > delivery.MaxRotationGrace {
			return store.Rotated{}, invalidf("grace_period", "grace_period must be a Go duration from 0s to %s", delivery.MaxRotationGrace)
		}
		grace = d
	}
	r, err := s.store.RotateSecret(ctx, appID, id, grace)
	if err != nil {
		return r, typed(err)
	}
	s.record(ctx, p, appID, actRotate, endpointPath(appID, id)+"/secret/rotate")
	return r, nil
}

// RevokePrevious stops the endpoint's previous secrets now, returning
// how many.
func (s *Service) RevokePrevious(ctx context.Context, p principal, appID, id string) (int64, error) {
	if err := sees(p, appID, id); err != nil {
		return 0, err
	}
	if err := can(p, appID, access.CapRotateSecret); err != nil {
		return 0, err
	}
	n, err := s.store.RevokePrevious(ctx, appID, id)
	if err != nil {
		return 0, typed(err)
	}
	s.record(ctx, p, appID, actRevokePrevious, endpointPath(appID, id)+"/secret/revoke-previous")
	return n, nil
}

// SendTest sends the endpoint a test event (outbox.TestType), whatever
// its event-type filter, and to no other endpoint: a delivery like any
// other, with attempts, retries and replays.
func (s *Service) SendTest(ctx context.Context, p principal, appID, id string) (outbox.Published, error) {
	if err := s.manages(p, appID, id); err != nil {
		return outbox.Published{}, err
	}
	if err := s.endpointEnabled(ctx, appID, id, true); err != nil {
		return outbox.Published{}, err
	}
	data, err := marshalTest(id)
	if err != nil {
		return outbox.Published{}, err
	}
	pub, err := s.publisher.PublishNow(ctx, s.store.Pool(), appID, outbox.Event{Type: outbox.TestType, Data: data, Endpoint: id})
	if err != nil {
		return pub, typed(err)
	}
	if at, ok := pub.WakeAt(); ok && s.dispatcher != nil {
		s.dispatcher.Wake(at)
	}
	s.record(ctx, p, appID, actTestEndpoint, endpointPath(appID, id)+"/test")
	return pub, nil
}

// endpointEnabled is nil when endpoint id exists and is enabled, else a
// *ConflictError (or, when named, a *NotFoundError): a dead letter of a
// disabled endpoint stays a dead letter until the endpoint is enabled
// again. named says the call named the endpoint (not its delivery).
func (s *Service) endpointEnabled(ctx context.Context, appID, id string, named bool) error {
	e, err := s.store.GetEndpoint(ctx, appID, id)
	switch {
	case errors.Is(err, store.ErrNotFound) && !named:
		return &ConflictError{Field: "endpoint_id", Detail: fmt.Sprintf("endpoint %s was deleted; its deliveries cannot be replayed", id)}
	case err != nil:
		return typed(err)
	case e.Disabled:
		return &ConflictError{Field: "endpoint_id", Detail: fmt.Sprintf("endpoint %s is disabled; enable it to replay its deliveries", id)}
	}
	return nil
}

// checkURL enforces http(s), no credentials, ≤ 2 KiB and, outside dev
// mode, https and no literal private address (hostnames are checked again
// at dial time).
func (s *Service) checkURL(raw string) error {
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
