package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdklog "go.temporal.io/sdk/log"

	"hookrelay/internal/planwarm"
	"hookrelay/internal/temporalconn"
	"hookrelay/internal/tracing"
	"hookrelay/internal/tracing/temporaltrace"
	"hookrelay/metrics"
	"hookrelay/migrations"
	"hookrelay/secretbox"
	"hookrelay/store"
)

// step is one named step of a process's start.
type step struct {
	name string
	run  func(ctx context.Context) error
}

// start runs the steps that start a process with roles, in order; each
// step's connection or service is closed or stopped by Close, in reverse.
func (st *Stack) start(ctx context.Context, roles Roles, opts Options) error {
	steps := []step{
		{"open the secret key", st.openSecretBox},
		{"set up tracing", func(ctx context.Context) error { return st.setupTracing(ctx, opts.Tracing) }},
		{"connect to Postgres", st.connectPostgres},
		{"check the schema", st.checkSchema},
		{"prepare the store", st.prepareStore},
		{"connect to Temporal", func(ctx context.Context) error { return st.connectTemporal(ctx, opts.SDKLogger, roles&RoleWorker == 0) }},
		{"start the supervisor", st.startSupervisor},
	}
	if roles&RoleWorker != 0 {
		steps = append(steps, step{"start the worker role", func(context.Context) error { return st.startWorker(opts, roles&RoleAPI == 0) }})
	}
	if roles&RoleAPI != 0 {
		steps = append(steps, step{"start the API role", func(context.Context) error { return st.startAPI() }})
	}
	for _, s := range steps {
		began := time.Now()
		if err := s.run(ctx); err != nil {
			return err
		}
		st.Logger.Debug("start step done", "step", s.name, "took", time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// openSecretBox opens the key that seals secrets and custom headers at
// rest.
func (st *Stack) openSecretBox(context.Context) error {
	if st.Config.SecretKey == "" {
		return errors.New("HOOKRELAY_SECRET_KEY is required (base64 of 32 random bytes; `openssl rand -base64 32`)")
	}
	box, err := secretbox.Open(st.Config.SecretKey)
	if err != nil {
		return fmt.Errorf("HOOKRELAY_SECRET_KEY: %w", err)
	}
	st.box = box
	return nil
}

// setupTracing takes the process's tracing from the options, or builds
// it from the OTEL_* environment; one the process built is flushed when
// it stops, after every service that makes spans.
func (st *Stack) setupTracing(ctx context.Context, given *tracing.Tracing) error {
	if given != nil {
		st.Tracing = given
		return nil
	}
	t, err := tracing.FromEnv(ctx, os.Getenv)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	if t == nil {
		return nil
	}
	st.Tracing = t
	st.Logger.Info("tracing on: spans go to the OTLP exporter the OTEL_* environment names")
	st.closers = append(st.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			st.Logger.Warn("spans not flushed", "err", err)
		}
	})
	return nil
}

// tracingFlushTimeout bounds flushing the last spans at shutdown.
const tracingFlushTimeout = 5 * time.Second

// connectPostgres opens the main pool and the hot path's pool
// (store.HotPoolSetup).
func (st *Stack) connectPostgres(ctx context.Context) error {
	poolCfg, err := pgxpool.ParseConfig(st.Config.DatabaseURL)
	if err != nil {
		return fmt.Errorf("HOOKRELAY_DATABASE_URL: %w", err)
	}
	poolCfg.MaxConns = int32(st.Config.DBMaxConns)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	st.Pool = pool
	st.closers = append(st.closers, pool.Close)
	st.Store = store.New(pool, st.box)
	st.Store.FailingAfter, st.Store.AutoDisableAfter = st.Config.FailingAfter, st.Config.AutoDisableAfter
	hotCfg := poolCfg.Copy()
	hotCfg.MaxConns = min(store.HotPoolConns, hotCfg.MaxConns)
	// Every hot connection is opened (in the background) at start and, once
	// its lifetime ends, replaced in the background (the ends spread by
	// store.HotPoolLifetimeJitter), so a burst rarely waits for a new
	// connection (opened on demand when a burst found every one busy, the
	// statement waiting for it would wait a connect); one replaced after a
	// failed reconnect may still be opened on demand.
	hotCfg.MinConns = hotCfg.MaxConns
	hotCfg.MaxConnLifetimeJitter = store.HotPoolLifetimeJitter
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
	return nil
}

// checkSchema migrates the database in dev mode; elsewhere it refuses to
// start while migrations are pending.
func (st *Stack) checkSchema(ctx context.Context) error {
	if st.Config.Dev {
		_, err := migrations.Up(ctx, st.Pool, st.Logger)
		return err
	}
	n, err := migrations.Pending(ctx, st.Pool)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d migrations pending: run `hookrelay migrate` first", n)
	}
	return nil
}

