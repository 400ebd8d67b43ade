// Package api serves hookrelay's REST API with gin: apps, event types,
// endpoints and their secrets, event ingest, deliveries, attempts, replays
// and stats. Errors are application/problem+json naming the fields at fault.
package api

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hookrelay/access"
	"hookrelay/internal/tracing"
	"hookrelay/metrics"
	"hookrelay/outbox"
	"hookrelay/service"
	"hookrelay/store"
)

// Version is sent as the User-Agent suffix and reported by /healthz.
const Version = "0.1.0"

// Engine is what the API asks of the delivery engine (Temporal).
type Engine = service.Engine

// Server holds the API's dependencies.
type Server struct {
	store        *store.Store
	engine       Engine
	logger       *slog.Logger
	backlogs     *backlogs
	keys         keyCache
	authFailures authLimiter
	proxies      proxies
	ingest       *tokenBuckets
	types        *typeBound
	metrics      *metrics.Sender
	gatherer     prometheus.Gatherer
	publicBase   string
	// publisher publishes events (on the store's hot pool) and keeps each
	// app's compiled filters: the service's.
	publisher *outbox.Publisher
	// svc serves every operation but ingest.
	svc *service.Service
	// tracing traces ingest requests; nil is off.
	tracing *tracing.Tracing
	// dispatcher is this process's dispatcher; nil when it has none.
	dispatcher Waker
	// taker is dispatcher when its sender takes ingested rows (Taker).
	taker Taker
}

// Waker is a dispatcher in the API's process (dispatch.Dispatcher).
type Waker = service.Waker

// Taker is a dispatcher in the API's process whose sender takes the start
// rows an ingest leased to it (dispatch.Dispatcher; see outbox.Handoff):
// their first attempts go out with no dispatcher round.
type Taker interface {
	// Handoff says whether an ingest of app may lease its rows to the
	// sender, and how.
	Handoff(app string) (outbox.Handoff, bool)
	// Take takes the rows a committed publish leased (those it held until
	// their endpoint's probe, Held, are only counted).
	Take(rows []outbox.Leased)
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
	// MaxBacklog is how many outbox rows of one app (its events' starts,
	// the held rows of its paused endpoints, its replays and cancels) past
	// which that app's ingest answers 429 with Retry-After; other apps are
	// not affected. 0 never sheds. WatchBacklog keeps the counts fresh.
	MaxBacklog int
	// IngestRate is how many events per second one app key may publish,
	// sustained; past it (and IngestBurst) ingest answers 429 with
	// Retry-After. Defaults to IngestRateDefault; negative disables it.
	IngestRate int
	// IngestBurst is how many events an app key may publish at once.
	// Defaults to IngestBurstDefault.
	IngestBurst int
	// MaxAppEventTypes bounds the event types an app's own events may add
	// to its catalog (the operator's types aside); an event of one more new
	// type is a 422 naming type. Defaults to MaxAppEventTypesDefault.
	MaxAppEventTypes int
	// TrustedProxies are the reverse proxies and load balancers (CIDRs)
	// whose X-Forwarded-For or Forwarded header names the client, for the
	// authentication-failure limit (give LimitListener the same list).
	// Defaults to none: the client is the connection's peer.
	TrustedProxies []netip.Prefix
	// Retention is how long finished deliveries are kept: a delivery
	// asked for past it answers 410. Defaults to store.RetentionDefault.
	Retention time.Duration
	// Metrics receives the ingest series; nil records nothing.
	Metrics *metrics.Sender
	// Gatherer is served on GET /metrics (Prometheus text format); nil
	// serves no /metrics.
	Gatherer prometheus.Gatherer
	// AuthFailuresPerMinute is how many failed authentications a client
	// address (see TrustedProxies) may make per minute; past it every
	// request from it without a valid key is a bare 429 with Retry-After
	// until the minute ends, while a valid key is still served. Defaults to
	// AuthFailuresPerMinuteDefault; negative disables the limit.
	AuthFailuresPerMinute int
	// LinkSigner signs portal link tokens.
	LinkSigner access.Signer
	// PublicURL is the base URL users reach the API at, for portal links.
	// Defaults to the scheme and host of the request that made the link.
	PublicURL string
	// Tracing makes each ingest request a span, continuing a traceparent
	// the producer sent, and stores it with the event; nil is off.
	Tracing *tracing.Tracing
	// Dispatcher is the dispatcher of the API's own process: an ingest
	// whose publish sent no NOTIFY asks it for a round by its rows' claim
	// time once they committed (see dispatch.Dispatcher.Wake), and, when it
	// is a Taker, leases the rows due at once to its sender. Defaults to
	// nil: an API in a process of its own, whose dispatchers find such
	// rows by their look after each round.
	Dispatcher Waker
	// Service serves the operations; nil builds one of Store, Engine,
	// Logger, AllowPrivateTargets, Retention and LinkSigner (give the
	// portal the same one).
	Service *service.Service
}

