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
	"time"

	"github.com/jackc/pgx/v5"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/common/primitives"
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
	if port == 0 {
		if port, err = pgcluster.FreePort(); err != nil {
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

	// gRPC ports of history, matching and worker, the frontend's HTTP
	// port, and a membership port per service.
	ports, err := pgcluster.FreePorts(8)
	if err != nil {
		return nil, err
	}
	httpPort := ports[3]
	membership := ports[4:]
	service := func(i, grpcPort int) config.Service {
		// MembershipPort is set explicitly: the random default can exceed the
		// int2 column Postgres keeps it in.
		return config.Service{RPC: config.RPC{GRPCPort: grpcPort, MembershipPort: membership[i], BindOnIP: host}}
	}
	frontend := service(0, port)
	frontend.RPC.HTTPPort = httpPort
	frontendAddr := net.JoinHostPort(host, strconv.Itoa(port))

	conf := &config.Config{}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = host
	conf.Persistence.DefaultStore = "default"
	conf.Persistence.VisibilityStore = "visibility"
	conf.Persistence.NumHistoryShards = opts.Shards
	conf.Persistence.DataStores = map[string]config.DataStore{
		"default":    {SQL: defaultStore},
		"visibility": {SQL: visibilityStore},
	}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        "active",
		CurrentClusterName:       "active",
		ClusterInformation: map[string]cluster.ClusterInformation{
			"active": {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontendAddr,
				HTTPAddress:            net.JoinHostPort(host, strconv.Itoa(httpPort)),
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{
		"frontend": frontend,
		"history":  service(1, ports[0]),
		"matching": service(2, ports[1]),
		"worker":   service(3, ports[2]),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontendAddr
	if opts.TLS != nil {
		opts.TLS.apply(conf)
		opts.UIAddr = ""
	}

	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("temporal authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("temporal claim mapper: %w", err)
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                        8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key():        100,
		dynamicconfig.NamespaceCacheRefreshInterval.Key():                       time.Second,
		dynamicconfig.EnableEagerWorkflowStart.Key():                            true,
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():                  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key():                 1,
		dynamicconfig.FrontendMaxConcurrentLongRunningRequestsPerInstance.Key(): 3000,
	}
	for k, v := range opts.DynamicConfig {
		dyn[dynamicconfig.MakeKey(k)] = v
	}
	hostAt := func(p int) static.Hosts { return static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(p))) }
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: hostAt(port),
			primitives.HistoryService:  hostAt(ports[0]),
			primitives.MatchingService: hostAt(ports[1]),
			primitives.WorkerService:   hostAt(ports[2]),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("build temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
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
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("temporal ui on %s: %w", addr, err)
	}
	_ = l.Close()
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
