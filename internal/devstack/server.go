package devstack

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"

	"hookrelay/internal/pgcluster"
)

// startAttempts is how many times Start builds the server when a port it
// chose was taken before the server bound it.
const startAttempts = 3

// Timer settings of the embedded server. Its defaults
// (history.timerProcessorMaxTimeShift 1 s) move every timer due sooner
// than a second from its creation to a second after it, so a workflow's
// wait shorter than a second (a sub-second retry wait, a sequencer's wait
// for its head) would end up to a second late; a much smaller shift makes
// timers later still on a small machine, as the timer queue's reads (20 per
// second per shard by default) cannot keep up.
const (
	// TimerShift is history.timerProcessorMaxTimeShift: a timer fires at
	// the earliest this long after its creation.
	TimerShift = 100 * time.Millisecond
	// TimerReadsPerSecond is history.timerProcessorMaxPollRPS, per shard.
	TimerReadsPerSecond = 100
)

// Where pickPorts puts each port in its answer, which startServer takes.
const (
	portFrontend = iota
	portHistory
	portMatching
	portWorker
	portFrontendHTTP
	portMembership // one per service, in the order above
	portCount      = portMembership + 4
)

// pickPorts picks the server's ports: frontend (0 picks a free one) and
// every other one free.
func pickPorts(frontend int) ([]int, error) {
	ports, err := pgcluster.FreePorts(portCount)
	if err != nil {
		return nil, err
	}
	if frontend != 0 {
		ports[portFrontend] = frontend
	}
	return ports, nil
}

// startServer builds and starts the server's four services on host, on
// ports (see pickPorts). A port it cannot bind is a *FatalError.
func startServer(opts Options, host string, ports []int, logger serverLogger, defaultStore, visibilityStore *config.SQL) (srv temporal.Server, frontendAddr string, err error) {
	port := ports[portFrontend]
	httpPort := ports[portFrontendHTTP]
	membership := ports[portMembership:]
	service := func(i, grpcPort int) config.Service {
		// MembershipPort is set explicitly: the random default can exceed the
		// int2 column Postgres keeps it in.
		return config.Service{RPC: config.RPC{GRPCPort: grpcPort, MembershipPort: membership[i], BindOnIP: host}}
	}
	frontend := service(0, port)
	frontend.RPC.HTTPPort = httpPort
	frontendAddr = net.JoinHostPort(host, strconv.Itoa(port))

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
		"history":  service(1, ports[portHistory]),
		"matching": service(2, ports[portMatching]),
		"worker":   service(3, ports[portWorker]),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontendAddr
	if opts.TLS != nil {
		opts.TLS.apply(conf)
	}

	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, "", fmt.Errorf("temporal authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, "", fmt.Errorf("temporal claim mapper: %w", err)
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                        8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key():        100,
		dynamicconfig.NamespaceCacheRefreshInterval.Key():                       time.Second,
		dynamicconfig.EnableEagerWorkflowStart.Key():                            true,
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():                  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key():                 1,
		dynamicconfig.FrontendMaxConcurrentLongRunningRequestsPerInstance.Key(): 3000,
		dynamicconfig.TimerProcessorMaxTimeShift.Key():                          TimerShift,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():                            TimerReadsPerSecond,
	}
	for k, v := range opts.DynamicConfig {
		dyn[dynamicconfig.MakeKey(k)] = v
	}
	hostAt := func(p int) static.Hosts { return static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(p))) }
	defer func() {
		// The server reports a failure to bind (and other fatal ones)
		// through its logger, which panics with a *FatalError.
		if r := recover(); r != nil {
			fatal, ok := r.(*FatalError)
			if !ok {
				panic(r)
			}
			srv, frontendAddr, err = nil, "", fatal
		}
	}()
	srv, err = temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: hostAt(port),
			primitives.HistoryService:  hostAt(ports[portHistory]),
			primitives.MatchingService: hostAt(ports[portMatching]),
			primitives.WorkerService:   hostAt(ports[portWorker]),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, "", fmt.Errorf("build temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, "", fmt.Errorf("start temporal server: %w", err)
	}
	return srv, frontendAddr, nil
}
