// Package app assembles hookrelay's processes from its parts: the dev stack
// (private Postgres, embedded Temporal and UI, API, worker, dispatcher in one
// process) and the production split (api, worker, migrate).
package app

import (
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
	"hookrelay/internal/devstack"
	"hookrelay/internal/pgcluster"
	"hookrelay/migrations"
	"hookrelay/outbox"
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

// Dev runs the whole product in this process until ctx ends.
func Dev(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	started := time.Now()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	dbURL := cfg.DatabaseURL
	if dbURL == "" {
		logf, err := os.OpenFile(filepath.Join(cfg.DataDir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("open postgres log: %w", err)
		}
		defer logf.Close()
		pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(cfg.DataDir, "postgres"), Port: cfg.PostgresPort, Log: logf, Logger: logger})
		if err != nil {
			return err
		}
		defer pg.Stop() //nolint:errcheck // logged by Stop
		if err := pgcluster.CreateDatabase(ctx, pg.URL("postgres"), "hookrelay"); err != nil {
			return err
		}
		dbURL = pg.URL("hookrelay")
	}
	tserver, err := devstack.Start(ctx, devstack.Options{
		PostgresURL:      dbURL,
		FrontendAddr:     cfg.TemporalAddress,
		UIAddr:           cfg.TemporalUIAddr,
		Namespace:        cfg.TemporalNamespace,
		SearchAttributes: SearchAttributes(),
		Logger:           logger.With("component", "temporal"),
	})
	if err != nil {
		return err
	}
	defer tserver.Stop()
	cfg.TemporalAddress = tserver.FrontendAddr()
	cfg.DatabaseURL = dbURL
	if cfg.AdminKey, err = fileSecret(cfg.AdminKey, filepath.Join(cfg.DataDir, "admin-key"), newAPIKey); err != nil {
		return err
	}
	if cfg.SecretKey, err = fileSecret(cfg.SecretKey, filepath.Join(cfg.DataDir, "secret-key"), secretbox.GenerateKey); err != nil {
		return err
	}
	return run(ctx, cfg, logger, roleAPI|roleWorker, func(addr string) {
		logger.Info("hookrelay dev is up",
			"api", "http://"+addr, "temporal", tserver.FrontendAddr(), "temporal_ui", uiURL(tserver.UIAddr()),
			"data_dir", cfg.DataDir, "startup", time.Since(started).Round(time.Millisecond))
	})
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
	return run(ctx, cfg, logger, roleAPI, nil)
}

// Worker runs the Temporal worker and the outbox dispatcher.
func Worker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	return run(ctx, cfg, logger, roleWorker, nil)
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

// run starts the given roles and blocks until ctx ends, then stops them
// within cfg.ShutdownTimeout.
func run(ctx context.Context, cfg config.Config, logger *slog.Logger, roles int, onReady func(addr string)) error {
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
	defer pool.Close()
	if cfg.Dev {
		if _, err := migrations.Up(ctx, pool, logger); err != nil {
			return err
		}
	} else if n, err := migrations.Pending(ctx, pool); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%d migrations pending: run `hookrelay migrate` first", n)
	}
	st := store.New(pool, box)
	if cfg.AdminKey != "" {
		if err := st.EnsureAdminKey(ctx, cfg.AdminKey); err != nil {
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
	defer tc.Close()

	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	if roles&roleWorker != 0 {
		acts := &activities.Activities{
			Store:     st,
			HTTP:      activities.NewHTTPClient(!cfg.AllowPrivateTargets),
			UserAgent: "hookrelay/" + api.Version,
			Logger:    logger.With("component", "delivery"),
		}
		w, err := worker.New(tc, acts, worker.Options{MaxConcurrentActivities: cfg.WorkerConcurrency})
		if err != nil {
			return err
		}
		if err := w.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		defer w.Stop() // waits for in-flight attempts (bounded by the SDK's stop timeout)
		d := &outbox.Dispatcher{Pool: pool, Client: tc, Batch: cfg.DispatchBatch, LocalActivity: cfg.LocalActivity, Logger: logger.With("component", "dispatcher")}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Run(runCtx); err != nil {
				errc <- err
			}
		}()
	}
	var httpSrv *http.Server
	addr := ""
	if roles&roleAPI != 0 {
		srv := api.New(api.Options{Store: st, Temporal: tc, Logger: logger.With("component", "api"), AllowPrivateTargets: cfg.AllowPrivateTargets})
		l, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
		addr = l.Addr().String()
		httpSrv = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
	}
	if onReady != nil {
		onReady(addr)
	} else {
		logger.Info("hookrelay started", "api", addr, "temporal", cfg.TemporalAddress)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	logger.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if httpSrv != nil {
		_ = httpSrv.Shutdown(shutCtx)
	}
	stop()
	wg.Wait()
	return runErr
}

// fileSecret returns value when set; else the secret kept in path, created
// with gen (mode 0600) and printed once on first start.
func fileSecret(value, path string, gen func() (string, error)) (string, error) {
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
	if filepath.Base(path) == "admin-key" {
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
