package portal

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"hookrelay/service"
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

// event shows one event: its payload, its deliveries and the endpoints
// whose filter skipped it ("filtered out", with the filter's error when it
// failed), as far as the session sees them (the service keeps a limited
// session to its endpoints: an event none of them got or skipped is no
// page of the session's).
func (p *Portal) event(c *gin.Context) {
	ctx, who, app := as(c)
	ev, err := p.opts.Service.GetEvent(ctx, who, app, c.Param("evt"))
	if err != nil {
		p.failed(c, err)
		return
	}
	eps, err := p.visibleEndpoints(c)
	if err != nil {
		p.failed(c, err)
		return
	}
	byID := map[string]service.Endpoint{}
	for _, e := range eps {
		byID[e.ID] = e
	}
	p.render(c, http.StatusOK, "event", map[string]any{"Ev": ev, "Endpoints": byID, "Payload": prettyEnvelope(ev)})
}
