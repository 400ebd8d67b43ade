package portal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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
		"Endpoint": ep, "Why": whyFailed(d), "Notice": notice(c.Query("done")), "FilteredOut": seenEvent(c, ev).FilteredOut})
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
	}{ev.ID, ev.Type, ev.Created.UTC().Format(outbox.CreatedFormat), ev.APIVersion, ev.Data}
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
