package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/store"
)

type appRequest struct {
	Name      *string `json:"name"`
	Retention *string `json:"retention"`
}

// appView is an app as the API shows it.
type appView struct {
	store.App
	// Retention is the app's override of the server's retention, absent
	// when it keeps the server's.
	Retention string `json:"retention,omitempty"`
}

func viewApp(a store.App) appView {
	v := appView{App: a}
	if a.Retention > 0 {
		v.Retention = a.Retention.String()
	}
	return v
}

// retention parses req's retention ("" goes back to the server's).
func retention(c *gin.Context, req appRequest) (*time.Duration, bool) {
	if req.Retention == nil {
		return nil, true
	}
	var d time.Duration
	if *req.Retention != "" {
		var err error
		d, err = time.ParseDuration(*req.Retention)
		if err != nil || d < MinRetention || d > MaxRetention {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("retention must be a Go duration from %s to %s, or \"\" for the server's", MinRetention, MaxRetention), "retention")
			return nil, false
		}
	}
	return &d, true
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
	keep, ok := retention(c, req)
	if !ok {
		return
	}
	a := store.App{Name: *req.Name}
	if keep != nil {
		a.Retention = *keep
	}
	a, err := s.store.CreateApp(c.Request.Context(), a)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, viewApp(a))
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
	views := make([]appView, len(apps))
	for i, a := range apps {
		views[i] = viewApp(a)
	}
	list(c, p, views, func(a appView) string { return a.ID })
}

func (s *Server) getApp(c *gin.Context) {
	a, err := s.store.GetApp(c.Request.Context(), c.Param("app"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, viewApp(a))
}

// patchApp changes the fields given: name, retention.
func (s *Server) patchApp(c *gin.Context) {
	var req appRequest
	if !bind(c, &req) || (req.Name != nil && !validName(c, req.Name)) {
		return
	}
	keep, ok := retention(c, req)
	if !ok {
		return
	}
	a, err := s.store.UpdateApp(c.Request.Context(), c.Param("app"), store.AppPatch{Name: req.Name, Retention: keep})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, viewApp(a))
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
