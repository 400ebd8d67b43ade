package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"hookrelay/filter"
	"hookrelay/outbox"
	"hookrelay/store"
)

// Bounds of a filter test.
const (
	// FilterTestLastDefault is how many of the app's latest events a
	// filter test evaluates when the request names no "last".
	FilterTestLastDefault = 100
	// MaxFilterTestLast is the most events one filter test evaluates.
	MaxFilterTestLast = 1000
)

// Verdicts of a filter test, one per event.
const (
	VerdictMatched       = "matched"
	VerdictNotMatched    = "not_matched"
	VerdictError         = "error"
	VerdictNotSubscribed = "not_subscribed"
)

// checkFilter answers why expr cannot be saved, "" when it can.
func (s *Server) checkFilter(expr string) string {
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

type filterTestRequest struct {
	// Filter is the expression to test; on an endpoint's route it
	// defaults to the endpoint's own.
	Filter *string `json:"filter"`
	// EventTypes is the subscription to test with (every type when
	// empty); on an endpoint's route it defaults to the endpoint's own.
	EventTypes *[]string `json:"event_types"`
	// Last is how many of the app's latest events to evaluate. Defaults
	// to FilterTestLastDefault; at most MaxFilterTestLast.
	Last *int `json:"last"`
	// EndpointIDs, when given, keeps only the events one of these
	// endpoints got or filtered out (a portal session limited to them).
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

// FilterTest is the answer of a filter test: what fan-out would have done
// with the app's latest events.
type FilterTest struct {
	Filter        string            `json:"filter"`
	EventTypes    []string          `json:"event_types"`
	Evaluated     int               `json:"evaluated"`
	Matched       int               `json:"matched"`
	NotMatched    int               `json:"not_matched"`
	Errored       int               `json:"errored"`
	NotSubscribed int               `json:"not_subscribed"`
	Events        []FilterTestEvent `json:"events"`
}

func (s *Server) testAppFilter(c *gin.Context) {
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	s.testFilter(c, "", nil)
}

func (s *Server) testEndpointFilter(c *gin.Context) {
	e, err := s.store.GetEndpoint(c.Request.Context(), c.Param("app"), c.Param("ep"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.testFilter(c, e.Filter, e.EventTypes)
}

// testFilter evaluates the request's filter (else expr) with its
// subscription (else types) on the app's latest events, as fan-out does
// (outbox.Publish): a type not subscribed gets no delivery whatever the
// filter; an evaluation error is no match. Test events (outbox.TestType)
// are left out: fan-out does not send them.
func (s *Server) testFilter(c *gin.Context, expr string, types []string) {
	var req filterTestRequest
	if c.Request.ContentLength != 0 && !bind(c, &req) {
		return
	}
	if req.Filter != nil {
		expr = *req.Filter
	}
	if req.EventTypes != nil {
		types = *req.EventTypes
	}
	last := FilterTestLastDefault
	if req.Last != nil {
		if *req.Last < 1 || *req.Last > MaxFilterTestLast {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("last: must be from 1 to %d", MaxFilterTestLast), "last")
			return
		}
		last = *req.Last
	}
	for _, t := range types {
		if outbox.ValidateType(t) != nil {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("event_types: %q is not a valid event type (resource.action)", t), "event_types")
			return
		}
	}
	fs, err := s.publisher.Filters()
	if err != nil {
		s.fail(c, err)
		return
	}
	prg, err := fs.Program(expr)
	if err != nil {
		problem(c, http.StatusUnprocessableEntity, "filter: "+err.Error(), "filter")
		return
	}
	evs, err := s.store.LatestEvents(c.Request.Context(), c.Param("app"), outbox.TestType, last, req.EndpointIDs)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := FilterTest{Filter: expr, EventTypes: nonNilTypes(types), Events: make([]FilterTestEvent, 0, len(evs))}
	for _, e := range evs {
		v, err := filterVerdict(e, prg, types)
		if err != nil {
			s.fail(c, err)
			return
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
	c.JSON(http.StatusOK, out)
}

// filterVerdict is what fan-out does with stored event e for a
// subscription to types with filter prg.
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

func nonNilTypes(types []string) []string {
	if types == nil {
		return []string{}
	}
	return types
}
