package app

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hookrelay/activities"
	"hookrelay/api"
	"hookrelay/delivery"
	"hookrelay/dispatch"
	"hookrelay/portal"
	"hookrelay/service"
	"hookrelay/store"
	"hookrelay/worker"
)

// startWorker starts the worker role's services: the Temporal worker with
// its activities, the dispatcher with its sender, the pruner and, for a
// process without the API (ownMetrics), its own /metrics.
func (st *Stack) startWorker(opts Options, ownMetrics bool) error {
	cfg, logger, tc, series := st.Config, st.Logger, st.Client, st.series
	// Concurrent attempts load, claim and record in shared statements.
	batched := store.NewBatched(st.Store)
	egressProxy, err := activities.ParseProxy(cfg.EgressProxy, cfg.EgressProxyUser, cfg.EgressProxyPassword)
	if err != nil {
		return err
	}
	traces := delivery.TraceContext(cfg.ReceiverTraces)
	if !traces.Valid() {
		return fmt.Errorf("receiver-traces %q (HOOKRELAY_RECEIVER_TRACES): want %s, %s or %s", cfg.ReceiverTraces, delivery.TraceLinked, delivery.TraceFresh, delivery.TraceOff)
	}
	acts := &activities.Activities{
		Store:          batched,
		HTTP:           activities.NewHTTPClientVia(!cfg.AllowPrivateTargets, nil, egressProxy),
		Egress:         &activities.Egress{Guarded: !cfg.AllowPrivateTargets},
		UserAgent:      "hookrelay/" + api.Version,
		Logger:         logger.With("component", "delivery"),
		Metrics:        series,
		Shares:         &activities.Shares{PerEndpoint: cfg.EndpointShare},
		Breaker:        &activities.Breaker{Misses: cfg.BreakerMisses},
		Local:          &activities.LocalFirsts{},
		Completer:      tc,
		Tracing:        st.Tracing,
		ReceiverTraces: traces,
	}
	d := &dispatch.Dispatcher{Pool: st.Pool, Client: tc, TaskQueue: opts.TaskQueue, Batch: cfg.DispatchBatch,
		NoEagerStart: !cfg.EagerStart, CarrierSize: cfg.CarrierSize, CarrierMin: cfg.CarrierMin, Logger: logger.With("component", "dispatcher"),
		Metrics: series, Tracing: st.Tracing, Sequencer: acts, Sender: acts, Mode: dispatch.Mode(cfg.FirstAttempts)}
	// The worker's first attempts give their app's place back to this
	// dispatcher (ModeWorkflow).
	acts.FirstBegun = d.FirstBegun
	w, err := worker.New(tc, acts, worker.Options{TaskQueue: opts.TaskQueue, MaxConcurrentActivities: cfg.WorkerConcurrency,
		StopTimeout: cfg.ShutdownTimeout / 2, RunSequence: d.RunSequence})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	st.services.start(&workerService{worker: w, acts: acts, batched: batched, drain: cfg.ShutdownTimeout / 2})
	st.Dispatcher = d
	st.services.start(d)
	st.services.start(&pruner{store: st.Store, keep: cfg.Retention, logger: logger.With("component", "pruner")})
	if cfg.MetricsAddr == "" || !ownMetrics {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(st.Metrics, promhttp.HandlerOpts{}))
	// A liveness check for the worker's container (hookrelay probe).
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	svc, err := st.listen("metrics", cfg.MetricsAddr, mux, api.ServerOptions{})
	if err != nil {
		return err
	}
	st.MetricsAddr = svc.listener.Addr().String()
	st.services.start(svc)
	return nil
}

// startAPI starts the API role's services: the REST API and the portal on
// one HTTP server, both adapters over one service, and the API's watchers.
func (st *Stack) startAPI() error {
	cfg, logger, series := st.Config, st.Logger, st.series
	engine := dispatch.Engine{Client: st.Client, Namespace: cfg.TemporalNamespace}
	var local api.Waker
	if st.Dispatcher != nil {
		// The worker role runs in this process: ingest wakes its dispatcher.
		local = st.Dispatcher
	}
	// The REST API and the portal validate, authorize and audit through it.
	svc := service.New(service.Options{Store: st.Store, Engine: engine, Logger: logger.With("component", "service"),
		AllowPrivateTargets: cfg.AllowPrivateTargets, Retention: cfg.Retention, LinkSigner: linkSigner(cfg.SecretKey), Dispatcher: local})
	srv := api.New(api.Options{Store: st.Store, Engine: engine, Logger: logger.With("component", "api"), Service: svc,
		AllowPrivateTargets: cfg.AllowPrivateTargets, MaxBacklog: cfg.MaxBacklog, AuthFailuresPerMinute: cfg.AuthFailuresPerMinute,
		Metrics: series, Gatherer: st.Metrics, Retention: cfg.Retention,
		LinkSigner: linkSigner(cfg.SecretKey), PublicURL: cfg.PublicURL,
		IngestRate: cfg.IngestRate, IngestBurst: cfg.IngestBurst, TrustedProxies: cfg.TrustedProxies, Tracing: st.Tracing, Dispatcher: local})
	st.services.start(watcher("backlog watcher", srv.WatchBacklog))
	st.services.start(watcher("revocation watcher", srv.WatchRevocations))
	apiHandler := srv.Handler()
	pt, err := portal.New(portal.Options{Service: svc, Store: st.Store, LinkSigner: linkSigner(cfg.SecretKey),
		InsecureCookies: cfg.Dev, FrameAncestors: strings.Fields(cfg.PortalFrameAncestors), Logger: logger.With("component", "portal")})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(portal.Prefix, pt.Handler())
	mux.Handle("/", apiHandler)
	hs, err := st.listen("http", cfg.HTTPAddr, mux, api.ServerOptions{HeaderTimeout: cfg.HTTPHeaderTimeout})
	if err != nil {
		return err
	}
	st.APIAddr = hs.listener.Addr().String()
	hs.listener = api.LimitListener(hs.listener, api.ConnsPerClientDefault, cfg.TrustedProxies...)
	st.services.start(hs)
	return nil
}

// listen binds addr for an HTTP service serving handler.
func (st *Stack) listen(name, addr string, handler http.Handler, o api.ServerOptions) (*httpService, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return &httpService{name: name, srv: api.NewHTTPServer(handler, o), listener: l, shutdown: st.Config.ShutdownTimeout}, nil
}

var _ Service = (*dispatch.Dispatcher)(nil)
