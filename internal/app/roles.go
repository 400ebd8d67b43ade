package app

import (
	"context"
	"errors"
	"fmt"
	"hookrelay/activities"
	"hookrelay/api"
	"hookrelay/config"
	"hookrelay/dispatch"
	"hookrelay/metrics"
	"hookrelay/portal"
	"hookrelay/store"
	"hookrelay/worker"
	"net"
	"net/http"
	"strings"

	"go.temporal.io/sdk/client"
)

// startWorker starts the worker role: the Temporal worker with its
// activities, the dispatcher with its sender, the pruner and, for a process
// without the API (ownMetrics), its own /metrics.
func (st *Stack) startWorker(tc client.Client, series *metrics.Sender, opts Options, ownMetrics bool) error {
	cfg, logger, pool := st.Config, st.Logger, st.Pool
	// Concurrent attempts load, claim and record in shared statements.
	batched := store.NewBatched(st.Store)
	egressProxy, err := activities.ParseProxy(cfg.EgressProxy, cfg.EgressProxyUser, cfg.EgressProxyPassword)
	if err != nil {
		return err
	}
	acts := &activities.Activities{
		Store:     batched,
		HTTP:      activities.NewHTTPClientVia(!cfg.AllowPrivateTargets, nil, egressProxy),
		Egress:    &activities.Egress{Guarded: !cfg.AllowPrivateTargets},
		UserAgent: "hookrelay/" + api.Version,
		Logger:    logger.With("component", "delivery"),
		Metrics:   series,
		Shares:    &activities.Shares{PerEndpoint: cfg.EndpointShare},
		Completer: tc,
	}
	w, err := worker.New(tc, acts, worker.Options{TaskQueue: opts.TaskQueue, MaxConcurrentActivities: cfg.WorkerConcurrency, StopTimeout: cfg.ShutdownTimeout / 2})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	st.services.run("worker", func(ctx context.Context) error {
		<-ctx.Done()
		w.Stop()
		// Requests on the wire finish and are recorded (each is bounded
		// by its own timeout).
		dctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout/2)
		defer cancel()
		acts.Open.Drain(dctx)
		batched.Close()
		return nil
	})
	d := &dispatch.Dispatcher{Pool: pool, Client: tc, TaskQueue: opts.TaskQueue, Batch: cfg.DispatchBatch, LocalActivity: cfg.LocalActivity,
		NoEagerStart: !cfg.EagerStart, CarrierSize: cfg.CarrierSize, CarrierMin: cfg.CarrierMin, Logger: logger.With("component", "dispatcher"),
		Metrics: series}
	if cfg.FirstAttempts != config.FirstAttemptsCarrier {
		d.Sender = acts
	}
	st.Dispatcher = d
	st.services.run("dispatcher", d.Run)
	st.services.run("pruner", func(ctx context.Context) error {
		return prune(ctx, st.Store, cfg.Retention, logger.With("component", "pruner"))
	})
	if cfg.MetricsAddr != "" && ownMetrics {
		if err := st.serveMetrics(cfg.MetricsAddr); err != nil {
			return err
		}
	}
	return nil
}

// startAPI starts the API role: the REST API, the portal and their
// watchers, on one HTTP server.
func (st *Stack) startAPI(tc client.Client, series *metrics.Sender) error {
	cfg, logger := st.Config, st.Logger
	srv := api.New(api.Options{Store: st.Store, Engine: dispatch.Engine{Client: tc, Namespace: cfg.TemporalNamespace}, Logger: logger.With("component", "api"),
		AllowPrivateTargets: cfg.AllowPrivateTargets, MaxBacklog: cfg.MaxBacklog, AuthFailuresPerMinute: cfg.AuthFailuresPerMinute,
		Metrics: series, Gatherer: st.Metrics, Retention: cfg.Retention,
		LinkSigner: linkSigner(cfg.SecretKey), PublicURL: cfg.PublicURL,
		IngestRate: cfg.IngestRate, IngestBurst: cfg.IngestBurst, TrustedProxies: cfg.TrustedProxies})
	st.services.run("backlog watcher", func(ctx context.Context) error { srv.WatchBacklog(ctx); return nil })
	st.services.run("revocation watcher", func(ctx context.Context) error { srv.WatchRevocations(ctx); return nil })
	apiHandler := srv.Handler()
	pt, err := portal.New(portal.Options{API: apiHandler, Store: st.Store, LinkSigner: linkSigner(cfg.SecretKey),
		InsecureCookies: cfg.Dev, FrameAncestors: strings.Fields(cfg.PortalFrameAncestors), Logger: logger.With("component", "portal")})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(portal.Prefix, pt.Handler())
	mux.Handle("/", apiHandler)
	l, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	st.APIAddr = l.Addr().String()
	l = api.LimitListener(l, api.ConnsPerClientDefault, cfg.TrustedProxies...)
	httpSrv := api.NewHTTPServer(mux, api.ServerOptions{HeaderTimeout: cfg.HTTPHeaderTimeout})
	st.services.run("http", func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			_ = httpSrv.Shutdown(sctx)
		}()
		if err := httpSrv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	return nil
}
