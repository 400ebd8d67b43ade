package portal

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/service"
)

// FilterPreviewLast is how many of the app's latest events the endpoint
// form's filter preview evaluates.
const FilterPreviewLast = 100

// previewFilter tests the endpoint form's filter and event types on the
// app's latest events, as fan-out would, and shows the form again as typed
// with the verdicts; nothing is saved. On /endpoints/:ep/filter-test it is
// the form of that endpoint, else the create form.
func (p *Portal) previewFilter(c *gin.Context) {
	var e service.Endpoint
	if c.Param("ep") != "" {
		var ok bool
		if e, ok = p.loadEndpoint(c); !ok {
			return
		}
	}
	f := readForm(c, e)
	if pe := f.problem(); pe != nil {
		p.endpointFormPage(c, pe.Status, e, f, pe, nil)
		return
	}
	types, last := f.types(), FilterPreviewLast
	// A session limited to some endpoints previews only the events its own
	// endpoints got or skipped: the service keeps it to them.
	ctx, who, app := as(c)
	out, err := p.opts.Service.TestFilter(ctx, who, app, "", service.FilterTestInput{Filter: &f.Filter, EventTypes: &types, Last: &last})
	if err != nil {
		p.invalid(c, e, f, err)
		return
	}
	p.endpointFormPage(c, http.StatusOK, e, f, nil, &out)
}

// verdictLabel is how the filter preview names an event's verdict.
func verdictLabel(v string) string {
	switch v {
	case service.VerdictMatched:
		return "delivered"
	case service.VerdictNotMatched:
		return "filtered out"
	case service.VerdictError:
		return "filter error"
	case service.VerdictNotSubscribed:
		return "not subscribed"
	}
	return v
}
