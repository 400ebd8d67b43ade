// Package devstack embeds a Temporal server (frontend, history, matching and
// worker services in this process) persisted in PostgreSQL, plus the
// Temporal Web UI. It is what `hookrelay dev` and the integration tests run;
// production points hookrelay at an external Temporal cluster instead.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/temporal"

	hrconfig "hookrelay/config"
	"hookrelay/internal/pgcluster"
	"hookrelay/internal/temporalconn"
)

// Default values of Options. The frontend and UI addresses, the namespace
// and the shard count are the deployment's (package config).
const (
	// DatabaseDefault and VisibilityDatabaseDefault name the Postgres
	// databases the server keeps its state in.
	DatabaseDefault           = "temporal"
	VisibilityDatabaseDefault = "temporal_visibility"
)

// Options configures the embedded server.
type Options struct {
	// PostgresURL reaches the Postgres server (any database) as a role that
	// may create databases. Required.
	PostgresURL string
	// FrontendAddr is host:port of the frontend gRPC API. Defaults to
	// config.TemporalAddressDefault; port 0 picks a free port.
	FrontendAddr string
	// UIAddr is host:port of the Web UI; empty disables the UI.
	UIAddr string
	// Namespace is created at start if missing. Defaults to
	// config.TemporalNamespaceDefault.
	Namespace string
	// SearchAttributes are registered on the namespace at start.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Shards is the number of history shards, fixed at first start:
	// Temporal cannot change it for an existing store. Defaults to
	// config.TemporalShardsDefault.
	Shards int32
	// Database and VisibilityDatabase default to DatabaseDefault and
	// VisibilityDatabaseDefault.
	Database, VisibilityDatabase string
	// SQLiteFile, when set, keeps the server's state in this SQLite (WAL)
	// file instead of Postgres (used to measure the two).
	SQLiteFile string
	// TLS, when set, makes the frontend require mTLS (the UI stays off).
	TLS *TLS
	// DynamicConfig overrides server dynamic config keys.
	DynamicConfig map[string]any
	// Logger receives the server's logs at LogLevel or above. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// LogLevel filters the server's own logs. Defaults to warn.
	LogLevel *slog.Level
}

// Server is a running embedded Temporal server.
type Server struct {
	server       temporal.Server
	ui           *uiserver.Server
	frontendAddr string
	uiAddr       string
	namespace    string
	logLevel     *slog.LevelVar
}

