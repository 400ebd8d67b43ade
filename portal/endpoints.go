package portal

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/service"
	"hookrelay/store"
)

func (p *Portal) endpoints(c *gin.Context) {
	eps, err := p.visibleEndpoints(c)
	if err != nil {
		p.failed(c, err)
		return
	}
	p.render(c, http.StatusOK, "endpoints", map[string]any{"Endpoints": eps, "Notice": notice(c.Query("done")),
		"Limited": sessionOf(c).Principal().Limited()})
}

// loadEndpoint loads the endpoint the path names, if the session sees it.
func (p *Portal) loadEndpoint(c *gin.Context) (service.Endpoint, bool) {
	ctx, who, app := as(c)
	e, err := p.opts.Service.GetEndpoint(ctx, who, app, c.Param("ep"))
	if err != nil {
		p.failed(c, err)
		return e, false
	}
	return e, true
}

// catalog is the app's whole event-type catalog, every page of it.
func (p *Portal) catalog(c *gin.Context) ([]store.EventType, error) {
	ctx, who, app := as(c)
	var out []store.EventType
	pg := service.Page{Limit: service.MaxPageLimit}
	for {
		l, err := p.opts.Service.ListAppEventTypes(ctx, who, app, pg)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Data...)
		if l.NextCursor == nil {
			return out, nil
		}
		pg.Cursor = *l.NextCursor
	}
}

// withSubscribed is the catalog with every type of subscribed it lacks
// added (a type no event has used yet, or one the operator has not
// defined), by name, so the form shows each subscribed type checked and a
// save keeps it.
func withSubscribed(types []store.EventType, subscribed []string) []store.EventType {
	for _, name := range subscribed {
		if !slices.ContainsFunc(types, func(t store.EventType) bool { return t.Name == name }) {
			types = append(types, store.EventType{Name: name})
		}
	}
	slices.SortFunc(types, func(a, b store.EventType) int { return strings.Compare(a.Name, b.Name) })
	return types
}

// Values of the endpoint form's subscribe field.
const (
	subscribeAll  = "all"
	subscribeSome = "some"
)

// endpointForm is the endpoint form's fields as typed.
type endpointForm struct {
	URL, Description, RetrySchedule, Deadline, RequestTimeout string
	// Filter is the CEL expression ("" delivers every event of the types).
	Filter string
	// EventTypes are the types checked; All is the choice of every type
	// (the API's empty event_types).
	EventTypes []string
	All        bool
	// Ordering is "none" or "fifo", FIFOOnDeadLetter "skip" or "block";
	// "" (a form without the field) keeps the endpoint's.
	Ordering, FIFOOnDeadLetter string
}

func formOf(e service.Endpoint) endpointForm {
	return endpointForm{URL: e.URL, Description: e.Description, RetrySchedule: strings.Join(e.RetrySchedule, ", "),
		Deadline: e.Deadline, RequestTimeout: e.RequestTimeout, Filter: e.Filter, EventTypes: e.EventTypes, All: len(e.EventTypes) == 0,
		Ordering: e.Ordering, FIFOOnDeadLetter: e.FIFOOnDeadLetter}
}

// readForm reads the form posted for endpoint had (the zero view for a new
// one). Checked types win; with none, "subscribe" says whether that means
// every type; a form without it (an older page) means every type only if
// the endpoint had no types before. A form without the filter field (an
// older page) keeps the endpoint's filter; an empty one removes it.
func readForm(c *gin.Context, had service.Endpoint) endpointForm {
	f := endpointForm{URL: strings.TrimSpace(c.PostForm("url")), Description: c.PostForm("description"),
		RetrySchedule: c.PostForm("retry_schedule"), Deadline: strings.TrimSpace(c.PostForm("deadline")),
		RequestTimeout: strings.TrimSpace(c.PostForm("request_timeout")), EventTypes: c.PostFormArray("event_types"), Filter: had.Filter}
	if expr, ok := c.GetPostForm("filter"); ok {
		// Browsers send a textarea's line breaks as CRLF.
		f.Filter = strings.TrimSpace(strings.ReplaceAll(expr, "\r\n", "\n"))
	}
	f.Ordering, f.FIFOOnDeadLetter = c.PostForm("ordering"), c.PostForm("fifo_on_dead_letter")
	switch c.PostForm("subscribe") {
	case subscribeAll:
		f.All = len(f.EventTypes) == 0
	case subscribeSome:
	default:
		f.All = len(f.EventTypes) == 0 && len(had.EventTypes) == 0
	}
	return f
}

// problem is what keeps f from being saved: a choice of some types with
// none checked, which would otherwise subscribe the endpoint to every type.
func (f endpointForm) problem() *pageError {
	if f.All || len(f.EventTypes) > 0 {
		return nil
	}
	return &pageError{Status: http.StatusUnprocessableEntity, Fields: []string{"event_types"},
		Detail: "event_types: check at least one event type, or choose all event types"}
}

// types is the API's event_types for f: none for every type.
func (f endpointForm) types() []string {
	if f.All {
		return []string{}
	}
	return f.EventTypes
}

// input is the service's input for f; empty fields keep their defaults
// but the filter, always given, so an emptied one is removed.
func (f endpointForm) input() service.EndpointInput {
	types := f.types()
	in := service.EndpointInput{URL: &f.URL, Description: &f.Description, EventTypes: &types, Filter: &f.Filter}
	if s := strings.TrimSpace(f.RetrySchedule); s != "" {
		var sched []string
		for _, d := range strings.Split(s, ",") {
			sched = append(sched, strings.TrimSpace(d))
		}
		in.RetrySchedule = &sched
	}
	if f.Deadline != "" {
		in.Deadline = &f.Deadline
	}
	if f.RequestTimeout != "" {
		in.RequestTimeout = &f.RequestTimeout
	}
	if f.Ordering != "" {
		in.Ordering = &f.Ordering
	}
	if f.FIFOOnDeadLetter != "" {
		in.FIFOOnDeadLetter = &f.FIFOOnDeadLetter
	}
	return in
}

