// Package app assembles hookrelay's processes from its parts: the dev stack
// (private Postgres, embedded Temporal and UI, API, worker, dispatcher in one
// process) and the production split (api, worker, migrate).
package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"hookrelay/activities"
	"hookrelay/api"
	"hookrelay/config"
	"hookrelay/dispatch"
	"hookrelay/internal/devstack"
	"hookrelay/internal/pgcluster"
	"hookrelay/migrations"
	"hookrelay/secretbox"
	"hookrelay/store"
	"hookrelay/worker"
	"hookrelay/workflows"
)

// Roles a process can run.
const (
	roleAPI    = 1 << iota // REST API
	roleWorker             // Temporal worker + outbox dispatcher
)

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
	// APIAddr is where the REST API listens ("" without the API role).
	APIAddr string
	closers []func() // run in reverse order by Close
	errc    chan error
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
	if err := st.start(ctx, roleAPI|roleWorker); err != nil {
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
	logger.Info("hookrelay dev is up",
		"api", "http://"+st.APIAddr, "temporal", st.Temporal.FrontendAddr(), "temporal_ui", uiURL(st.Temporal.UIAddr()),
		"data_dir", st.Config.DataDir, "startup", time.Since(started).Round(time.Millisecond))
	return st.Wait(ctx)
}

func uiURL(addr string) string {
	if addr == "" {
		return "disabled"
	}
	return "http://" + addr
}

// SearchAttributes are the custom search attributes DeliveryWorkflow sets.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	sa := map[string]enumspb.IndexedValueType{}
	for _, name := range workflows.SearchAttributeNames() {
		sa[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return sa
}

// API runs the REST API against external Postgres and Temporal.
func API(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	return runRoles(ctx, cfg, logger, roleAPI)
}

// Worker runs the Temporal worker and the outbox dispatcher.
func Worker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	return runRoles(ctx, cfg, logger, roleWorker)
}

func runRoles(ctx context.Context, cfg config.Config, logger *slog.Logger, roles int) error {
	st := &Stack{Config: cfg, Logger: logger, errc: make(chan error, 4)}
	if err := st.start(ctx, roles); err != nil {
		st.Close()
		return err
	}
	defer st.Close()
	logger.Info("hookrelay started", "api", st.APIAddr, "temporal", cfg.TemporalAddress)
	return st.Wait(ctx)
}

// Migrate applies pending migrations and exits.
func Migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer pool.Close()
	v, err := migrations.Up(ctx, pool, logger)
	if err != nil {
		return err
	}
	logger.Info("database at migration version", "version", v)
	return nil
}

// start connects to Postgres and Temporal and starts the given roles.
func (st *Stack) start(ctx context.Context, roles int) error {
	cfg := st.Config
	logger := st.Logger
	if cfg.SecretKey == "" {
		return errors.New("HOOKRELAY_SECRET_KEY is required (base64 of 32 random bytes; `openssl rand -base64 32`)")
	}
	key, err := secretbox.ParseKey(cfg.SecretKey)
	if err != nil {
		return fmt.Errorf("HOOKRELAY_SECRET_KEY: %w", err)
	}
	box, err := secretbox.New(key)
	if err != nil {
		return err
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
	if cfg.AdminKey != "" {
		if err := st.Store.EnsureAdminKey(ctx, cfg.AdminKey); err != nil {
			return err
		}
	}
	tc, err := client.Dial(client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.TemporalNamespace,
		Logger:    sdklog.NewStructuredLogger(logger.With("component", "sdk")),
	})
	if err != nil {
		return fmt.Errorf("connect to temporal at %s: %w", cfg.TemporalAddress, err)
	}
	st.Client = tc
	st.closers = append(st.closers, tc.Close)

	// Close runs closers in reverse: the HTTP server stops taking requests,
	// the dispatcher and background loops end, then the worker finishes its
	// in-flight attempts, then the client, pool and infrastructure go.
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var httpShutdown func()
	defer func() {
		st.closers = append(st.closers, func() { stop(); wg.Wait() })
		if httpShutdown != nil {
			st.closers = append(st.closers, httpShutdown)
		}
	}()
	if roles&roleWorker != 0 {
		acts := &activities.Activities{
			Store:     st.Store,
			HTTP:      activities.NewHTTPClient(!cfg.AllowPrivateTargets),
			UserAgent: "hookrelay/" + api.Version,
			Logger:    logger.With("component", "delivery"),
		}
		w, err := worker.New(tc, acts, worker.Options{MaxConcurrentActivities: cfg.WorkerConcurrency, StopTimeout: cfg.ShutdownTimeout / 2})
		if err != nil {
			return err
		}
		if err := w.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		st.closers = append(st.closers, w.Stop)
		d := &dispatch.Dispatcher{Pool: pool, Client: tc, Batch: cfg.DispatchBatch, LocalActivity: cfg.LocalActivity, NoEagerStart: !cfg.EagerStart, Logger: logger.With("component", "dispatcher")}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Run(runCtx); err != nil {
				st.errc <- err
			}
		}()
	}
	if roles&roleAPI != 0 {
		srv := api.New(api.Options{Store: st.Store, Engine: dispatch.Engine{Client: tc}, Logger: logger.With("component", "api"),
			AllowPrivateTargets: cfg.AllowPrivateTargets, MaxBacklog: cfg.MaxBacklog})
		wg.Add(1)
		go func() { defer wg.Done(); srv.WatchBacklog(runCtx) }()
		l, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
		st.APIAddr = l.Addr().String()
		httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				st.errc <- fmt.Errorf("http: %w", err)
			}
		}()
		httpShutdown = func() {
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			_ = httpSrv.Shutdown(sctx)
		}
	}
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

// fileSecret returns value when set; else the secret kept in path, created
// with gen (mode 0600) on first start and, when announce is set, printed once.
func fileSecret(value, path string, gen func() (string, error), announce bool) (string, error) {
	if value != "" {
		return value, nil
	}
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	v, err := gen()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if announce {
		// Printed once, to the terminal only (not the log).
		fmt.Fprintf(os.Stderr, "\n  Admin API key (shown once, kept in %s):\n\n    %s\n\n", path, v)
	}
	return v, nil
}

func newAPIKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate admin key: %w", err)
	}
	return "hr_admin_" + base64.RawURLEncoding.EncodeToString(b), nil
}
