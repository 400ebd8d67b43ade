package portal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/service"
	"hookrelay/store"
)

// DeliveryPageSize is how many deliveries the log shows per page.
const DeliveryPageSize = 25

// seg escapes one path segment taken from the request.
func seg(s string) string { return url.PathEscape(s) }

// visibleEndpoints lists the endpoints the session may see, all of them
// (an app has at most a few hundred).
func (p *Portal) visibleEndpoints(c *gin.Context) ([]service.Endpoint, error) {
	ctx, who, app := as(c)
	var out []service.Endpoint
	pg := service.Page{Limit: service.MaxPageLimit}
	for {
		l, err := p.opts.Service.ListEndpoints(ctx, who, app, pg)
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

// endpointURLs maps endpoint IDs to URLs, for display.
func endpointURLs(eps []service.Endpoint) map[string]string {
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
	eps, err := p.visibleEndpoints(c)
	if err != nil {
		p.failed(c, err)
		return
	}
	f := map[string]string{}
	for _, k := range []string{"status", "endpoint_id", "event_type", "since", "until", "cursor"} {
		f[k] = c.Query(k)
	}
	q := service.DeliveryQuery{Status: delivery.Status(f["status"]), EventType: f["event_type"]}
	for k, t := range map[string]*time.Time{"since": &q.Since, "until": &q.Until} {
		var ok bool
		if *t, ok = timeParam(f[k]); !ok {
			p.showError(c, &pageError{Status: http.StatusUnprocessableEntity, Detail: k + " must be a date and time", Fields: []string{k}})
			return
		}
	}
	if f["endpoint_id"] != "" {
		q.EndpointIDs = []string{f["endpoint_id"]}
	}
	ctx, who, app := as(c)
	page, err := p.opts.Service.ListDeliveries(ctx, who, app, q, service.Page{Limit: DeliveryPageSize, Cursor: f["cursor"]})
	if err != nil {
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
	types, err := p.opts.Service.ListAppEventTypes(ctx, who, app, service.Page{Limit: service.MaxPageLimit})
	if err != nil {
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
	ctx, who, app := as(c)
	atts, err := p.opts.Service.ListAttempts(ctx, who, app, d.ID)
	if err != nil {
		p.failed(c, err)
		return
	}
	ev, err := p.opts.Service.GetEvent(ctx, who, app, d.EventID)
	if err != nil {
		p.failed(c, err)
		return
	}
	ep, err := p.opts.Service.GetEndpoint(ctx, who, app, d.EndpointID)
	if err != nil {
		ep = service.Endpoint{ID: d.EndpointID, URL: "(deleted endpoint)"}
	}
	p.render(c, http.StatusOK, "delivery", map[string]any{"D": d, "Attempts": atts, "Payload": prettyEnvelope(ev),
		"Endpoint": ep, "Why": whyFailed(d), "Notice": notice(c.Query("done")), "FilteredOut": ev.FilteredOut})
}

// loadDelivery loads the delivery the path names, if the session sees it.
func (p *Portal) loadDelivery(c *gin.Context) (store.Delivery, bool) {
	ctx, who, app := as(c)
	d, err := p.opts.Service.GetDelivery(ctx, who, app, c.Param("dlv"))
	if err != nil {
		p.failed(c, err)
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
	"released": "Released: the deliveries behind it in its sequence go on.",
}

func notice(key string) string { return notices[key] }

// deliveryAction runs act (a service method) on the page's delivery and
// shows it again with notice done: resend and release.
func (p *Portal) deliveryAction(act func(context.Context, access.Principal, string, string) error, done string) gin.HandlerFunc {
	return func(c *gin.Context) {
		d, ok := p.loadDelivery(c)
		if !ok {
			return
		}
		ctx, who, app := as(c)
		if err := act(ctx, who, app, d.ID); err != nil {
			p.failed(c, err)
			return
		}
		c.Redirect(http.StatusSeeOther, "/portal/deliveries/"+seg(d.ID)+"?done="+done)
	}
}

// replayRange reads since/until of a range replay.
func (p *Portal) replayRange(c *gin.Context, since, until string) (service.ReplayRange, bool) {
	s, ok1 := timeParam(since)
	u, ok2 := timeParam(until)
	if !ok1 || !ok2 || s.IsZero() {
		p.showError(c, &pageError{Status: http.StatusUnprocessableEntity, Detail: "since and until must be dates and times", Fields: []string{"since", "until"}})
		return service.ReplayRange{}, false
	}
	r := service.ReplayRange{Since: &s}
	if !u.IsZero() {
		r.Until = &u
	}
	return r, true
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
		r, ok := p.replayRange(c, since, until)
		if !ok {
			return
		}
		r.DryRun = dryRun
		ctx, who, app := as(c)
		n, err := p.opts.Service.ReplayEndpoint(ctx, who, app, e.ID, r)
		if err != nil {
			p.failed(c, err)
			return
		}
		if dryRun {
			p.render(c, http.StatusOK, "replay", map[string]any{"E": e, "Count": n, "Since": since, "Until": until})
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
	ctx, who, app := as(c)
	st, err := p.opts.Service.Stats(ctx, who, app, StatsLast, nil)
	if err != nil {
		p.failed(c, err)
		return
	}
	p.render(c, http.StatusOK, "stats", map[string]any{"S": st, "Last": StatsLast, "Chart": hourlyChart(st.Hourly)})
}
