// Package api serves hookrelay's REST API with gin: apps, event types,
// endpoints and their secrets, event ingest, deliveries, attempts, replays
// and stats. Errors are application/problem+json naming the fields at fault.
package api

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hookrelay/access"
	"hookrelay/metrics"
	"hookrelay/outbox"
	"hookrelay/store"
)

// Version is sent as the User-Agent suffix and reported by /healthz.
const Version = "0.1.0"

// Engine is what the API asks of the delivery engine (Temporal): nothing
// else of it is reached from a request.
type Engine interface {
	// Healthy reports whether the engine answers.
	Healthy(ctx context.Context) error
	// NextAttemptAt asks a delivery's running workflow when its next
	// attempt is due (nil: none is scheduled now).
	NextAttemptAt(ctx context.Context, deliveryID string) (*time.Time, error)
}

// EngineQueryTimeout bounds how long a read waits for the engine's
// refinement of a figure Postgres already answers.
const EngineQueryTimeout = 2 * time.Second

// Server holds the API's dependencies.
type Server struct {
	store  *store.Store
	engine Engine
	logger *slog.Logger
	// allowPrivate permits loopback/private endpoint URLs (dev mode).
	allowPrivate bool
	maxBacklog   int
	backlog      atomic.Int64 // sampled outbox size
	keys         keyCache
	authFailures authLimiter
	metrics      *metrics.Sender
	gatherer     prometheus.Gatherer
	retention    time.Duration
	links        access.Signer
	publicBase   string
}

// Options configures the API.
type Options struct {
	Store *store.Store
	// Engine answers health and next-attempt queries; nil reports the
	// engine as not configured.
	Engine Engine
	// Logger receives the access log and failures. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// AllowPrivateTargets permits http and private addresses (dev mode).
	AllowPrivateTargets bool
	// MaxBacklog is the outbox size past which ingest sheds (0 = never);
	// it takes effect while WatchBacklog runs.
	MaxBacklog int
	// Retention is how long finished deliveries are kept: a delivery
	// asked for past it answers 410. Zero answers 404.
	Retention time.Duration
	// Metrics receives the ingest series; nil records nothing.
	Metrics *metrics.Sender
	// Gatherer is served on GET /metrics (Prometheus text format); nil
	// serves no /metrics.
	Gatherer prometheus.Gatherer
	// AuthFailuresPerMinute is how many failed authentications a client
	// address may make per minute; past it every request from it is a bare
	// 429 with Retry-After until the minute ends. Defaults to
	// AuthFailuresPerMinuteDefault; negative disables the limit.
	AuthFailuresPerMinute int
	// LinkSigner signs portal link tokens.
	LinkSigner access.Signer
	// PublicURL is the base URL users reach the API at, for portal links.
	// Defaults to the scheme and host of the request that made the link.
	PublicURL string
}

// New returns the API server.
func New(opts Options) *Server {
	limit := opts.AuthFailuresPerMinute
	if limit == 0 {
		limit = AuthFailuresPerMinuteDefault
	}
	return &Server{store: opts.Store, engine: opts.Engine, logger: cmp.Or(opts.Logger, slog.Default()),
		allowPrivate: opts.AllowPrivateTargets, maxBacklog: opts.MaxBacklog, authFailures: authLimiter{limit: limit},
		metrics: opts.Metrics, gatherer: opts.Gatherer, retention: opts.Retention, links: opts.LinkSigner, publicBase: opts.PublicURL}
}

// Handler returns the HTTP handler with every route.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// The client address is the connection's: no X-Forwarded-For from an
	// untrusted client picks its own rate-limit bucket.
	_ = r.SetTrustedProxies(nil)
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
	if s.gatherer != nil {
		// Aggregate figures only, no IDs and no secrets; scrape it from the
		// operator's network.
		r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{})))
	}

	r.GET("/openapi.json", s.openapi)
	handlers := s.handlers()
	for _, op := range operations() {
		h, ok := handlers[op.method+" "+op.path]
		if !ok {
			panic("api: no handler for " + op.method + " " + op.path)
		}
		chain := []gin.HandlerFunc{s.authenticate, authorize(op)}
		if audited(op) {
			chain = append(chain, s.audit)
		}
		r.Handle(op.method, ginPath(op.path), append(chain, h)...)
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
		"POST /v1/api-keys":                                         s.createKey,
		"GET /v1/api-keys":                                          s.listKeys,
		"DELETE /v1/api-keys/{key}":                                 s.revokeKey,
		"POST /v1/apps/{app}/portal-links":                          s.createPortalLink,
		"GET /v1/apps/{app}/audit-log":                              s.listAudit,
		"GET /v1/apps/{app}/event-types":                            s.listAppEventTypes,
		"POST /v1/apps/{app}/endpoints/{ep}/test":                   s.testEndpoint,
	}
}

// ginPath turns /a/{b} into /a/:b.
func ginPath(p string) string {
	return strings.NewReplacer("{", ":", "}", "").Replace(p)
}

// backlogInterval is how often WatchBacklog samples the outbox.
const backlogInterval = 250 * time.Millisecond

// WatchBacklog samples the outbox size until ctx ends; ingest sheds load
// with 503 + Retry-After while it exceeds MaxBacklog, so a stalled
// dispatcher never hides behind fast 2xx answers.
func (s *Server) WatchBacklog(ctx context.Context) {
	if s.maxBacklog <= 0 {
		return
	}
	t := time.NewTicker(backlogInterval)
	defer t.Stop()
	for {
		// Counting stops at the bound: past it the exact size does not matter.
		n, err := outbox.Backlog(ctx, s.store.Pool(), s.maxBacklog+1)
		if err == nil {
			s.backlog.Store(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// shed answers 503 when the outbox backlog is past its bound.
func (s *Server) shed(c *gin.Context) bool {
	if s.maxBacklog > 0 && s.backlog.Load() > int64(s.maxBacklog) {
		c.Header("Retry-After", "1")
		problem(c, http.StatusServiceUnavailable, fmt.Sprintf("delivery backlog is over %d events; retry shortly (nothing already accepted is affected)", s.maxBacklog))
		return true
	}
	return false
}

func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.logger.Debug("http", "method", c.Request.Method, "route", c.FullPath(), "status", c.Writer.Status(), "duration_ms", time.Since(start).Milliseconds())
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
	if s.engine == nil {
		checks["temporal"] = "not configured"
		status = http.StatusServiceUnavailable
	} else if err := s.engine.Healthy(ctx); err != nil {
		checks["temporal"] = "unreachable"
		status = http.StatusServiceUnavailable
	} else {
		checks["temporal"] = "ok"
	}
	c.JSON(status, checks)
}
