// Package api serves hookrelay's REST API with gin: apps, event types,
// endpoints and their secrets, event ingest, deliveries, attempts, replays
// and stats. Errors are application/problem+json naming the fields at fault.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"

	"hookrelay/store"
)

// Version is sent as the User-Agent suffix and reported by /healthz.
const Version = "0.1.0"

// Server holds the API's dependencies.
type Server struct {
	store    *store.Store
	temporal client.Client
	logger   *slog.Logger
	// allowPrivate permits loopback/private endpoint URLs (dev mode).
	allowPrivate bool
}

// Options configures the API.
type Options struct {
	Store    *store.Store
	Temporal client.Client
	Logger   *slog.Logger
	// AllowPrivateTargets permits http and private addresses (dev mode).
	AllowPrivateTargets bool
}

// New returns the API server.
func New(opts Options) *Server {
	return &Server{store: opts.Store, temporal: opts.Temporal, logger: opts.Logger, allowPrivate: opts.AllowPrivateTargets}
}

// Handler returns the HTTP handler with every route.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// Order: recover first so a panic in any later middleware becomes a
	// 500, then the access log, then (per group) authentication.
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		s.logger.Error("panic", "route", c.FullPath(), "err", err)
		problem(c, http.StatusInternalServerError, "internal error")
	}))
	r.Use(s.accessLog)
	r.NoRoute(func(c *gin.Context) { problem(c, http.StatusNotFound, "no such route") })
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok", "version": Version}) })
	r.GET("/readyz", s.ready)

	r.GET("/openapi.json", s.openapi)
	handlers := s.handlers()
	for _, op := range operations() {
		h, ok := handlers[op.method+" "+op.path]
		if !ok {
			panic("api: no handler for " + op.method + " " + op.path)
		}
		r.Handle(op.method, ginPath(op.path), s.authenticate, h)
	}
	return r
}

// handlers maps each operation ("METHOD /path/{param}") to its handler.
func (s *Server) handlers() map[string]gin.HandlerFunc {
	return map[string]gin.HandlerFunc{
		"POST /v1/apps":                                             s.createApp,
		"GET /v1/apps":                                              s.listApps,
		"GET /v1/apps/{app}":                                        s.getApp,
		"PATCH /v1/apps/{app}":                                      s.patchApp,
		"DELETE /v1/apps/{app}":                                     s.deleteApp,
		"POST /v1/event-types":                                      s.createEventType,
		"GET /v1/event-types":                                       s.listEventTypes,
		"GET /v1/event-types/{name}":                                s.getEventType,
		"PATCH /v1/event-types/{name}":                              s.patchEventType,
		"POST /v1/apps/{app}/endpoints":                             s.createEndpoint,
		"GET /v1/apps/{app}/endpoints":                              s.listEndpoints,
		"GET /v1/apps/{app}/endpoints/{ep}":                         s.getEndpoint,
		"PATCH /v1/apps/{app}/endpoints/{ep}":                       s.patchEndpoint,
		"DELETE /v1/apps/{app}/endpoints/{ep}":                      s.deleteEndpoint,
		"POST /v1/apps/{app}/endpoints/{ep}/secret/rotate":          s.rotateSecret,
		"POST /v1/apps/{app}/endpoints/{ep}/secret/revoke-previous": s.revokePrevious,
		"POST /v1/apps/{app}/endpoints/{ep}/replay":                 s.replayEndpoint,
		"POST /v1/apps/{app}/events":                                s.createEvent,
		"GET /v1/apps/{app}/events":                                 s.listEvents,
		"GET /v1/apps/{app}/events/{evt}":                           s.getEvent,
		"GET /v1/apps/{app}/deliveries":                             s.listDeliveries,
		"GET /v1/apps/{app}/deliveries/{dlv}":                       s.getDelivery,
		"GET /v1/apps/{app}/deliveries/{dlv}/attempts":              s.listAttempts,
		"POST /v1/apps/{app}/deliveries/{dlv}/replay":               s.replayDelivery,
		"GET /v1/apps/{app}/stats":                                  s.stats,
	}
}

// ginPath turns /a/{b} into /a/:b.
func ginPath(p string) string {
	return strings.NewReplacer("{", ":", "}", "").Replace(p)
}

func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.logger.Debug("http", "method", c.Request.Method, "route", c.FullPath(), "status", c.Writer.Status(), "duration_ms", time.Since(start).Milliseconds())
}

// authenticate requires "Authorization: Bearer <key>" naming a stored key.
// Every failure answers the same bare 401.
func (s *Server) authenticate(c *gin.Context) {
	key, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok || key == "" {
		problem(c, http.StatusUnauthorized, "")
		return
	}
	id, err := s.store.Authenticate(c.Request.Context(), key)
	if err != nil {
		if store.IsUnavailable(err) {
			s.fail(c, err)
			return
		}
		problem(c, http.StatusUnauthorized, "")
		return
	}
	c.Set("key_id", id)
}

func (s *Server) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := gin.H{}
	status := http.StatusOK
	if err := s.store.Ping(ctx); err != nil {
		checks["postgres"] = "unreachable"
		status = http.StatusServiceUnavailable
	} else {
		checks["postgres"] = "ok"
	}
	if s.temporal == nil {
		checks["temporal"] = "not configured"
		status = http.StatusServiceUnavailable
	} else if _, err := s.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		checks["temporal"] = "unreachable"
		status = http.StatusServiceUnavailable
	} else {
		checks["temporal"] = "ok"
	}
	c.JSON(status, checks)
}
