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

	v1 := r.Group("/v1", s.authenticate)
	v1.POST("/apps", s.createApp)
	v1.GET("/apps", s.listApps)
	v1.GET("/apps/:app", s.getApp)
	v1.PATCH("/apps/:app", s.patchApp)
	v1.DELETE("/apps/:app", s.deleteApp)

	v1.POST("/event-types", s.createEventType)
	v1.GET("/event-types", s.listEventTypes)
	v1.GET("/event-types/:name", s.getEventType)
	v1.PATCH("/event-types/:name", s.patchEventType)

	app := v1.Group("/apps/:app")
	app.POST("/endpoints", s.createEndpoint)
	app.GET("/endpoints", s.listEndpoints)
	app.GET("/endpoints/:ep", s.getEndpoint)
	app.PATCH("/endpoints/:ep", s.patchEndpoint)
	app.DELETE("/endpoints/:ep", s.deleteEndpoint)
	app.POST("/endpoints/:ep/secret/rotate", s.rotateSecret)
	app.POST("/endpoints/:ep/secret/revoke-previous", s.revokePrevious)
	app.POST("/endpoints/:ep/replay", s.replayEndpoint)

	app.POST("/events", s.createEvent)
	app.GET("/events", s.listEvents)
	app.GET("/events/:evt", s.getEvent)

	app.GET("/deliveries", s.listDeliveries)
	app.GET("/deliveries/:dlv", s.getDelivery)
	app.GET("/deliveries/:dlv/attempts", s.listAttempts)
	app.POST("/deliveries/:dlv/replay", s.replayDelivery)
	app.GET("/stats", s.stats)
	return r
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
