// Package app assembles hookrelay's processes from its parts: the dev stack
// (private Postgres, embedded Temporal and UI, API, worker, dispatcher in one
// process) and the production split (api, worker, migrate).
package app

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"hookrelay/config"
	"hookrelay/dispatch"
	"hookrelay/internal/devstack"
	"hookrelay/internal/pgcluster"
	"hookrelay/internal/tracing"
	"hookrelay/metrics"
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
	// Tracing traces the process's events (the bench's, on a provider of
	// its own). Nil builds it from the OTEL_* environment (tracing.FromEnv):
	// off unless that asks for an OTLP exporter.
	Tracing *tracing.Tracing
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
	// services run under the stack's supervisor.
	services *supervisor
	// Set by the start steps for the later ones.
	box    *secretbox.Box
	series *metrics.Sender
	// Tracing is the process's tracing; nil is off.
	Tracing *tracing.Tracing
}

// StartDev starts the whole product in this process: the private Postgres
// (unless cfg.DatabaseURL is set), the embedded Temporal server and UI, the
// API, the worker and the dispatcher.
func StartDev(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Stack, error) {
	return StartDevWith(ctx, cfg, logger, Options{})
}

// StartDevWith is StartDev with opts (the bench's tracing).
func StartDevWith(ctx context.Context, cfg config.Config, logger *slog.Logger, opts Options) (*Stack, error) {
	st := &Stack{Config: cfg, Logger: logger, errc: make(chan error, 4)}
	if err := st.startInfra(ctx); err != nil {
		st.Close()
		return nil, err
	}
	if err := st.start(ctx, RoleAPI|RoleWorker, opts); err != nil {
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

// Dev runs the whole product in this process until ctx ends.
func Dev(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	started := time.Now()
	st, err := StartDev(ctx, cfg, logger)
	if err != nil {
		return err
	}
	attrs := []any{"api", "http://" + st.APIAddr, "temporal", st.Temporal.FrontendAddr(), "temporal_ui", uiURL(st.Temporal.UIAddr()),
		"data_dir", st.Config.DataDir, "startup", time.Since(started).Round(time.Millisecond)}
	if st.PG != nil {
		attrs = append(attrs, "postgres_dir", st.PG.Dir())
	}
	logger.Info("hookrelay dev is up", attrs...)
	return st.Run(ctx)
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
	logger.Info("hookrelay started", "api", st.APIAddr, "temporal", cfg.TemporalAddress)
	return st.Run(ctx)
}

// Run runs the started process until ctx ends or a service fails, then
// stops it (Close).
func (st *Stack) Run(ctx context.Context) error {
	defer st.Close()
	return st.Wait(ctx)
}

// Wait blocks until ctx ends or a service fails.
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
