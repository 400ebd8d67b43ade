package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/filter"
	"hookrelay/internal/egress"
	"hookrelay/outbox"
	"hookrelay/store"
)

// applyEndpoint validates in onto e: an *InvalidError names the first
// field at fault.
func (s *Service) applyEndpoint(p principal, in EndpointInput, e *store.Endpoint) error {
	bad := func(field, msg string) error {
		return &InvalidError{Field: field, Detail: field + ": " + msg}
	}
	if in.URL != nil {
		if err := s.checkURL(*in.URL); err != nil {
			return bad("url", err.Error())
		}
		e.URL = *in.URL
	}
	if e.URL == "" {
		return bad("url", "is required")
	}
	if in.Description != nil {
		if len(*in.Description) > MaxDescriptionLength {
			return bad("description", fmt.Sprintf("at most %d characters", MaxDescriptionLength))
		}
		e.Description = *in.Description
	}
	if in.EventTypes != nil {
		for _, t := range *in.EventTypes {
			if outbox.ValidateType(t) != nil {
				return bad("event_types", fmt.Sprintf("%q is not a valid event type (resource.action)", t))
			}
		}
		e.EventTypes = *in.EventTypes
	}
	if in.Environment != nil {
		if *in.Environment != "live" && *in.Environment != "test" {
			return bad("environment", `must be "live" or "test"`)
		}
		e.Environment = *in.Environment
	}
	if in.Disabled != nil {
		e.Disabled = *in.Disabled
	}
	if in.Paused != nil {
		e.Paused = *in.Paused
	}
	if in.RateLimit != nil {
		if *in.RateLimit < 0 || *in.RateLimit > MaxRateLimit {
			return bad("rate_limit", fmt.Sprintf("must be deliveries per second from 1 to %d, or 0 for none", MaxRateLimit))
		}
		e.RateLimit = *in.RateLimit
	}
	if in.MaxInFlight != nil {
		if *in.MaxInFlight < 0 || *in.MaxInFlight > MaxMaxInFlight {
			return bad("max_in_flight", fmt.Sprintf("must be concurrent requests from 1 to %d, or 0 for none", MaxMaxInFlight))
		}
		e.MaxInFlight = *in.MaxInFlight
	}
	if in.RetrySchedule != nil {
		e.RetrySchedule = []time.Duration{}
		for _, s := range *in.RetrySchedule {
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
	}{{"deadline", in.Deadline, &e.Deadline}, {"request_timeout", in.RequestTimeout, &e.RequestTimeout}} {
		if f.in == nil {
			continue
		}
		d, err := time.ParseDuration(*f.in)
		if err != nil {
			return bad(f.name, fmt.Sprintf("%q is not a Go duration", *f.in))
		}
		*f.out = d
	}
	if in.Headers != nil {
		if field, msg := checkHeaders(*in.Headers); field != "" {
			return bad(field, msg)
		}
		e.Headers = *in.Headers
	}
	if in.Filter != nil {
		if msg := s.checkFilter(*in.Filter); msg != "" {
			return bad("filter", msg)
		}
		e.Filter = *in.Filter
	}
	if in.EgressProxy != nil {
		if p.Role != access.RoleAdmin {
			return &ForbiddenError{Field: "egress_proxy", Detail: "egress_proxy: only the admin key may set an endpoint's egress proxy"}
		}
		if v := *in.EgressProxy; v != "" && v != egress.Direct {
			// Any userinfo is refused, a password alone ("http://:pw@host")
			// included: the value is stored and shown as it is.
			u, uerr := url.Parse(v)
			if _, err := egress.Parse(v, "", ""); err != nil || uerr != nil || u.User != nil || len(v) > MaxURLLength {
				return bad("egress_proxy", `must be "direct", an http:// or https:// proxy URL without credentials, or "" for the deployment's proxy`)
			}
		}
		e.EgressProxy = *in.EgressProxy
	}
	if in.TraceContext != nil {
		if v := delivery.TraceContext(*in.TraceContext); v != "" && !v.Valid() {
			return bad("trace_context", `must be "linked", "fresh", "off" or "" for the deployment's --receiver-traces`)
		}
		e.TraceContext = *in.TraceContext
	}
	if in.Ordering != nil {
		if o := delivery.Ordering(*in.Ordering); !o.Valid() {
			return bad("ordering", `must be "none" or "fifo"`)
		}
		e.Ordering = delivery.Ordering(*in.Ordering)
	}
	if in.FIFOOnDeadLetter != nil {
		if c := delivery.DeadLetterChoice(*in.FIFOOnDeadLetter); !c.Valid() {
			return bad("fifo_on_dead_letter", `must be "skip" or "block"`)
		}
		e.FIFOOnDeadLetter = delivery.DeadLetterChoice(*in.FIFOOnDeadLetter)
	}
	set := delivery.Settings{Schedule: e.RetrySchedule, Deadline: e.Deadline, RequestTimeout: e.RequestTimeout}
	if err := set.Validate(); err != nil {
		var fe *delivery.FieldError
		if !errors.As(err, &fe) {
			return err
		}
		return bad(fe.Field, fe.Reason)
	}
	return nil
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

// checkFilter answers why expr cannot be saved, "" when it can.
func (s *Service) checkFilter(expr string) string {
	if !utf8.ValidString(expr) || strings.ContainsRune(expr, 0) {
		return "must be UTF-8 text without NUL characters"
	}
	fs, err := s.publisher.Filters()
	if err != nil {
		return err.Error()
	}
	var ce *filter.CompileError
	if err := fs.Check(expr); errors.As(err, &ce) {
		return ce.Message
	} else if err != nil {
		return err.Error()
	}
	return ""
}

// marshalTest is the data of a test event to endpoint id.
func marshalTest(id string) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"message": "This is a test event from hookrelay.", "endpoint_id": id})
}