// New returns the API server.
func New(opts Options) *Server {
	logger := cmp.Or(opts.Logger, slog.Default())
	taker, _ := opts.Dispatcher.(Taker)
	svc := opts.Service
	if svc == nil {
		svc = service.New(service.Options{Store: opts.Store, Engine: opts.Engine, Logger: logger, AllowPrivateTargets: opts.AllowPrivateTargets,
			Retention: opts.Retention, LinkSigner: opts.LinkSigner, Dispatcher: opts.Dispatcher})
	}
	if opts.Metrics != nil {
		// Every publish through this service counts its filter errors.
		svc.Publisher().WithFilterErrors(opts.Metrics)
	}
	return &Server{store: opts.Store, engine: opts.Engine, logger: logger,
		backlogs:     newBacklogs(opts.Store, opts.MaxBacklog),
		authFailures: authLimiter{limit: cmp.Or(opts.AuthFailuresPerMinute, AuthFailuresPerMinuteDefault)},
		proxies:      opts.TrustedProxies,
		ingest:       newTokenBuckets(cmp.Or(opts.IngestRate, IngestRateDefault), cmp.Or(opts.IngestBurst, IngestBurstDefault)),
		types:        newTypeBound(opts.Store, cmp.Or(opts.MaxAppEventTypes, MaxAppEventTypesDefault)),
		metrics:      opts.Metrics, gatherer: opts.Gatherer, publicBase: opts.PublicURL,
		publisher: svc.Publisher(), svc: svc, tracing: opts.Tracing, dispatcher: opts.Dispatcher, taker: taker}
}

// Handler returns the HTTP handler with every route.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// gin's ClientIP is not used: limits count s.proxies.clientAddr, which
	// reads X-Forwarded-For only from a trusted proxy.
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
	for _, op := range operations() {
		h := func(c *gin.Context) { op.handle(s, c) }
		// Audit is the service's: it records each state-changing call that
		// succeeded, whichever adapter made it.
		r.Handle(op.method, ginPath(op.path), s.authenticate, authorize(op), h)
	}
	return r
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

// ready answers whether this API process can take events: Postgres is
// what ingest needs (503 without it). Temporal is what delivery needs, not
// ingest: unreachable, the answer is still 200, with "status": "degraded",
// and accepted events wait in the outbox until it is back.
func (s *Server) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := gin.H{"status": readyOK}
	status := http.StatusOK
	if err := s.store.Ping(ctx); err != nil {
		checks["postgres"] = "unreachable"
		checks["status"], status = readyUnavailable, http.StatusServiceUnavailable
	} else {
		checks["postgres"] = "ok"
	}
	degraded := true
	switch err := s.temporalHealth(ctx); {
	case s.engine == nil:
		checks["temporal"] = "not configured"
	case err != nil:
		checks["temporal"] = "unreachable"
		// A namespace without hookrelay's search attributes would take no
		// workflow start: say which are missing.
		var namespace interface{ Summary() string }
		if errors.As(err, &namespace) {
			checks["temporal"] = namespace.Summary()
		}
	default:
		checks["temporal"], degraded = "ok", false
	}
	if degraded && status == http.StatusOK {
		checks["status"] = readyDegraded
	}
	c.JSON(status, checks)
}

// temporalHealth is the engine's health, nil without an engine.
func (s *Server) temporalHealth(ctx context.Context) error {
	if s.engine == nil {
		return nil
	}
	return s.engine.Healthy(ctx)
}

// Readiness statuses (/readyz's "status").
const (
	readyOK          = "ok"
	readyDegraded    = "degraded"
	readyUnavailable = "unavailable"
)
