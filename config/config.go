// Package config is hookrelay's one configuration struct: every knob, its
// HOOKRELAY_* environment variable, its flag and its default. Flags win over
// the environment, the environment over defaults. It imports no component:
// the defaults a component owns (api, dispatch, store, worker, activities)
// reach it through Load's base, gathered by package internal/defaults.
package config

import (
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Defaults of the settings that are the deployment's own; the others are
// their component's (dispatch.BatchDefault, worker.MaxConcurrentActivitiesDefault).
const (
	DataDirDefault           = "./.data"
	HTTPAddrDefault          = "127.0.0.1:8080"
	TemporalAddressDefault   = "127.0.0.1:7233"
	TemporalUIAddrDefault    = "127.0.0.1:8233"
	TemporalNamespaceDefault = "default"
	PostgresPortDefault      = 54329
	ShutdownTimeoutDefault   = 30 * time.Second
	TemporalShardsDefault    = 4
	DBMaxConnsDefault        = 8
	MaxBacklogDefault        = 20000
	LogLevelDefault          = "info"
)

// Compressions of requests to Temporal (Config.TemporalCompression).
const (
	TemporalGzip         = "gzip" // TemporalGzip compresses them with gzip.
	TemporalUncompressed = "none" // TemporalUncompressed sends them as they are.
)

// Config holds every setting of every subcommand.
type Config struct {
	// Dev is true for `hookrelay dev`: private targets allowed, embedded
	// Temporal, private Postgres when DatabaseURL is empty.
	Dev bool
	// DataDir holds the dev stack's state (Postgres cluster, admin key,
	// secret key). Env HOOKRELAY_DATA_DIR, flag --data-dir.
	DataDir string
	// HTTPAddr is the REST API's listen address. Env HOOKRELAY_HTTP_ADDR.
	HTTPAddr string
	// DatabaseURL is hookrelay's Postgres. Empty in dev mode starts a
	// private cluster. Env HOOKRELAY_DATABASE_URL.
	DatabaseURL string
	// DBMaxConns is the main pgx pool's size; the hot path's pool keeps min(8
	// (store.HotPoolConns), DBMaxConns) more open. Defaults to
	// DBMaxConnsDefault (8: fewer idle connections to plan the hot
	// statements again together after an ANALYZE).
	// Env HOOKRELAY_DB_MAX_CONNS.
	DBMaxConns int
	// PostgresPort is the private cluster's port (dev). Env HOOKRELAY_PG_PORT.
	PostgresPort int
	// TemporalAddress is the frontend host:port (the embedded server
	// listens there in dev mode). Env HOOKRELAY_TEMPORAL_ADDRESS.
	TemporalAddress string
	// TemporalNamespace. Env HOOKRELAY_TEMPORAL_NAMESPACE.
	TemporalNamespace string
	// TemporalTLS connects to Temporal over TLS; TemporalTLSCA,
	// TemporalTLSCert and TemporalAPIKey each turn it on too. Defaults to
	// false. Env HOOKRELAY_TEMPORAL_TLS.
	TemporalTLS bool
	// TemporalTLSCA is a PEM file of the CAs that sign the frontend's
	// certificate. Defaults to the system's roots. Env HOOKRELAY_TEMPORAL_TLS_CA.
	TemporalTLSCA string
	// TemporalTLSCert and TemporalTLSKey are PEM files of the client
	// certificate and key hookrelay presents (mTLS); both or neither.
	// Env HOOKRELAY_TEMPORAL_TLS_CERT, HOOKRELAY_TEMPORAL_TLS_KEY.
	TemporalTLSCert, TemporalTLSKey string
	// TemporalTLSServerName is the name the frontend's certificate must
	// carry. Defaults to the address's host. Env HOOKRELAY_TEMPORAL_TLS_SERVER_NAME.
	TemporalTLSServerName string
	// TemporalAPIKey is a Temporal Cloud API key, sent as a bearer token
	// over TLS. Env HOOKRELAY_TEMPORAL_API_KEY.
	TemporalAPIKey string
	// TemporalCompression is TemporalGzip or TemporalUncompressed. Defaults
	// to gzip; `hookrelay dev` always sends none (loopback, where gzip only
	// costs CPU). Env HOOKRELAY_TEMPORAL_COMPRESSION.
	TemporalCompression string
	// TemporalUIAddr is the embedded Web UI's address (dev); empty disables
	// it. Env HOOKRELAY_TEMPORAL_UI_ADDR.
	TemporalUIAddr string
	// AdminKey is the admin API key; in dev mode one is generated into
	// <data dir>/admin-key when empty. Env HOOKRELAY_ADMIN_KEY.
	AdminKey string
	// SecretKey holds the base64 AES-256 keys sealing secrets and custom
	// headers, comma-separated, newest first; in dev
	// mode one is generated into <data dir>/secret-key when empty.
	// Env HOOKRELAY_SECRET_KEY.
	SecretKey string
	// PublicURL is the base URL users reach the API and portal at, used in
	// portal links. Defaults to the scheme and host of the request that
	// makes the link. Env HOOKRELAY_PUBLIC_URL.
	PublicURL string
	// PortalFrameAncestors are the origins (space-separated) allowed to
	// embed the portal in a frame. Defaults to none but the portal itself.
	// Env HOOKRELAY_PORTAL_FRAME_ANCESTORS.
	PortalFrameAncestors string
	// AllowPrivateTargets lets endpoints reach loopback and private
	// addresses. Always true in dev mode. Env HOOKRELAY_ALLOW_PRIVATE_TARGETS.
	AllowPrivateTargets bool
	// EgressProxy is the forward proxy every attempt goes through, with
	// CONNECT: http://host:port or https://host:port (TLS to the proxy),
	// credentials in its userinfo or in EgressProxyUser and
	// EgressProxyPassword. An endpoint's egress_proxy (admin key only)
	// overrides it. Defaults to none: attempts go out directly.
	// Env HOOKRELAY_EGRESS_PROXY.
	EgressProxy string
	// EgressProxyUser and EgressProxyPassword authenticate to EgressProxy
	// (Proxy-Authorization: Basic); they win over the URL's userinfo and
	// are never logged. Defaults to none.
	// Env HOOKRELAY_EGRESS_PROXY_USER, HOOKRELAY_EGRESS_PROXY_PASSWORD.
	EgressProxyUser, EgressProxyPassword string
	// ReceiverTraces is the trace context receivers are sent while tracing
	// is on: linked (the event's trace), fresh (a new trace per attempt) or
	// off; an endpoint's trace_context overrides it. Defaults to the
	// worker's (linked). Env HOOKRELAY_RECEIVER_TRACES.
	ReceiverTraces string
	// EagerStart starts delivery workflows eagerly on the dispatcher's own
	// worker. Env HOOKRELAY_EAGER_START.
	EagerStart bool
	// TemporalShards is the embedded server's history shard count, fixed
	// when its store is created (dev). Env HOOKRELAY_TEMPORAL_SHARDS.
	TemporalShards int
	// TemporalSQLite keeps the embedded server's state in this SQLite file
	// instead of Postgres (dev). Env HOOKRELAY_TEMPORAL_SQLITE.
	TemporalSQLite string
	// DispatchBatch is how many outbox rows the dispatcher claims at once.
	// Defaults to dispatch.BatchDefault. Env HOOKRELAY_DISPATCH_BATCH.
	DispatchBatch int
	// CarrierSize is the most new deliveries one carrier workflow makes
	// first attempts for; 1 turns carriers off. Defaults to
	// dispatch.CarrierSizeDefault. Env HOOKRELAY_CARRIER_SIZE.
	CarrierSize int
	// CarrierMin is the fewest new deliveries a dispatcher round must find
	// to carry them. Defaults to dispatch.CarrierMinDefault.
	// Env HOOKRELAY_CARRIER_MIN.
	CarrierMin int
	// FirstAttempts is how first attempts are made: FirstAttemptsWorkflow
	// (each delivery's own DeliveryWorkflow), FirstAttemptsSender
	// (straight from the outbox, each at its own due time, with no
	// workflow unless it fails) or FirstAttemptsCarrier (carried many to a
	// CarrierWorkflow). Defaults to FirstAttemptsWorkflow.
	// Env HOOKRELAY_FIRST_ATTEMPTS.
	FirstAttempts string
	// EndpointShare is how many requests one endpoint may have open from
	// one worker at once. Defaults to activities.EndpointShareDefault.
	// Env HOOKRELAY_ENDPOINT_SHARE.
	EndpointShare int
	// BreakerMisses: see activities.Breaker (0: off). Defaults to
	// activities.BreakerMissesDefault. Env HOOKRELAY_BREAKER_MISSES.
	BreakerMisses int
	// MaxBacklog is one app's outbox backlog past which that app's ingest
	// answers 429 with Retry-After (0 disables). Defaults to
	// MaxBacklogDefault. Env HOOKRELAY_MAX_BACKLOG.
	MaxBacklog int
	// IngestRate is how many events per second one app key may publish.
	// Defaults to api.IngestRateDefault. Env HOOKRELAY_INGEST_RATE.
	IngestRate int
	// IngestBurst is how many events one app key may publish at once.
	// Defaults to api.IngestBurstDefault. Env HOOKRELAY_INGEST_BURST.
	IngestBurst int
	// TrustedProxies are the reverse proxies and load balancers whose
	// X-Forwarded-For (or Forwarded) header names the client, for the
	// per-client limits; their own connections are not counted against
	// the per-client connection bound. Defaults to none.
	// Env HOOKRELAY_TRUSTED_PROXIES (comma-separated CIDRs).
	TrustedProxies []netip.Prefix
	// WorkerConcurrency bounds concurrent attempts per worker. Defaults to
	// worker.MaxConcurrentActivitiesDefault.
	// Env HOOKRELAY_WORKER_CONCURRENCY.
	WorkerConcurrency int
	// ShutdownTimeout bounds a graceful stop. Env HOOKRELAY_SHUTDOWN_TIMEOUT.
	ShutdownTimeout time.Duration
	// Retention is how long finished deliveries, their attempts and their
	// events are kept; a worker process prunes older ones every hour.
	// Defaults to store.RetentionDefault. Env HOOKRELAY_RETENTION.
	Retention time.Duration
	// FailingAfter is how many consecutive dead letters make an endpoint
	// failing (the endpoint.failing operational webhook). Defaults to
	// store.FailingAfterDefault. Env HOOKRELAY_FAILING_AFTER.
	FailingAfter int
	// AutoDisableAfter is how long an endpoint's deliveries may all fail
	// (with at least store.AutoDisableMinDefault dead letters) before it is
	// disabled. Defaults to store.AutoDisableAfterDefault.
	// Env HOOKRELAY_AUTO_DISABLE_AFTER.
	AutoDisableAfter time.Duration
	// MetricsAddr is where a worker process serves /metrics; the API serves
	// it on HTTPAddr. Empty turns a worker's off. Env HOOKRELAY_METRICS_ADDR.
	MetricsAddr string
	// MetricsEndpointLabels adds hookrelay_endpoint_attempts_total, labelled
	// by endpoint ID (one series per endpoint). Defaults to false.
	// Env HOOKRELAY_METRICS_ENDPOINT_LABELS.
	MetricsEndpointLabels bool
	// HTTPHeaderTimeout bounds reading a request's headers (slow clients).
	// Defaults to api.HeaderTimeoutDefault. Env HOOKRELAY_HTTP_HEADER_TIMEOUT.
	HTTPHeaderTimeout time.Duration
	// AuthFailuresPerMinute bounds failed authentications per client
	// address. Defaults to api.AuthFailuresPerMinuteDefault.
	// Env HOOKRELAY_AUTH_FAILURES_PER_MINUTE.
	AuthFailuresPerMinute int
	// LogLevel is debug, info, warn or error. Env HOOKRELAY_LOG_LEVEL.
	LogLevel string
}

// Commands that read settings (Setting.Commands).
const (
	CommandDev             = "dev"
	CommandAPI             = "api"
	CommandWorker          = "worker"
	CommandMigrate         = "migrate"
	CommandRotateSecretKey = "rotate-secret-key"
	CommandSetupTemporal   = "setup-temporal"
)

// Commands lists every command that reads settings.
func Commands() []string {
	return []string{CommandDev, CommandAPI, CommandWorker, CommandMigrate, CommandRotateSecretKey, CommandSetupTemporal}
}

// define registers the settings of command cmd on a new flag set ("" lists
// every setting and registers none); base holds the defaults of the
// settings a component owns (see Load).
func define(cmd string, c *Config, getenv func(string) string, base Config) *builder {
	b := &builder{fs: flag.NewFlagSet("hookrelay "+cmd, flag.ContinueOnError), getenv: getenv, cmd: cmd, shown: map[string]string{
		"database-url":             "dev: private cluster; else required",
		"admin-key":                "dev: generated into `<data dir>/admin-key`",
		"secret-key":               "dev: generated into `<data dir>/secret-key`; else required",
		"temporal-sqlite":          "Postgres",
		"metrics-addr":             "off",
		"public-url":               "the request's own scheme and host",
		"portal-frame-ancestors":   "`'self'` only",
		"trusted-proxies":          "none: the client is the connection's peer",
		"temporal-tls-ca":          "the system's roots",
		"temporal-tls-cert":        "none",
		"temporal-tls-key":         "none",
		"temporal-tls-server-name": "the address's host",
		"temporal-api-key":         "none",
		"egress-proxy":             "none: attempts go out directly",
		"egress-proxy-user":        "none (or the proxy URL's userinfo)",
		"egress-proxy-password":    "none",
	}}
	const (
		dev, apiCmd, workerCmd, migrate, rotate, setup = CommandDev, CommandAPI, CommandWorker, CommandMigrate, CommandRotateSecretKey, CommandSetupTemporal
	)
	b.uses(dev)
	b.str(&c.DataDir, "data-dir", "HOOKRELAY_DATA_DIR", DataDirDefault, "dev stack state directory")
	b.num(&c.PostgresPort, "pg-port", "HOOKRELAY_PG_PORT", PostgresPortDefault, "private Postgres port (dev)")
	b.str(&c.TemporalUIAddr, "temporal-ui-addr", "HOOKRELAY_TEMPORAL_UI_ADDR", TemporalUIAddrDefault, "embedded Temporal Web UI address (dev; empty disables)")
	b.num(&c.TemporalShards, "temporal-shards", "HOOKRELAY_TEMPORAL_SHARDS", TemporalShardsDefault, "embedded Temporal history shards (dev; fixed at first start)")
	b.str(&c.TemporalSQLite, "temporal-sqlite", "HOOKRELAY_TEMPORAL_SQLITE", "", "embedded Temporal on this SQLite file instead of Postgres (dev)")

	b.uses(dev, apiCmd, workerCmd, migrate, rotate)
	b.str(&c.DatabaseURL, "database-url", "HOOKRELAY_DATABASE_URL", "", "hookrelay's Postgres URL")
	b.uses(dev, apiCmd, workerCmd, rotate)
	b.str(&c.SecretKey, "secret-key", "HOOKRELAY_SECRET_KEY", "", "base64 AES-256 keys sealing secrets and custom headers, comma-separated, newest first: the newest seals, all open (see rotate-secret-key)")
	b.uses(dev, apiCmd, workerCmd)
	b.num(&c.DBMaxConns, "db-max-conns", "HOOKRELAY_DB_MAX_CONNS", DBMaxConnsDefault, "the main Postgres pool's size (the hot path's pool keeps 8 more open, or this many if fewer)")
	b.duration(&c.Retention, "retention", "HOOKRELAY_RETENTION", base.Retention, "how long finished deliveries, attempts and events are kept (dead letters at least their 7-day replay window)")
	b.boolean(&c.MetricsEndpointLabels, "metrics-endpoint-labels", "HOOKRELAY_METRICS_ENDPOINT_LABELS", false, "also count attempts per endpoint ID (one series per endpoint)")
	b.duration(&c.ShutdownTimeout, "shutdown-timeout", "HOOKRELAY_SHUTDOWN_TIMEOUT", ShutdownTimeoutDefault, "graceful stop bound")

	b.uses(dev, apiCmd, workerCmd, setup)
	b.str(&c.TemporalAddress, "temporal-address", "HOOKRELAY_TEMPORAL_ADDRESS", TemporalAddressDefault, "Temporal frontend host:port (dev: where the embedded one listens)")
	b.str(&c.TemporalNamespace, "temporal-namespace", "HOOKRELAY_TEMPORAL_NAMESPACE", TemporalNamespaceDefault, "Temporal namespace")
	b.uses(apiCmd, workerCmd, setup)
	b.boolean(&c.TemporalTLS, "temporal-tls", "HOOKRELAY_TEMPORAL_TLS", false, "connect to Temporal over TLS (on whenever a CA, a client certificate or an API key is set)")
	b.str(&c.TemporalTLSCA, "temporal-tls-ca", "HOOKRELAY_TEMPORAL_TLS_CA", "", "PEM file of the CA certificates that sign the Temporal frontend's certificate")
	b.str(&c.TemporalTLSCert, "temporal-tls-cert", "HOOKRELAY_TEMPORAL_TLS_CERT", "", "PEM file of the client certificate hookrelay presents to Temporal (mTLS)")
	b.str(&c.TemporalTLSKey, "temporal-tls-key", "HOOKRELAY_TEMPORAL_TLS_KEY", "", "PEM file of that certificate's private key")
	b.str(&c.TemporalTLSServerName, "temporal-tls-server-name", "HOOKRELAY_TEMPORAL_TLS_SERVER_NAME", "", "name the Temporal frontend's certificate must carry")
	b.str(&c.TemporalCompression, "temporal-compression", "HOOKRELAY_TEMPORAL_COMPRESSION", TemporalGzip, "how requests to Temporal are compressed: gzip or none (none saves CPU where the network is not the bottleneck)")
	b.str(&c.TemporalAPIKey, "temporal-api-key", "HOOKRELAY_TEMPORAL_API_KEY", "", "Temporal Cloud API key, sent as a bearer token over TLS (prefer the variable: flags show in ps)")

	b.uses(dev, apiCmd)
	b.str(&c.HTTPAddr, "http-addr", "HOOKRELAY_HTTP_ADDR", HTTPAddrDefault, "REST API listen address")
	b.str(&c.AdminKey, "admin-key", "HOOKRELAY_ADMIN_KEY", "", "admin API key (stored hashed)")
	b.str(&c.PublicURL, "public-url", "HOOKRELAY_PUBLIC_URL", "", "base URL users reach the API and portal at, for portal links")
	b.str(&c.PortalFrameAncestors, "portal-frame-ancestors", "HOOKRELAY_PORTAL_FRAME_ANCESTORS", "", "origins allowed to embed the portal in a frame, space-separated (CSP frame-ancestors)")
	b.num(&c.MaxBacklog, "max-backlog", "HOOKRELAY_MAX_BACKLOG", MaxBacklogDefault, "one app's outbox backlog past which that app's ingest answers 429 + Retry-After (0 = never)")
	b.num(&c.IngestRate, "ingest-rate", "HOOKRELAY_INGEST_RATE", base.IngestRate, "events per second one app key may publish, sustained (429 + Retry-After past it; negative = no limit)")
	b.num(&c.IngestBurst, "ingest-burst", "HOOKRELAY_INGEST_BURST", base.IngestBurst, "events one app key may publish at once above its ingest rate")
	b.duration(&c.HTTPHeaderTimeout, "http-header-timeout", "HOOKRELAY_HTTP_HEADER_TIMEOUT", base.HTTPHeaderTimeout, "how long a client may take to send its request headers; past it the connection is closed")
	b.num(&c.AuthFailuresPerMinute, "auth-failures-per-minute", "HOOKRELAY_AUTH_FAILURES_PER_MINUTE", base.AuthFailuresPerMinute, "failed authentications per client address per minute before requests without a valid key from it get 429")
	b.prefixes(&c.TrustedProxies, "trusted-proxies", "HOOKRELAY_TRUSTED_PROXIES", "reverse proxies and load balancers (comma-separated CIDRs) whose X-Forwarded-For or Forwarded names the client for per-client limits; their connections skip the per-client connection bound")
	b.uses(apiCmd, workerCmd)
	b.boolean(&c.AllowPrivateTargets, "allow-private-targets", "HOOKRELAY_ALLOW_PRIVATE_TARGETS", false, "allow http and loopback/private endpoint addresses (always on in dev)")

	b.uses(dev, workerCmd)
	b.str(&c.EgressProxy, "egress-proxy", "HOOKRELAY_EGRESS_PROXY", "", "forward proxy every attempt goes through with CONNECT, http:// or https://; the address guard checks each target before the CONNECT; an endpoint's egress_proxy (admin key) overrides it")
	b.str(&c.EgressProxyUser, "egress-proxy-user", "HOOKRELAY_EGRESS_PROXY_USER", "", "user sent to the egress proxy (Proxy-Authorization: Basic)")
	b.str(&c.EgressProxyPassword, "egress-proxy-password", "HOOKRELAY_EGRESS_PROXY_PASSWORD", "", "password sent to the egress proxy (prefer the variable: flags show in ps); never logged")
	b.str(&c.ReceiverTraces, "receiver-traces", "HOOKRELAY_RECEIVER_TRACES", base.ReceiverTraces, "trace context receivers are sent while tracing is on: linked (traceparent of the attempt's span in the event's trace), fresh (traceparent of a new trace each attempt; the producer's trace ID never leaves) or off; tracestate is never sent; an endpoint's trace_context overrides it")
	b.boolean(&c.EagerStart, "eager-start", "HOOKRELAY_EAGER_START", true, "start delivery workflows eagerly on the dispatcher's own worker")
	b.num(&c.DispatchBatch, "dispatch-batch", "HOOKRELAY_DISPATCH_BATCH", base.DispatchBatch, "outbox rows claimed per dispatcher round")
	b.str(&c.FirstAttempts, "first-attempts", "HOOKRELAY_FIRST_ATTEMPTS", FirstAttemptsWorkflow, "how first attempts are made: workflow (every delivery its own DeliveryWorkflow, its whole history in Temporal), or for volume sender (from the outbox; a workflow only after a failure) or carrier (many first attempts to one workflow)")
	b.num(&c.CarrierSize, "carrier-size", "HOOKRELAY_CARRIER_SIZE", base.CarrierSize, "most first attempts one carrier workflow makes, at most 50 (1 = one workflow per delivery)")
	b.num(&c.CarrierMin, "carrier-min", "HOOKRELAY_CARRIER_MIN", base.CarrierMin, "fewest new deliveries a dispatcher round carries together")
	b.num(&c.EndpointShare, "endpoint-share", "HOOKRELAY_ENDPOINT_SHARE", base.EndpointShare, "requests one endpoint may have open from one worker at once")
	b.num(&c.BreakerMisses, "breaker-misses", "HOOKRELAY_BREAKER_MISSES", base.BreakerMisses, "requests in a row with no answer (timeouts, failed connections) after which a worker holds an endpoint's attempts until a probe gets one (0: never)")
	b.num(&c.WorkerConcurrency, "worker-concurrency", "HOOKRELAY_WORKER_CONCURRENCY", base.WorkerConcurrency, "concurrent attempts per worker")
	b.num(&c.FailingAfter, "failing-after", "HOOKRELAY_FAILING_AFTER", base.FailingAfter, "consecutive dead letters that make an endpoint failing (endpoint.failing operational webhook)")
	b.duration(&c.AutoDisableAfter, "auto-disable-after", "HOOKRELAY_AUTO_DISABLE_AFTER", base.AutoDisableAfter, "disable an endpoint whose deliveries all failed this long (at least 10 dead letters)")
	b.uses(workerCmd)
	b.str(&c.MetricsAddr, "metrics-addr", "HOOKRELAY_METRICS_ADDR", "", "listen address of a worker process's /metrics (the API serves it on its own address)")

	b.uses(Commands()...)
	b.str(&c.LogLevel, "log-level", "HOOKRELAY_LOG_LEVEL", LogLevelDefault, "debug, info, warn or error")
	return b
}

// Settings lists every setting in the order --help shows them; docs/operations.md's
// configuration table is made from it (see MarkdownTable).
func Settings(base Config) []Setting {
	return define("", &Config{}, func(string) string { return "" }, base).settings
}

// MarkdownTable renders Settings as docs/operations.md's configuration table.
func MarkdownTable(base Config) string {
	var sb strings.Builder
	sb.WriteString("| flag | env | default | commands | meaning |\n|---|---|---|---|---|\n")
	for _, s := range Settings(base) {
		fmt.Fprintf(&sb, "| `%s` | `%s` | %s | %s | %s |\n", s.Flag, s.Env, s.Default, strings.Join(s.Commands, ", "), s.Usage)
	}
	return sb.String()
}

// Load parses args (after the subcommand name) over the environment and
// base, which holds the defaults of the settings a component owns
// (defaults.Components()); config's own defaults are its constants.
func Load(name string, dev bool, args []string, getenv func(string) string, base Config) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{Dev: dev}
	if !slices.Contains(Commands(), name) {
		return c, fmt.Errorf("config: unknown command %q", name)
	}
	b := define(name, &c, getenv, base)
	if err := b.fs.Parse(args); err != nil {
		return c, err
	}
	errs := b.errs
	if b.fs.NArg() > 0 {
		errs = append(errs, "unexpected arguments: "+strings.Join(b.fs.Args(), " "))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Sprintf("shutdown-timeout %s: want a positive Go duration", c.ShutdownTimeout))
	}
	if dev {
		c.AllowPrivateTargets = true
	} else if c.DatabaseURL == "" && name != CommandSetupTemporal {
		errs = append(errs, "database-url (HOOKRELAY_DATABASE_URL) is required outside dev mode")
	}
	if c.DispatchBatch <= 0 || c.DBMaxConns <= 0 {
		errs = append(errs, "dispatch-batch and db-max-conns must be positive")
	}
	switch c.FirstAttempts {
	case FirstAttemptsWorkflow, FirstAttemptsSender, FirstAttemptsCarrier:
	default:
		errs = append(errs, fmt.Sprintf("first-attempts %q: want %s, %s or %s", c.FirstAttempts, FirstAttemptsWorkflow, FirstAttemptsSender, FirstAttemptsCarrier))
	}
	if c.TemporalCompression != TemporalGzip && c.TemporalCompression != TemporalUncompressed && !dev {
		errs = append(errs, fmt.Sprintf("temporal-compression %q: want %s or %s", c.TemporalCompression, TemporalGzip, TemporalUncompressed))
	}
	if (c.TemporalTLSCert == "") != (c.TemporalTLSKey == "") {
		errs = append(errs, "temporal-tls-cert and temporal-tls-key go together: set both or neither")
	}
	if c.EgressProxy != "" {
		// The value is never repeated: it may hold a password.
		if u, err := url.Parse(c.EgressProxy); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			errs = append(errs, "egress-proxy (HOOKRELAY_EGRESS_PROXY): want http://host:port or https://host:port")
		}
	}
	if c.EndpointShare <= 0 {
		errs = append(errs, "endpoint-share must be positive")
	}
	if c.BreakerMisses < 0 {
		errs = append(errs, "breaker-misses must be 0 (off) or more")
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