func (o *Options) withDefaults() {
	if o.FrontendAddr == "" {
		o.FrontendAddr = hrconfig.TemporalAddressDefault
	}
	if o.Namespace == "" {
		o.Namespace = hrconfig.TemporalNamespaceDefault
	}
	if o.Shards == 0 {
		o.Shards = hrconfig.TemporalShardsDefault
	}
	if o.Database == "" {
		o.Database = DatabaseDefault
	}
	if o.VisibilityDatabase == "" {
		o.VisibilityDatabase = VisibilityDatabaseDefault
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Start prepares the databases, starts the server and the UI, and returns
// once the namespace accepts requests and the search attributes exist.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts.withDefaults()
	pgCfg, err := pgx.ParseConfig(opts.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("parse temporal postgres url: %w", err)
	}
	host, portStr, err := net.SplitHostPort(opts.FrontendAddr)
	if err != nil {
		return nil, fmt.Errorf("frontend address %q: %w", opts.FrontendAddr, err)
	}
	port, _ := strconv.Atoi(portStr)
	if port != 0 {
		// A fixed port that is taken is reported at once: other ports
		// would not help, and a server built on it fails only after it
		// has opened its other listeners and connections.
		if err := checkFree("temporal frontend", opts.FrontendAddr); err != nil {
			return nil, err
		}
	}
	logger := serverLogger{l: opts.Logger, min: new(slog.LevelVar)}
	logger.min.Set(slog.LevelWarn)
	if opts.LogLevel != nil {
		logger.min.Set(*opts.LogLevel)
	}
	store := func(db string) *config.SQL {
		return &config.SQL{
			PluginName:      postgresql.PluginNamePGX,
			DatabaseName:    db,
			ConnectAddr:     net.JoinHostPort(pgCfg.Host, strconv.Itoa(int(pgCfg.Port))),
			ConnectProtocol: "tcp",
			User:            pgCfg.User,
			Password:        pgCfg.Password,
			MaxConns:        20,
			MaxIdleConns:    20,
		}
	}
	defaultStore, visibilityStore := store(opts.Database), store(opts.VisibilityDatabase)
	if opts.SQLiteFile != "" {
		if defaultStore, err = sqliteStore(opts.SQLiteFile, "active", opts.Namespace, opts.SearchAttributes); err != nil {
			return nil, err
		}
		visibilityStore = defaultStore
	} else {
		for _, s := range []struct{ db, schema string }{
			{opts.Database, "postgresql/v12/temporal"},
			{opts.VisibilityDatabase, "postgresql/v12/visibility"},
		} {
			if err := pgcluster.CreateDatabase(ctx, opts.PostgresURL, s.db); err != nil {
				return nil, err
			}
			if err := setupSchema(store(s.db), s.schema, logger); err != nil {
				return nil, err
			}
		}
	}

	if opts.TLS != nil {
		opts.UIAddr = ""
	}
	var srv temporal.Server
	var frontendAddr string
	for attempt := 1; ; attempt++ {
		var ports []int
		if ports, err = pickPorts(port); err != nil {
			return nil, err
		}
		srv, frontendAddr, err = startServer(opts, host, ports, logger, defaultStore, visibilityStore)
		// A port chosen free can be bound by another process before the
		// server binds it; such a start is tried again on other ports
		// (what the failed build had opened stays open: the server gives
		// no handle to it).
		if err == nil || attempt == startAttempts || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		opts.Logger.Warn("temporal server: a port was taken before it was bound; trying other ports", "attempt", attempt, "err", err)
	}
	if err != nil {
		return nil, err
	}
	s := &Server{server: srv, frontendAddr: frontendAddr, namespace: opts.Namespace, logLevel: logger.min}
	if err := s.prepareNamespace(ctx, opts); err != nil {
		s.Stop()
		return nil, err
	}
	if opts.UIAddr != "" {
		if err := s.startUI(opts.UIAddr, opts.Logger); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// FrontendAddr is the host:port clients dial.
func (s *Server) FrontendAddr() string { return s.frontendAddr }

// UIAddr is the host:port of the Web UI, or "" when it is off.
func (s *Server) UIAddr() string { return s.uiAddr }

// Stop stops the UI and the server. The services stop one after another
// and complain about each other meanwhile; only errors are logged.
func (s *Server) Stop() {
	s.logLevel.Set(slog.LevelError)
	if s.ui != nil {
		s.ui.Stop()
	}
	_ = s.server.Stop()
}

// UIRunningError is StartUI on a server whose UI already runs.
type UIRunningError struct{ Addr string }

func (e *UIRunningError) Error() string { return "temporal ui already runs on " + e.Addr }

// StartUI starts the Web UI on addr for a server started without one (a
// test that reads the UI). Stop stops it with the server.
func (s *Server) StartUI(addr string, logger *slog.Logger) error {
	if s.ui != nil {
		return &UIRunningError{Addr: s.uiAddr}
	}
	return s.startUI(addr, logger)
}

func (s *Server) startUI(addr string, logger *slog.Logger) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ui address %q: %w", addr, err)
	}
	port, _ := strconv.Atoi(portStr)
	// Fail early and clearly if the port is taken: the UI server's own
	// Start blocks and only logs.
	if err := checkFree("temporal ui", addr); err != nil {
		return err
	}
	s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: s.frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    s.namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
	}))
	s.uiAddr = addr
	go func() {
		if err := s.ui.Start(); err != nil && !errors.Is(err, context.Canceled) {
			logger.Error("temporal ui stopped", "err", err)
		}
	}()
	return nil
}

func (s *Server) prepareNamespace(ctx context.Context, opts Options) error {
	conn := temporalconn.Settings{Address: s.frontendAddr}
	if t := opts.TLS; t != nil {
		conn.CAFile, conn.CertFile, conn.KeyFile, conn.ServerName = t.CAFile, t.ClientCertFile, t.ClientKeyFile, t.ServerName
	}
	copts, err := conn.ClientOptions(quietSDKLogger{})
	if err != nil {
		return err
	}
	c, err := client.Dial(copts)
	if err != nil {
		return fmt.Errorf("dial embedded temporal: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if _, err := temporalconn.Setup(ctx, c, opts.Namespace, temporalconn.HistoryRetention, temporalconn.FromMap(opts.SearchAttributes)); err != nil {
		return fmt.Errorf("prepare namespace %s: %w", opts.Namespace, err)
	}
	// Wait until the namespace serves reads (the registry refresh).
	for {
		_, err := c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: opts.Namespace, PageSize: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not ready: %w", opts.Namespace, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkFree reports (as what's error) whether nothing listens on addr yet.
func checkFree(what, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", what, addr, err)
	}
	return l.Close()
}
