package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/delivery"
	"hookrelay/service"
)

func (s *Server) listDeliveries(c *gin.Context) {
	since, until, ok := rangeQuery(c)
	if !ok {
		return
	}
	q := service.DeliveryQuery{Status: delivery.Status(c.Query("status")), EndpointIDs: c.QueryArray("endpoint_id"), EventID: c.Query("event_id"),
		EventType: c.Query("event_type"), Since: since, Until: until}
	l, err := s.svc.ListDeliveries(c.Request.Context(), principal(c), c.Param("app"), q, pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) getDelivery(c *gin.Context) {
	d, err := s.svc.GetDelivery(c.Request.Context(), principal(c), c.Param("app"), c.Param("dlv"))
	s.answer(c, http.StatusOK, d, err)
}

func (s *Server) listAttempts(c *gin.Context) {
	atts, err := s.svc.ListAttempts(c.Request.Context(), principal(c), c.Param("app"), c.Param("dlv"))
	s.answer(c, http.StatusOK, gin.H{"data": atts}, err)
}

func (s *Server) replayDelivery(c *gin.Context) {
	err := s.svc.ReplayDelivery(c.Request.Context(), principal(c), c.Param("app"), c.Param("dlv"))
	s.answer(c, http.StatusAccepted, gin.H{"replayed": 1}, err)
}

func (s *Server) releaseDelivery(c *gin.Context) {
	err := s.svc.ReleaseDelivery(c.Request.Context(), principal(c), c.Param("app"), c.Param("dlv"))
	s.answer(c, http.StatusAccepted, gin.H{"released": 1}, err)
}

func (s *Server) replayEndpoint(c *gin.Context) {
	var in service.ReplayRange
	if !bind(c, &in) {
		return
	}
	n, err := s.svc.ReplayEndpoint(c.Request.Context(), principal(c), c.Param("app"), c.Param("ep"), in)
	if in.DryRun {
		s.answer(c, http.StatusOK, gin.H{"would_replay": n}, err)
		return
	}
	s.answer(c, http.StatusAccepted, gin.H{"replayed": n}, err)
}

func (s *Server) stats(c *gin.Context) {
	st, err := s.svc.Stats(c.Request.Context(), principal(c), c.Param("app"), intQuery(c, "last"), c.QueryArray("endpoint_id"))
	s.answer(c, http.StatusOK, st, err)
}
