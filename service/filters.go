package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"hookrelay/access"
	"hookrelay/filter"
	"hookrelay/outbox"
	"hookrelay/store"
)

// Bounds of a filter test.
const (
	// FilterTestLastDefault is how many of the app's latest events a
	// filter test evaluates when the call names no Last.
	FilterTestLastDefault = 100
	// MaxFilterTestLast is the most events one filter test evaluates.
	MaxFilterTestLast = 1000
	// MaxFilterTestBytes bounds the payload bytes one filter test reads:
	// past them it evaluates no older events and says so (Truncated).
	MaxFilterTestBytes = 16 << 20
)

// Verdicts of a filter test, one per event.
const (
	VerdictMatched       = "matched"
	VerdictNotMatched    = "not_matched"
	VerdictError         = "error"
	VerdictNotSubscribed = "not_subscribed"
)

// FilterTestInput is a filter test's question.
type FilterTestInput struct {
	// Filter is the expression to test; on an endpoint it defaults to the
	// endpoint's own.
	Filter *string `json:"filter"`
	// EventTypes is the subscription to test with (every type when
	// empty); on an endpoint it defaults to the endpoint's own.
	EventTypes *[]string `json:"event_types"`
	// Last is how many of the app's latest events to evaluate. Defaults
	// to FilterTestLastDefault; at most MaxFilterTestLast.
	Last *int `json:"last"`
	// EndpointIDs, when given, keeps only the events one of these
	// endpoints got or filtered out. A session limited to some endpoints
	// is always kept to its own.
	EndpointIDs []string `json:"endpoint_ids"`
}

// FilterTestEvent is one event's verdict in a filter test.
type FilterTestEvent struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created time.Time `json:"created"`
	Verdict string    `json:"verdict"`
	Error   string    `json:"error,omitempty"`
}

// FilterTest is the result of a filter test: what fan-out would have done
// with the app's latest events.
type FilterTest struct {
	Filter        string   `json:"filter"`
	EventTypes    []string `json:"event_types"`
	Evaluated     int      `json:"evaluated"`
	Matched       int      `json:"matched"`
	NotMatched    int      `json:"not_matched"`
	Errored       int      `json:"errored"`
	NotSubscribed int      `json:"not_subscribed"`
	// Truncated: older events among the last asked for were left out, as
	// their payloads would have passed MaxFilterTestBytes.
	Truncated bool              `json:"truncated"`
	Events    []FilterTestEvent `json:"events"`
}

// TestFilter evaluates in's filter with its subscription on app appID's
// latest events, as fan-out would; it changes nothing. With endpointID it
// defaults to that endpoint's filter and subscription.
func (s *Service) TestFilter(ctx context.Context, p principal, appID, endpointID string, in FilterTestInput) (FilterTest, error) {
	if err := can(p, appID, access.CapView); err != nil {
		return FilterTest{}, err
	}
	var expr string
	var types []string
	if endpointID != "" {
		if err := sees(p, appID, endpointID); err != nil {
			return FilterTest{}, err
		}
		e, err := s.store.GetEndpoint(ctx, appID, endpointID)
		if err != nil {
			return FilterTest{}, typed(err)
		}
		expr, types = e.Filter, e.EventTypes
	} else if _, err := s.store.GetApp(ctx, appID); err != nil {
		return FilterTest{}, typed(err)
	}
	if in.Filter != nil {
		expr = *in.Filter
	}
	if in.EventTypes != nil {
		types = *in.EventTypes
	}
	last := FilterTestLastDefault
	if in.Last != nil {
		if *in.Last < 1 || *in.Last > MaxFilterTestLast {
			return FilterTest{}, invalidf("last", "last: must be from 1 to %d", MaxFilterTestLast)
		}
		last = *in.Last
	}
	for _, t := range types {
		if outbox.ValidateType(t) != nil {
			return FilterTest{}, invalidf("event_types", "event_types: %q is not a valid event type (resource.action)", t)
		}
	}
	endpoints := in.EndpointIDs
	if p.Limited() {
		for _, id := range endpoints {
			if err := sees(p, appID, id); err != nil {
				return FilterTest{}, err
			}
		}
		if len(endpoints) == 0 {
			endpoints = p.EndpointIDs
		}
	}
	fs, err := s.publisher.Filters()
	if err != nil {
		return FilterTest{}, typed(err)
	}
	prg, err := fs.Program(expr)
	if err != nil {
		return FilterTest{}, invalidf("filter", "filter: %s", err)
	}
	evs, more, err := s.store.LatestEvents(ctx, appID, outbox.TestType, last, endpoints, MaxFilterTestBytes)
	if err != nil {
		return FilterTest{}, typed(err)
	}
	out := FilterTest{Filter: expr, EventTypes: types, Truncated: more, Events: make([]FilterTestEvent, 0, len(evs))}
	if out.EventTypes == nil {
		out.EventTypes = []string{}
	}
	for _, e := range evs {
		v, err := filterVerdict(e, prg, types)
		if err != nil {
			return FilterTest{}, err
		}
		switch v.Verdict {
		case VerdictMatched:
			out.Matched++
		case VerdictNotMatched:
			out.NotMatched++
		case VerdictError:
			out.Errored++
		case VerdictNotSubscribed:
			out.NotSubscribed++
		}
		out.Events = append(out.Events, v)
	}
	out.Evaluated = len(out.Events)
	return out, nil
}

// filterVerdict is what fan-out does with stored event e for a
// subscription to types with filter prg. Test events (outbox.TestType)
// are left out by the query: fan-out does not send them.
func filterVerdict(e store.EventRecord, prg *filter.Program, types []string) (FilterTestEvent, error) {
	var env outbox.Published
	if err := json.Unmarshal(e.Payload, &env); err != nil {
		return FilterTestEvent{}, fmt.Errorf("decode event %s: %w", e.ID, err)
	}
	v := FilterTestEvent{ID: e.ID, Type: e.Type, Created: env.Created}
	if len(types) > 0 && !slices.Contains(types, e.Type) {
		v.Verdict = VerdictNotSubscribed
		return v, nil
	}
	in, err := filter.NewInput(filter.Event{Type: env.Type, Data: env.Data, Created: env.Created, APIVersion: env.APIVersion})
	if err != nil {
		return FilterTestEvent{}, fmt.Errorf("event %s: %w", e.ID, err)
	}
	switch ok, err := prg.Match(in); {
	case err != nil:
		v.Verdict, v.Error = VerdictError, err.Error()
	case ok:
		v.Verdict = VerdictMatched
	default:
		v.Verdict = VerdictNotMatched
	}
	return v, nil
}