// prepareStore seals custom headers written before they were sealed and
// keeps the configured admin key.
func (st *Stack) prepareStore(ctx context.Context) error {
	if n, err := st.Store.SealLegacyHeaders(ctx); err != nil {
		return err
	} else if n > 0 {
		st.Logger.Info("sealed custom headers written before they were sealed", "endpoints", n)
	}
	if st.Config.AdminKey == "" {
		return nil
	}
	return st.Store.EnsureAdminKey(ctx, st.Config.AdminKey)
}

// connectTemporal dials Temporal and checks the namespace: one without
// hookrelay's search attributes would refuse every workflow start, so the
// process refuses to start instead, saying what to run.
func (st *Stack) connectTemporal(ctx context.Context, sdkLogger sdklog.Logger, apiOnly bool) error {
	if sdkLogger == nil {
		sdkLogger = sdklog.NewStructuredLogger(st.Logger.With("component", "sdk"))
	}
	cfg := st.Config
	settings := temporalSettings(cfg)
	// Off, the client gets no interceptor: workflow starts and tasks cost
	// what they cost untraced.
	ti, err := temporaltrace.Interceptor(st.Tracing)
	if err != nil {
		return err
	}
	if ti != nil {
		settings.Interceptors = append(settings.Interceptors, ti)
	}
	tc, err := temporalconn.Dial(ctx, settings, sdkLogger)
	if ce, failed := errors.AsType[*temporalconn.ConnectError](err); failed && !ce.Reachable && apiOnly {
		// Nothing answers at the address (a frontend that answers but
		// refuses us is a configuration to fix, and fails the start). Ingest
		// needs Postgres only: events wait in the outbox for the workers,
		// which need Temporal. /readyz says degraded meanwhile.
		st.Logger.Warn("Temporal unreachable; the API starts and accepts events, which wait in the outbox until Temporal answers", "err", err)
		if tc, err = temporalconn.DialLazy(settings, sdkLogger); err != nil {
			return err
		}
		st.Client = tc
		st.closers = append(st.closers, tc.Close)
		return nil
	}
	if err != nil {
		return err
	}
	st.Client = tc
	st.closers = append(st.closers, tc.Close)
	if err := temporalconn.Check(ctx, tc, cfg.TemporalAddress, cfg.TemporalNamespace); err != nil {
		if _, unchecked := errors.AsType[*temporalconn.UncheckedError](err); !unchecked {
			return err
		}
		st.Logger.Warn("starting without checking the namespace's search attributes", "err", err)
	}
	return nil
}

// startSupervisor prepares what the roles' services share: the supervisor,
// which stops them in reverse start order (the HTTP server stops taking
// requests, the watchers and the dispatcher end, then the worker finishes
// its in-flight attempts; the client, the pools and the infrastructure go
// after it), and the metrics registry.
func (st *Stack) startSupervisor(context.Context) error {
	st.services = &supervisor{errc: st.errc, logger: st.Logger}
	st.closers = append(st.closers, st.services.stop)
	st.Metrics = metrics.NewRegistry()
	st.series = metrics.NewSender(st.Metrics, st.Config.MetricsEndpointLabels)
	metrics.NewState(st.Metrics, st.Store.Gauges)
	// The hot pool's kept plans are made again on its idle connections
	// after each VACUUM or ANALYZE, not on a burst's path.
	st.services.start(&planwarm.Warmer{Pool: st.Store.HotPool(), Stats: st.Pool, Logger: st.Logger.With("component", "plan warmer")})
	return nil
}
