package portal

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/api"
	"hookrelay/delivery"
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
func (p *Portal) loadEndpoint(c *gin.Context) (api.EndpointView, bool) {
	var e api.EndpointView
	if !sessionOf(c).Principal().SeesEndpoint(c.Param("ep")) {
		p.plain(c, http.StatusNotFound, msgNoSuchPage)
		return e, false
	}
	if err := p.call(c, http.MethodGet, "/endpoints/"+seg(c.Param("ep")), nil, &e); err != nil {
		p.failed(c, err)
		return e, false
	}
	return e, true
}

// catalog is the app's whole event-type catalog, every page of it.
func (p *Portal) catalog(c *gin.Context) ([]store.EventType, error) {
	var out []store.EventType
	cursor := ""
	for {
		var page list[store.EventType]
		if err := p.call(c, http.MethodGet, "/event-types?limit=250&cursor="+url.QueryEscape(cursor), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Data...)
		if page.NextCursor == nil {
			return out, nil
		}
		cursor = *page.NextCursor
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
}

func formOf(e api.EndpointView) endpointForm {
	return endpointForm{URL: e.URL, Description: e.Description, RetrySchedule: strings.Join(e.RetrySchedule, ", "),
		Deadline: e.Deadline, RequestTimeout: e.RequestTimeout, Filter: e.Filter, EventTypes: e.EventTypes, All: len(e.EventTypes) == 0}
}

// readForm reads the form posted for endpoint had (the zero view for a new
// one). Checked types win; with none, "subscribe" says whether that means
// every type; a form without it (an older page) means every type only if
// the endpoint had no types before. A form without the filter field (an
// older page) keeps the endpoint's filter; an empty one removes it.
func readForm(c *gin.Context, had api.EndpointView) endpointForm {
	f := endpointForm{URL: strings.TrimSpace(c.PostForm("url")), Description: c.PostForm("description"),
		RetrySchedule: c.PostForm("retry_schedule"), Deadline: strings.TrimSpace(c.PostForm("deadline")),
		RequestTimeout: strings.TrimSpace(c.PostForm("request_timeout")), EventTypes: c.PostFormArray("event_types"), Filter: had.Filter}
	if expr, ok := c.GetPostForm("filter"); ok {
		// Browsers send a textarea's line breaks as CRLF.
		f.Filter = strings.TrimSpace(strings.ReplaceAll(expr, "\r\n", "\n"))
	}
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
func (f endpointForm) problem() *APIError {
	if f.All || len(f.EventTypes) > 0 {
		return nil
	}
	return &APIError{Status: http.StatusUnprocessableEntity, Fields: []string{"event_types"},
		Detail: "event_types: check at least one event type, or choose all event types"}
}

// types is the API's event_types for f: none for every type.
func (f endpointForm) types() []string {
	if f.All {
		return []string{}
	}
	return f.EventTypes
}

// request is the API body for f; empty fields keep their defaults but the
// filter, always sent, so an emptied one is removed.
func (f endpointForm) request() map[string]any {
	body := map[string]any{"url": f.URL, "description": f.Description, "event_types": f.types(), "filter": f.Filter}
	if s := strings.TrimSpace(f.RetrySchedule); s != "" {
		var sched []string
		for _, d := range strings.Split(s, ",") {
			sched = append(sched, strings.TrimSpace(d))
		}
		body["retry_schedule"] = sched
	}
	if f.Deadline != "" {
		body["deadline"] = f.Deadline
	}
	if f.RequestTimeout != "" {
		body["request_timeout"] = f.RequestTimeout
	}
	return body
}

func (p *Portal) newEndpoint(c *gin.Context) {
	p.endpointFormPage(c, http.StatusOK, api.EndpointView{}, formOf(api.EndpointView{
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
func (p *Portal) endpointFormPage(c *gin.Context, status int, e api.EndpointView, f endpointForm, err *APIError, preview *api.FilterTest) {
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

// invalid re-renders the form with the API's complaint, or fails.
func (p *Portal) invalid(c *gin.Context, e api.EndpointView, f endpointForm, err error) {
	if ae, ok := err.(*APIError); ok && ae.Status == http.StatusUnprocessableEntity {
		p.endpointFormPage(c, ae.Status, e, f, ae, nil)
		return
	}
	p.failed(c, err)
}

func (p *Portal) createEndpoint(c *gin.Context) {
	f := readForm(c, api.EndpointView{})
	if ae := f.problem(); ae != nil {
		p.endpointFormPage(c, ae.Status, api.EndpointView{}, f, ae, nil)
		return
	}
	var e api.EndpointView
	if err := p.call(c, http.MethodPost, "/endpoints", f.request(), &e); err != nil {
		p.invalid(c, api.EndpointView{}, f, err)
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
	if ae := f.problem(); ae != nil {
		p.endpointFormPage(c, ae.Status, e, f, ae, nil)
		return
	}
	if err := p.call(c, http.MethodPatch, "/endpoints/"+seg(e.ID), f.request(), nil); err != nil {
		p.invalid(c, e, f, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/portal/endpoints/"+seg(e.ID)+"?done=updated")
}

// endpointAction makes an API call on the endpoint the path names (method,
// its path + suffix, body) and redirects to to with notice done.
func (p *Portal) endpointAction(method, suffix string, body any, to, done string) gin.HandlerFunc {
	return func(c *gin.Context) {
		e, ok := p.loadEndpoint(c)
		if !ok {
			return
		}
		if err := p.call(c, method, "/endpoints/"+seg(e.ID)+suffix, body, nil); err != nil {
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
	var out struct {
		Secret             string     `json:"secret"`
		PublicKey          string     `json:"public_key"`
		PreviousValidUntil *time.Time `json:"previous_valid_until"`
	}
	if err := p.call(c, http.MethodPost, "/endpoints/"+seg(e.ID)+"/secret/rotate", map[string]any{"grace_period": c.PostForm("grace_period")}, &out); err != nil {
		p.failed(c, err)
		return
	}
	p.render(c, http.StatusOK, "secret", map[string]any{"E": e, "Secret": out.Secret, "PublicKey": out.PublicKey, "PreviousValidUntil": out.PreviousValidUntil})
}
