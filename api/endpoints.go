package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"hookrelay/service"
)

// EndpointView is the API form of an endpoint.
type EndpointView = service.Endpoint

func (s *Server) createEndpoint(c *gin.Context) {
	var in service.EndpointInput
	if !bind(c, &in) {
		return
	}
	e, err := s.svc.CreateEndpoint(c.Request.Context(), principal(c), c.Param("app"), in)
	s.answer(c, http.StatusCreated, e, err)
}

func (s *Server) listEndpoints(c *gin.Context) {
	l, err := s.svc.ListEndpoints(c.Request.Context(), principal(c), c.Param("app"), pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) getEndpoint(c *gin.Context) {
	e, err := s.svc.GetEndpoint(c.Request.Context(), principal(c), c.Param("app"), c.Param("ep"))
	s.answer(c, http.StatusOK, e, err)
}

// patchEndpoint writes only the fields the request gave.
func (s *Server) patchEndpoint(c *gin.Context) {
	var in service.EndpointInput
	if !bind(c, &in) {
		return
	}
	e, err := s.svc.PatchEndpoint(c.Request.Context(), principal(c), c.Param("app"), c.Param("ep"), in)
	s.answer(c, http.StatusOK, e, err)
}

func (s *Server) deleteEndpoint(c *gin.Context) {
	s.answer(c, http.StatusNoContent, nil, s.svc.DeleteEndpoint(c.Request.Context(), principal(c), c.Param("app"), c.Param("ep")))
}

func (s *Server) rotateSecret(c *gin.Context) {
	var in service.RotateInput
	if c.Request.ContentLength != 0 && !bind(c, &in) {
		return
	}
	r, err := s.svc.RotateSecret(c.Request.Context(), principal(c), c.Param("app"), c.Param("ep"), in)
	switch {
	case err != nil:
		s.fail(c, err)
	case r.PublicKey != "":
		c.JSON(http.StatusOK, gin.H{"public_key": r.PublicKey, "previous_valid_until": r.PreviousValidUntil})
	default:
		c.JSON(http.StatusOK, gin.H{"secret": r.Secret, "previous_valid_until": r.PreviousValidUntil})
	}
}

func (s *Server) revokePrevious(c *gin.Context) {
	n, err := s.svc.RevokePrevious(c.Request.Context(), principal(c), c.Param("app"), c.Param("ep"))
	s.answer(c, http.StatusOK, gin.H{"revoked": n}, err)
}

// testEndpoint sends the endpoint a test event.
func (s *Server) testEndpoint(c *gin.Context) {
	pub, err := s.svc.SendTest(c.Request.Context(), principal(c), c.Param("app"), c.Param("ep"))
	s.answer(c, http.StatusAccepted, pub, err)
}
