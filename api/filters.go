package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/service"
)

// FilterTest is the answer of a filter test.
type FilterTest = service.FilterTest

// Verdicts of a filter test, one per event.
const (
	VerdictMatched       = service.VerdictMatched
	VerdictNotMatched    = service.VerdictNotMatched
	VerdictError         = service.VerdictError
	VerdictNotSubscribed = service.VerdictNotSubscribed
)

func (s *Server) testAppFilter(c *gin.Context) { s.testFilter(c, "") }

func (s *Server) testEndpointFilter(c *gin.Context) { s.testFilter(c, c.Param("ep")) }

// testFilter evaluates the request's filter on the app's latest events,
// as fan-out would (on an endpoint's route, its own by default).
func (s *Server) testFilter(c *gin.Context, endpointID string) {
	var in service.FilterTestInput
	if c.Request.ContentLength != 0 && !bind(c, &in) {
		return
	}
	out, err := s.svc.TestFilter(c.Request.Context(), principal(c), c.Param("app"), endpointID, in)
	s.answer(c, http.StatusOK, out, err)
}
