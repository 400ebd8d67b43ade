package portal

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"hookrelay/api"
	"hookrelay/outbox"
)

// findEvent redirects the delivery log's "find an event" form to the
// event's page.
func (p *Portal) findEvent(c *gin.Context) {
	id := strings.TrimSpace(c.Query("id"))
	if id == "" {
		c.Redirect(http.StatusSeeOther, "/portal/deliveries")
		return
	}
	c.Redirect(http.StatusSeeOther, "/portal/events/"+seg(id))
}

// seenEvent is the event of the API with only what the session sees: its
// deliveries to, and its skips by the filters of, the session's endpoints.
func seenEvent(c *gin.Context, ev outbox.Published) outbox.Published {
	sess := sessionOf(c).Principal()
	ev.Deliveries = slices.DeleteFunc(ev.Deliveries, func(d outbox.DeliveryRef) bool { return !sess.SeesEndpoint(d.EndpointID) })
	ev.FilteredOut = slices.DeleteFunc(ev.FilteredOut, func(f outbox.FilteredOut) bool { return !sess.SeesEndpoint(f.EndpointID) })
	return ev
}

// event shows one event: its payload, its deliveries and the endpoints
// whose filter skipped it ("filtered out", with the filter's error when it
// failed), as far as the session sees them. An event none of the session's
// endpoints got or skipped is no page of the session's.
func (p *Portal) event(c *gin.Context) {
	var ev outbox.Published
	if err := p.call(c, http.MethodGet, "/events/"+seg(c.Param("evt")), nil, &ev); err != nil {
		p.failed(c, err)
		return
	}
	ev = seenEvent(c, ev)
	if len(ev.Deliveries) == 0 && len(ev.FilteredOut) == 0 {
		p.plain(c, http.StatusNotFound, msgNoSuchPage)
		return
	}
	eps, err := p.visibleEndpoints(c)
	if err != nil {
		p.failed(c, err)
		return
	}
	byID := map[string]api.EndpointView{}
	for _, e := range eps {
		byID[e.ID] = e
	}
	p.render(c, http.StatusOK, "event", map[string]any{"Ev": ev, "Endpoints": byID, "Payload": prettyEnvelope(ev)})
}
