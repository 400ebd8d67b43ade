package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"hookrelay/store"
)

type appRequest struct {
	Name *string `json:"name"`
}

func validName(c *gin.Context, name *string) bool {
	if name == nil || strings.TrimSpace(*name) == "" || len(*name) > MaxNameLength {
		problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("name is required (1–%d characters)", MaxNameLength), "name")
		return false
	}
	return true
}

func (s *Server) createApp(c *gin.Context) {
	var req appRequest
	if !bind(c, &req) || !validName(c, req.Name) {
		return
	}
	a, err := s.store.CreateApp(c.Request.Context(), *req.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, a)
}

func (s *Server) listApps(c *gin.Context) {
	p, ok := page(c)
	if !ok {
		return
	}
	apps, err := s.store.ListApps(c.Request.Context(), p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, apps, func(a store.App) string { return a.ID })
}

func (s *Server) getApp(c *gin.Context) {
	a, err := s.store.GetApp(c.Request.Context(), c.Param("app"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a)
}

func (s *Server) patchApp(c *gin.Context) {
	var req appRequest
	if !bind(c, &req) || !validName(c, req.Name) {
		return
	}
	a, err := s.store.RenameApp(c.Request.Context(), c.Param("app"), *req.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a)
}

// deleteApp deletes an app; its workflows are canceled through the outbox
// in the same transaction.
func (s *Server) deleteApp(c *gin.Context) {
	if c.Param("app") == store.OperationsApp {
		problem(c, http.StatusConflict, store.OperationsApp+" receives operational webhooks and cannot be deleted; delete its endpoints instead", "app")
		return
	}
	if err := s.store.DeleteApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
