package api

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"hookrelay/service"
)

func (s *Server) createApp(c *gin.Context) {
	var in service.AppInput
	if !bind(c, &in) {
		return
	}
	a, err := s.svc.CreateApp(c.Request.Context(), principal(c), in)
	s.answer(c, http.StatusCreated, a, err)
}

func (s *Server) listApps(c *gin.Context) {
	l, err := s.svc.ListApps(c.Request.Context(), principal(c), pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) getApp(c *gin.Context) {
	a, err := s.svc.GetApp(c.Request.Context(), principal(c), c.Param("app"))
	s.answer(c, http.StatusOK, a, err)
}

// patchApp changes the fields given: name, retention.
func (s *Server) patchApp(c *gin.Context) {
	var in service.AppInput
	if !bind(c, &in) {
		return
	}
	a, err := s.svc.PatchApp(c.Request.Context(), principal(c), c.Param("app"), in)
	s.answer(c, http.StatusOK, a, err)
}

func (s *Server) deleteApp(c *gin.Context) {
	s.answer(c, http.StatusNoContent, nil, s.svc.DeleteApp(c.Request.Context(), principal(c), c.Param("app")))
}

func (s *Server) createEventType(c *gin.Context) {
	var in service.EventTypeInput
	if !bind(c, &in) {
		return
	}
	et, err := s.svc.CreateEventType(c.Request.Context(), principal(c), in)
	s.answer(c, http.StatusCreated, et, err)
}

func (s *Server) listEventTypes(c *gin.Context) {
	l, err := s.svc.ListEventTypes(c.Request.Context(), principal(c), pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) getEventType(c *gin.Context) {
	et, err := s.svc.GetEventType(c.Request.Context(), principal(c), c.Param("name"))
	s.answer(c, http.StatusOK, et, err)
}

// patchEventType describes a type; it joins the operator's catalog.
func (s *Server) patchEventType(c *gin.Context) {
	var in service.EventTypeInput
	if !bind(c, &in) {
		return
	}
	et, err := s.svc.PatchEventType(c.Request.Context(), principal(c), c.Param("name"), in)
	s.answer(c, http.StatusOK, et, err)
}

// listAppEventTypes is the catalog as an app's keys and portal see it.
func (s *Server) listAppEventTypes(c *gin.Context) {
	l, err := s.svc.ListAppEventTypes(c.Request.Context(), principal(c), c.Param("app"), pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) createKey(c *gin.Context) {
	var in service.KeyInput
	if !bind(c, &in) {
		return
	}
	k, err := s.svc.CreateKey(c.Request.Context(), principal(c), in)
	s.answer(c, http.StatusCreated, k, err)
}

func (s *Server) listKeys(c *gin.Context) {
	l, err := s.svc.ListKeys(c.Request.Context(), principal(c), pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}

func (s *Server) revokeKey(c *gin.Context) {
	if err := s.svc.RevokeKey(c.Request.Context(), principal(c), c.Param("key")); err != nil {
		s.fail(c, err)
		return
	}
	// This process trusts no key it verified before the revocation; the
	// others follow within RevocationPollInterval.
	s.keys.flush()
	c.Status(http.StatusNoContent)
}

func (s *Server) createPortalLink(c *gin.Context) {
	var in service.PortalLinkInput
	if !bind(c, &in) {
		return
	}
	l, err := s.svc.CreatePortalLink(c.Request.Context(), principal(c), c.Param("app"), in)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"id": l.ID, "url": s.publicURL(c) + "/portal/open?token=" + url.QueryEscape(l.Token),
		"capabilities": l.Capabilities, "endpoint_ids": l.EndpointIDs, "expires_at": l.ExpiresAt})
}

func (s *Server) listAudit(c *gin.Context) {
	l, err := s.svc.ListAudit(c.Request.Context(), principal(c), c.Param("app"), pageQuery(c))
	s.answer(c, http.StatusOK, l, err)
}
