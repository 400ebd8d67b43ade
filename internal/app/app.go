// Package app assembles hookrelay's processes from its parts: the dev stack
// (private Postgres, embedded Temporal and UI, API, worker, dispatcher in one
// process) and the production split (api, worker, migrate).
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"hookrelay/api"
	"hookrelay/config"
	"hookrelay/dispatch"
	"hookrelay/internal/devstack"
	"hookrelay/internal/pgcluster"
	"hookrelay/internal/temporalconn"
	"hookrelay/metrics"
	"hookrelay/migrations"
	"hookrelay/secretbox"
	"hookrelay/store"
	"hookrelay/workflows"
)

// Roles is what a process runs.
type Roles int

// Roles a process can run.
const (
	// RoleAPI is the REST API and its backlog watcher.
	RoleAPI Roles = 1 << iota
	// RoleWorker is the Temporal worker and the outbox dispatcher.
	RoleWorker
)

// Options vary how a process is assembled (tests and the bench).
type Options struct {
	// TaskQueue is the delivery task queue. Defaults to workflows.TaskQueue.
	TaskQueue string
	// SDKLogger receives the Temporal SDK's logs. Defaults to the process
	// logger.
	SDKLogger sdklog.Logger
}

// Stack is a started hookrelay process: the dev stack's infrastructure
// (when it owns it) and the roles it runs. Dev, API and Worker wait on one;
// the bench drives one.
type Stack struct {
	Config   config.Config
	Logger   *slog.Logger
	PG       *pgcluster.Cluster // private cluster (dev without a database URL)
	Temporal *devstack.Server   // embedded server (dev)
	Pool     *pgxpool.Pool
	Store    *store.Store
	Client   client.Client
	// Dispatcher is the outbox dispatcher (nil without the worker role).
	Dispatcher *dispatch.Dispatcher
	// Metrics is the process's registry, served on the API's /metrics and,
	// for a worker process, on Config.MetricsAddr.
	Metrics *prometheus.Registry
	// MetricsAddr is where a worker process serves /metrics ("" when off).
	MetricsAddr string
	// APIAddr is where the REST API listens ("" without the API role).
	APIAddr string
	closers []func() // run in reverse order by Close
	errc    chan error
	// services run under the stack's supervisor (see supervise).
	services *supervisor
}

// StartDev starts the whole product in this process: the private Postgres
// (unless cfg.DatabaseURL is set), the embedded Temporal server and UI, the
// API, the worker and the dispatcher.
func StartDev(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Stack, error) {
	st := &Stack{Config: cfg, Logger: logger, errc: make(chan error, 4)}
	if err := st.startInfra(ctx); err != nil {
		st.Close()
		return nil, err
	}
	if err := st.start(ctx, RoleAPI|RoleWorker, Options{}); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// Start connects to cfg's Postgres and Temporal and starts roles: the one
// assembly path of `hookrelay api`, `hookrelay worker`, the dev stack and
// the integration tests. Close stops it.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger, roles Roles, opts Options) (*Stack, error) {
	st := &Stack{Config: cfg, Logger: logger, errc: make(chan error, 4)}
	if err := st.start(ctx, roles, opts); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

func (st *Stack) startInfra(ctx context.Context) error {
	cfg := &st.Config
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if cfg.DatabaseURL == "" {
		logf, err := os.OpenFile(filepath.Join(cfg.DataDir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("open postgres log: %w", err)
		}
		st.closers = append(st.closers, func() { logf.Close() })
		pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(cfg.DataDir, "postgres"), Port: cfg.PostgresPort, Log: logf, Logger: st.Logger})
		if err != nil {
			return err
		}
		st.PG = pg
		st.closers = append(st.closers, func() { _ = pg.Stop() })
		if err := pgcluster.CreateDatabase(ctx, pg.URL("postgres"), "hookrelay"); err != nil {
			return err
		}
		cfg.DatabaseURL = pg.URL("hookrelay")
	}
	tserver, err := devstack.Start(ctx, devstack.Options{
		PostgresURL:      cfg.DatabaseURL,
		FrontendAddr:     cfg.TemporalAddress,
		UIAddr:           cfg.TemporalUIAddr,
		Namespace:        cfg.TemporalNamespace,
		SearchAttributes: SearchAttributes(),
		Shards:           int32(cfg.TemporalShards),
		SQLiteFile:       cfg.TemporalSQLite,
		Logger:           st.Logger.With("component", "temporal"),
	})
	if err != nil {
		return err
	}
	st.Temporal = tserver
	st.closers = append(st.closers, tserver.Stop)
	cfg.TemporalAddress = tserver.FrontendAddr()
	if cfg.AdminKey, err = fileSecret(cfg.AdminKey, filepath.Join(cfg.DataDir, "admin-key"), newAPIKey, true); err != nil {
		return err
	}
	if cfg.SecretKey, err = fileSecret(cfg.SecretKey, filepath.Join(cfg.DataDir, "secret-key"), secretbox.GenerateKey, false); err != nil {
		return err
	}
	return nil
}