func (p *Portal) newEndpoint(c *gin.Context) {
	p.endpointFormPage(c, http.StatusOK, service.Endpoint{}, formOf(service.Endpoint{
		RetrySchedule: durations(delivery.DefaultSchedule()), Deadline: delivery.DeadlineDefault.String(), RequestTimeout: delivery.RequestTimeoutDefault.String()}), nil, nil)
}

func durations(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

// endpointFormPage renders the create form (e.ID == "") or the endpoint's
// page, with f as typed, the error the last save or preview met (one about
// the filter shown next to it) and the filter preview made, if any. The
// form lists the whole catalog and every type f has checked, so none is
// lost on a save.
func (p *Portal) endpointFormPage(c *gin.Context, status int, e service.Endpoint, f endpointForm, err *pageError, preview *service.FilterTest) {
	types, cerr := p.catalog(c)
	if cerr != nil {
		p.failed(c, cerr)
		return
	}
	var filterErr string
	if err != nil && slices.Contains(err.Fields, "filter") {
		err, filterErr = nil, err.Detail
	}
	now := time.Now().UTC()
	p.render(c, status, "endpoint", map[string]any{"E": e, "Form": f, "Error": err, "FilterError": filterErr, "Preview": preview,
		"Types": withSubscribed(types, f.EventTypes), "Notice": notice(c.Query("done")),
		"Since": now.Add(-24 * time.Hour).Format("2006-01-02T15:04"), "Until": now.Add(time.Minute).Format("2006-01-02T15:04")})
}

func (p *Portal) endpoint(c *gin.Context) {
	e, ok := p.loadEndpoint(c)
	if !ok {
		return
	}
	p.endpointFormPage(c, http.StatusOK, e, formOf(e), nil, nil)
}

// invalid re-renders the form with the service's complaint, or fails.
func (p *Portal) invalid(c *gin.Context, e service.Endpoint, f endpointForm, err error) {
	if pe := invalidPage(err); pe != nil {
		p.endpointFormPage(c, pe.Status, e, f, pe, nil)
		return
	}
	p.failed(c, err)
}

func (p *Portal) createEndpoint(c *gin.Context) {
	f := readForm(c, service.Endpoint{})
	if pe := f.problem(); pe != nil {
		p.endpointFormPage(c, pe.Status, service.Endpoint{}, f, pe, nil)
		return
	}
	ctx, who, app := as(c)
	e, err := p.opts.Service.CreateEndpoint(ctx, who, app, f.input())
	if err != nil {
		p.invalid(c, service.Endpoint{}, f, err)
		return
	}
	p.render(c, http.StatusCreated, "secret", map[string]any{"E": e, "Secret": e.Secret, "PublicKey": e.PublicKey, "Created": true})
}

func (p *Portal) updateEndpoint(c *gin.Context) {
	e, ok := p.loadEndpoint(c)
	if !ok {
		return
	}
	f := readForm(c, e)
	if pe := f.problem(); pe != nil {
		p.endpointFormPage(c, pe.Status, e, f, pe, nil)
		return
	}
	ctx, who, app := as(c)
	if _, err := p.opts.Service.PatchEndpoint(ctx, who, app, e.ID, f.input()); err != nil {
		p.invalid(c, e, f, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/portal/endpoints/"+seg(e.ID)+"?done=updated")
}

// endpointCall is a service call on one endpoint of the session's app.
type endpointCall func(s *service.Service, ctx context.Context, who access.Principal, app, id string) error

// disabled sets the endpoint's disabled flag to to.
func disabled(to bool) endpointCall {
	return func(s *service.Service, ctx context.Context, who access.Principal, app, id string) error {
		_, err := s.PatchEndpoint(ctx, who, app, id, service.EndpointInput{Disabled: &to})
		return err
	}
}

func deleteEndpoint(s *service.Service, ctx context.Context, who access.Principal, app, id string) error {
	return s.DeleteEndpoint(ctx, who, app, id)
}

func sendTest(s *service.Service, ctx context.Context, who access.Principal, app, id string) error {
	_, err := s.SendTest(ctx, who, app, id)
	return err
}

// endpointAction makes call on the endpoint the path names and redirects
// to to with notice done.
func (p *Portal) endpointAction(call endpointCall, to, done string) gin.HandlerFunc {
	return func(c *gin.Context) {
		e, ok := p.loadEndpoint(c)
		if !ok {
			return
		}
		ctx, who, app := as(c)
		if err := call(p.opts.Service, ctx, who, app, e.ID); err != nil {
			p.failed(c, err)
			return
		}
		c.Redirect(http.StatusSeeOther, strings.ReplaceAll(to, "{ep}", seg(e.ID))+"?done="+done)
	}
}

func (p *Portal) rotate(c *gin.Context) {
	e, ok := p.loadEndpoint(c)
	if !ok {
		return
	}
	grace := c.PostForm("grace_period")
	ctx, who, app := as(c)
	out, err := p.opts.Service.RotateSecret(ctx, who, app, e.ID, service.RotateInput{GracePeriod: &grace})
	if err != nil {
		p.failed(c, err)
		return
	}
	p.render(c, http.StatusOK, "secret", map[string]any{"E": e, "Secret": out.Secret, "PublicKey": out.PublicKey, "PreviousValidUntil": &out.PreviousValidUntil})
}
