package portal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/api"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// list is the API's list answer.
type list[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// DeliveryPageSize is how many deliveries the log shows per page.
const DeliveryPageSize = 25

// seg escapes one path segment taken from the request.
func seg(s string) string { return url.PathEscape(s) }

// visibleEndpoints lists the endpoints the session may see, all of them
// (an app has at most a few hundred).
func (p *Portal) visibleEndpoints(c *gin.Context) ([]api.EndpointView, error) {
	sess := sessionOf(c).Principal()
	var out []api.EndpointView
	cursor := ""
	for {
		var page list[api.EndpointView]
		if err := p.call(c, http.MethodGet, "/endpoints?limit=250&cursor="+url.QueryEscape(cursor), nil, &page); err != nil {
			return nil, err
		}
		for _, e := range page.Data {
			if sess.SeesEndpoint(e.ID) {
				out = append(out, e)
			}
		}
		if page.NextCursor == nil {
			return out, nil
		}
		cursor = *page.NextCursor
	}
}

// endpointURLs maps endpoint IDs to URLs, for display.
func endpointURLs(eps []api.EndpointView) map[string]string {
	m := map[string]string{}
	for _, e := range eps {
		m[e.ID] = e.URL
	}
	return m
}

// timeParam reads a datetime-local (UTC) or RFC 3339 query value.
func timeParam(v string) (time.Time, bool) {
	if v == "" {
		return time.Time{}, true
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func (p *Portal) deliveries(c *gin.Context) {
	sess := sessionOf(c).Principal()
	eps, err := p.visibleEndpoints(c)
	if err != nil {
		p.failed(c, err)
		return
	}
	q := url.Values{"limit": {fmt.Sprint(DeliveryPageSize)}}
	f := map[string]string{}
	for _, k := range []string{"status", "endpoint_id", "event_type", "since", "until", "cursor"} {
		f[k] = c.Query(k)
	}
	for _, k := range []string{"status", "event_type", "cursor"} {
		if f[k] != "" {
			q.Set(k, f[k])
		}
	}
	for _, k := range []string{"since", "until"} {
		t, ok := timeParam(f[k])
		if !ok {
			p.render(c, http.StatusUnprocessableEntity, "error", map[string]any{"Error": &APIError{Status: 422, Detail: k + " must be a date and time", Fields: []string{k}}})
			return
		}
		if !t.IsZero() {
			q.Set(k, t.Format(time.RFC3339))
		}
	}
	switch {
	case f["endpoint_id"] != "":
		if !sess.SeesEndpoint(f["endpoint_id"]) {
			p.plain(c, http.StatusNotFound, msgNoSuchPage)
			return
		}
		q.Set("endpoint_id", f["endpoint_id"])
	case sess.Limited():
		q["endpoint_id"] = sess.EndpointIDs
	}
	var page list[store.Delivery]
	if err := p.call(c, http.MethodGet, "/deliveries?"+q.Encode(), nil, &page); err != nil {
		p.failed(c, err)
		return
	}
	var next string
	if page.NextCursor != nil {
		nq := url.Values{}
		for k, v := range f {
			if v != "" && k != "cursor" {
				nq.Set(k, v)
			}
		}
		nq.Set("cursor", *page.NextCursor)
		next = "/portal/deliveries?" + nq.Encode()
	}
	var types list[store.EventType]
	if err := p.call(c, http.MethodGet, "/event-types?limit=250", nil, &types); err != nil {
		p.failed(c, err)
		return
	}
	p.render(c, http.StatusOK, "deliveries", map[string]any{"Deliveries": page.Data, "Next": next, "Filter": f,
		"Endpoints": eps, "URLs": endpointURLs(eps), "Statuses": delivery.Statuses(), "Types": types.Data})
}

// attemptView is an attempt as the detail page shows it.
type attemptView = store.Attempt

func (p *Portal) delivery(c *gin.Context) {
	d, ok := p.loadDelivery(c)
	if !ok {
		return
	}
	var atts struct {
		Data []attemptView `json:"data"`
	}
	if err := p.call(c, http.MethodGet, "/deliveries/"+seg(d.ID)+"/attempts", nil, &atts); err != nil {
		p.failed(c, err)
		return
	}
	var ev outbox.Published
	if err := p.call(c, http.MethodGet, "/events/"+seg(d.EventID), nil, &ev); err != nil {
		p.failed(c, err)
		return
	}
	var ep api.EndpointView
	if err := p.call(c, http.MethodGet, "/endpoints/"+seg(d.EndpointID), nil, &ep); err != nil {
		ep = api.EndpointView{ID: d.EndpointID, URL: "(deleted endpoint)"}
	}
	p.render(c, http.StatusOK, "delivery", map[string]any{"D": d, "Attempts": atts.Data, "Payload": prettyEnvelope(ev),
		"Endpoint": ep, "Why": whyFailed(d), "Notice": notice(c.Query("done"))})
}

// loadDelivery loads the delivery the path names, if the session sees it.
func (p *Portal) loadDelivery(c *gin.Context) (store.Delivery, bool) {
	var d store.Delivery
	if err := p.call(c, http.MethodGet, "/deliveries/"+seg(c.Param("dlv")), nil, &d); err != nil {
		p.failed(c, err)
		return d, false
	}
	if !sessionOf(c).Principal().SeesEndpoint(d.EndpointID) {
		p.plain(c, http.StatusNotFound, msgNoSuchPage)
		return d, false
	}
	return d, true
}

// whyFailed answers "why did the last attempt fail" in a sentence.
func whyFailed(d store.Delivery) string {
	a := d.LastAttempt
	switch {
	case a == nil:
		return "No attempt has been made yet."
	case a.Class == string(delivery.ClassSuccess):
		return "The last attempt succeeded."
	case a.StatusCode != nil && a.Error != "":
		return fmt.Sprintf("Your server answered HTTP %d (%s): %s", *a.StatusCode, a.Class, a.Error)
	case a.StatusCode != nil:
		return fmt.Sprintf("Your server answered HTTP %d (%s).", *a.StatusCode, a.Class)
	default:
		return fmt.Sprintf("No answer (%s): %s", a.Class, a.Error)
	}
}

// prettyEnvelope is the frozen event, indented, fields in the envelope's
// order.
func prettyEnvelope(ev outbox.Published) string {
	env := struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		Created    string          `json:"created"`
		APIVersion string          `json:"api_version"`
		Data       json.RawMessage `json:"data"`
	}{ev.ID, ev.Type, ev.Created.UTC().Format(time.RFC3339), ev.APIVersion, ev.Data}
	out, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return string(ev.Data)
	}
	return string(out)
}

// notices are the fixed messages a redirect may ask a page to show (never
// text from the request).
var notices = map[string]string{
	"resent":   "Resend queued: a new attempt is on its way.",
	"created":  "Endpoint created.",
	"updated":  "Endpoint saved.",
	"disabled": "Endpoint disabled: nothing is sent to it until you enable it.",
	"enabled":  "Endpoint enabled.",
	"deleted":  "Endpoint deleted.",
	"tested":   "Test event sent: it shows in the delivery log.",
	"replayed": "Replay queued.",
}

func notice(key string) string { return notices[key] }

func (p *Portal) resend(c *gin.Context) {
	d, ok := p.loadDelivery(c)
	if !ok {
		return
	}
	if err := p.call(c, http.MethodPost, "/deliveries/"+seg(d.ID)+"/replay", nil, nil); err != nil {
		p.failed(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/portal/deliveries/"+seg(d.ID)+"?done=resent")
}

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
	// EventTypes are the types checked; All is the choice of every type
	// (the API's empty event_types).
	EventTypes []string
	All        bool
}

func formOf(e api.EndpointView) endpointForm {
	return endpointForm{URL: e.URL, Description: e.Description, RetrySchedule: strings.Join(e.RetrySchedule, ", "),
		Deadline: e.Deadline, RequestTimeout: e.RequestTimeout, EventTypes: e.EventTypes, All: len(e.EventTypes) == 0}
}

// readForm reads the form posted for an endpoint subscribed to had (nil
// for a new one). Checked types win; with none, "subscribe" says whether
// that means every type; a form without it (an older page) means every
// type only if the endpoint had no types before.
func readForm(c *gin.Context, had []string) endpointForm {
	f := endpointForm{URL: strings.TrimSpace(c.PostForm("url")), Description: c.PostForm("description"),
		RetrySchedule: c.PostForm("retry_schedule"), Deadline: strings.TrimSpace(c.PostForm("deadline")),
		RequestTimeout: strings.TrimSpace(c.PostForm("request_timeout")), EventTypes: c.PostFormArray("event_types")}
	switch c.PostForm("subscribe") {
	case subscribeAll:
		f.All = len(f.EventTypes) == 0
	case subscribeSome:
	default:
		f.All = len(f.EventTypes) == 0 && len(had) == 0
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

// request is the API body for f; empty fields keep their defaults.
func (f endpointForm) request() map[string]any {
	types := []string{}
	if !f.All {
		types = f.EventTypes
	}
	body := map[string]any{"url": f.URL, "description": f.Description, "event_types": types}
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
		RetrySchedule: durations(delivery.DefaultSchedule()), Deadline: delivery.DeadlineDefault.String(), RequestTimeout: delivery.RequestTimeoutDefault.String()}), nil)
}

func durations(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

// endpointFormPage renders the create form (e.ID == "") or the endpoint's
// page, with f as typed and the error the last save met. The form lists the
// whole catalog and every type f has checked, so none is lost on a save.
func (p *Portal) endpointFormPage(c *gin.Context, status int, e api.EndpointView, f endpointForm, err *APIError) {
	types, cerr := p.catalog(c)
	if cerr != nil {
		p.failed(c, cerr)
		return
	}
	now := time.Now().UTC()
	p.render(c, status, "endpoint", map[string]any{"E": e, "Form": f, "Error": err, "Types": withSubscribed(types, f.EventTypes),
		"Notice": notice(c.Query("done")), "Since": now.Add(-24 * time.Hour).Format("2006-01-02T15:04"),
		"Until": now.Add(time.Minute).Format("2006-01-02T15:04")})
}

func (p *Portal) endpoint(c *gin.Context) {
	e, ok := p.loadEndpoint(c)
	if !ok {
		return
	}
	p.endpointFormPage(c, http.StatusOK, e, formOf(e), nil)
}

// invalid re-renders the form with the API's complaint, or fails.
func (p *Portal) invalid(c *gin.Context, e api.EndpointView, f endpointForm, err error) {
	if ae, ok := err.(*APIError); ok && ae.Status == http.StatusUnprocessableEntity {
		p.endpointFormPage(c, ae.Status, e, f, ae)
		return
	}
	p.failed(c, err)
}

func (p *Portal) createEndpoint(c *gin.Context) {
	f := readForm(c, nil)
	if ae := f.problem(); ae != nil {
		p.endpointFormPage(c, ae.Status, api.EndpointView{}, f, ae)
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
	f := readForm(c, e.EventTypes)
	if ae := f.problem(); ae != nil {
		p.endpointFormPage(c, ae.Status, e, f, ae)
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

// replayRange reads since/until of a range replay.
func (p *Portal) replayRange(c *gin.Context, since, until string) (map[string]any, bool) {
	s, ok1 := timeParam(since)
	u, ok2 := timeParam(until)
	if !ok1 || !ok2 || s.IsZero() {
		p.render(c, http.StatusUnprocessableEntity, "error", map[string]any{"Error": &APIError{Status: 422, Detail: "since and until must be dates and times", Fields: []string{"since", "until"}}})
		return nil, false
	}
	body := map[string]any{"since": s.Format(time.RFC3339)}
	if !u.IsZero() {
		body["until"] = u.Format(time.RFC3339)
	}
	return body, true
}

// rangeReplay counts (dryRun: the confirmation page, GET) or resends (a
// POST) the endpoint's dead letters between since and until.
func (p *Portal) rangeReplay(dryRun bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		e, ok := p.loadEndpoint(c)
		if !ok {
			return
		}
		since, until := c.Request.FormValue("since"), c.Request.FormValue("until")
		body, ok := p.replayRange(c, since, until)
		if !ok {
			return
		}
		body["dry_run"] = dryRun
		var out struct {
			WouldReplay int `json:"would_replay"`
		}
		if err := p.call(c, http.MethodPost, "/endpoints/"+seg(e.ID)+"/replay", body, &out); err != nil {
			p.failed(c, err)
			return
		}
		if dryRun {
			p.render(c, http.StatusOK, "replay", map[string]any{"E": e, "Count": out.WouldReplay, "Since": since, "Until": until})
			return
		}
		c.Redirect(http.StatusSeeOther, "/portal/deliveries?endpoint_id="+url.QueryEscape(e.ID))
	}
}

func (p *Portal) eventTypes(c *gin.Context) {
	types, err := p.catalog(c)
	if err != nil {
		p.failed(c, err)
		return
	}
	p.render(c, http.StatusOK, "event-types", map[string]any{"Types": types})
}

// StatsLast is how many of the latest events the stats panel covers.
const StatsLast = 1000

func (p *Portal) stats(c *gin.Context) {
	q := url.Values{"last": {fmt.Sprint(StatsLast)}}
	if ids := sessionOf(c).EndpointIDs; len(ids) > 0 {
		q["endpoint_id"] = ids
	}
	var st store.Stats
	if err := p.call(c, http.MethodGet, "/stats?"+q.Encode(), nil, &st); err != nil {
		p.failed(c, err)
		return
	}
	p.render(c, http.StatusOK, "stats", map[string]any{"S": st, "Last": StatsLast, "Chart": hourlyChart(st.Hourly)})
}