// Dev runs the whole product in this process until ctx ends.
func Dev(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	started := time.Now()
	st, err := StartDev(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	attrs := []any{"api", "http://" + st.APIAddr, "temporal", st.Temporal.FrontendAddr(), "temporal_ui", uiURL(st.Temporal.UIAddr()),
		"data_dir", st.Config.DataDir, "startup", time.Since(started).Round(time.Millisecond)}
	if st.PG != nil {
		attrs = append(attrs, "postgres_dir", st.PG.Dir())
	}
	logger.Info("hookrelay dev is up", attrs...)
	return st.Wait(ctx)
}

func uiURL(addr string) string {
	if addr == "" {
		return "disabled"
	}
	return "http://" + addr
}

// SearchAttributes are the custom search attributes DeliveryWorkflow sets.
func SearchAttributes() map[string]enumspb.IndexedValueType { return workflows.SearchAttributes() }

// API runs the REST API against external Postgres and Temporal.
func API(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	return runRoles(ctx, cfg, logger, RoleAPI)
}

// Worker runs the Temporal worker and the outbox dispatcher.
func Worker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	return runRoles(ctx, cfg, logger, RoleWorker)
}

func runRoles(ctx context.Context, cfg config.Config, logger *slog.Logger, roles Roles) error {
	st, err := Start(ctx, cfg, logger, roles, Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	logger.Info("hookrelay started", "api", st.APIAddr, "temporal", cfg.TemporalAddress)
	return st.Wait(ctx)
}

// start connects to Postgres and Temporal and starts the given roles.
func (st *Stack) start(ctx context.Context, roles Roles, opts Options) error {
	cfg := st.Config
	logger := st.Logger
	if cfg.SecretKey == "" {
		return errors.New("HOOKRELAY_SECRET_KEY is required (base64 of 32 random bytes; `openssl rand -base64 32`)")
	}
	box, err := secretbox.Open(cfg.SecretKey)
	if err != nil {
		return fmt.Errorf("HOOKRELAY_SECRET_KEY: %w", err)
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("HOOKRELAY_DATABASE_URL: %w", err)
	}
	poolCfg.MaxConns = int32(cfg.DBMaxConns)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	st.Pool = pool
	st.closers = append(st.closers, pool.Close)
	if cfg.Dev {
		if _, err := migrations.Up(ctx, pool, logger); err != nil {
			return err
		}
	} else if n, err := migrations.Pending(ctx, pool); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%d migrations pending: run `hookrelay migrate` first", n)
	}
	st.Store = store.New(pool, box)
	st.Store.FailingAfter, st.Store.AutoDisableAfter = cfg.FailingAfter, cfg.AutoDisableAfter
	hotCfg := poolCfg.Copy()
	hotCfg.MaxConns = min(store.HotPoolConns, hotCfg.MaxConns)
	hotCfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, store.HotPoolSetup)
		return err
	}
	hot, err := pgxpool.NewWithConfig(ctx, hotCfg)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	st.closers = append(st.closers, hot.Close)
	st.Store.UseHotPool(hot)
	if n, err := st.Store.SealLegacyHeaders(ctx); err != nil {
		return err
	} else if n > 0 {
		logger.Info("sealed custom headers written before they were sealed", "endpoints", n)
	}
	if cfg.AdminKey != "" {
		if err := st.Store.EnsureAdminKey(ctx, cfg.AdminKey); err != nil {
			return err
		}
	}
	sdkLogger := opts.SDKLogger
	if sdkLogger == nil {
		sdkLogger = sdklog.NewStructuredLogger(logger.With("component", "sdk"))
	}
	tc, err := temporalconn.Dial(ctx, temporalSettings(cfg), sdkLogger)
	if err != nil {
		return err
	}
	st.Client = tc
	st.closers = append(st.closers, tc.Close)
	// A namespace without hookrelay's search attributes would refuse every
	// workflow start: refuse to start instead, saying what to run.
	if err := temporalconn.Check(ctx, tc, cfg.TemporalAddress, cfg.TemporalNamespace); err != nil {
		if _, unchecked := errors.AsType[*temporalconn.UncheckedError](err); !unchecked {
			return err
		}
		logger.Warn("starting without checking the namespace's search attributes", "err", err)
	}

	// The supervisor stops services in reverse start order: the HTTP server
	// stops taking requests, the backlog watcher and the dispatcher end,
	// then the worker finishes its in-flight attempts; the client, the pool
	// and the infrastructure go after it (closers).
	st.services = &supervisor{errc: st.errc, logger: logger}
	st.closers = append(st.closers, st.services.stop)
	st.Metrics = metrics.NewRegistry()
	series := metrics.NewSender(st.Metrics, cfg.MetricsEndpointLabels)
	metrics.NewState(st.Metrics, st.Store.Gauges)
	if roles&RoleWorker != 0 {
		if err := st.startWorker(tc, series, opts, roles&RoleAPI == 0); err != nil {
			return err
		}
	}
	if roles&RoleAPI != 0 {
		if err := st.startAPI(tc, series); err != nil {
			return err
		}
	}
	return nil
}

// PruneInterval is how often a worker process prunes what is past the
// retention.
const PruneInterval = time.Hour

// prune deletes what is past the retention now and every PruneInterval
// until ctx ends; a failure is logged and tried again at the next turn.
func prune(ctx context.Context, st *store.Store, keep time.Duration, logger *slog.Logger) error {
	for {
		p, err := st.Prune(ctx, time.Now(), keep)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			logger.Warn("pruning failed; will try again", "err", err, "retry_in", PruneInterval)
		case p.Deliveries+p.Events > 0:
			logger.Info("pruned", "deliveries", p.Deliveries, "events", p.Events, "older_than", keep)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(PruneInterval):
		}
	}
}

// serveMetrics serves the registry on addr's /metrics (a worker process).
func (st *Stack) serveMetrics(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	st.MetricsAddr = l.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(st.Metrics, promhttp.HandlerOpts{}))
	srv := api.NewHTTPServer(mux, api.ServerOptions{})
	st.services.run("metrics", func(ctx context.Context) error {
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return nil
}

// Wait blocks until ctx ends or a part fails.
func (st *Stack) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-st.errc:
		return err
	}
}

// Close stops every part in reverse start order within the shutdown
// timeout; past it, the private Postgres is stopped anyway so it never
// outlives the process.
func (st *Stack) Close() {
	timeout := cmp.Or(st.Config.ShutdownTimeout, config.ShutdownTimeoutDefault)
	st.Logger.Info("shutting down", "timeout", timeout)
	closers := st.closers
	st.closers = nil
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		st.Logger.Error("shutdown timed out; stopping now", "timeout", timeout)
		if st.PG != nil {
			_ = st.PG.Stop()
		}
	}
}
