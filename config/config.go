// Package config is hookrelay's one configuration struct: every knob, its
// HOOKRELAY_* environment variable, its flag and its default. Flags win over
// the environment, the environment over defaults.
package config

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults.
const (
	DataDirDefault           = "./.data"
	HTTPAddrDefault          = "127.0.0.1:8080"
	TemporalAddressDefault   = "127.0.0.1:7233"
	TemporalUIAddrDefault    = "127.0.0.1:8233"
	TemporalNamespaceDefault = "default"
	PostgresPortDefault      = 54329
	ShutdownTimeoutDefault   = 30 * time.Second
	DispatchBatchDefault     = 200
	DBMaxConnsDefault        = 32
	MaxBacklogDefault        = 20000
	LogLevelDefault          = "info"
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
	// DBMaxConns is the pgx pool size. Env HOOKRELAY_DB_MAX_CONNS.
	DBMaxConns int
	// PostgresPort is the private cluster's port (dev). Env HOOKRELAY_PG_PORT.
	PostgresPort int
	// TemporalAddress is the frontend host:port (the embedded server
	// listens there in dev mode). Env HOOKRELAY_TEMPORAL_ADDRESS.
	TemporalAddress string
	// TemporalNamespace. Env HOOKRELAY_TEMPORAL_NAMESPACE.
	TemporalNamespace string
	// TemporalUIAddr is the embedded Web UI's address (dev); empty disables
	// it. Env HOOKRELAY_TEMPORAL_UI_ADDR.
	TemporalUIAddr string
	// AdminKey is the admin API key; in dev mode one is generated into
	// <data dir>/admin-key when empty. Env HOOKRELAY_ADMIN_KEY.
	AdminKey string
	// SecretKey is the base64 AES-256 key sealing endpoint secrets; in dev
	// mode one is generated into <data dir>/secret-key when empty.
	// Env HOOKRELAY_SECRET_KEY.
	SecretKey string
	// AllowPrivateTargets lets endpoints reach loopback and private
	// addresses. Always true in dev mode. Env HOOKRELAY_ALLOW_PRIVATE_TARGETS.
	AllowPrivateTargets bool
	// LocalActivity runs SendSigned as a local activity.
	// Env HOOKRELAY_LOCAL_ACTIVITY.
	LocalActivity bool
	// EagerStart starts delivery workflows eagerly on the dispatcher's own
	// worker. Env HOOKRELAY_EAGER_START.
	EagerStart bool
	// TemporalShards is the embedded server's history shard count, fixed
	// when its store is created (dev). Env HOOKRELAY_TEMPORAL_SHARDS.
	TemporalShards int
	// TemporalSQLite keeps the embedded server's state in this SQLite file
	// instead of Postgres (dev).
	// Env HOOKRELAY_TEMPORAL_SQLITE.
	TemporalSQLite string
	// DispatchBatch is how many outbox rows the dispatcher claims at once.
	// Env HOOKRELAY_DISPATCH_BATCH.
	DispatchBatch int
	// MaxBacklog is the outbox backlog past which ingest answers 503 with
	// Retry-After (0 disables). Env HOOKRELAY_MAX_BACKLOG.
	MaxBacklog int
	// WorkerConcurrency bounds concurrent attempts per worker.
	// Env HOOKRELAY_WORKER_CONCURRENCY.
	WorkerConcurrency int
	// ShutdownTimeout bounds a graceful stop. Env HOOKRELAY_SHUTDOWN_TIMEOUT.
	ShutdownTimeout time.Duration
	// LogLevel is debug, info, warn or error. Env HOOKRELAY_LOG_LEVEL.
	LogLevel string
}

// Load parses args (after the subcommand name) over the environment.
func Load(name string, dev bool, args []string, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{Dev: dev}
	fs := flag.NewFlagSet("hookrelay "+name, flag.ContinueOnError)
	str := func(p *string, flagName, env, def, usage string) {
		fs.StringVar(p, flagName, or(getenv(env), def), usage+" (env "+env+")")
	}
	var errs []string
	num := func(p *int, flagName, env string, def int, usage string) {
		v := def
		if s := getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: not an integer", env, s))
			}
			v = n
		}
		fs.IntVar(p, flagName, v, usage+" (env "+env+")")
	}
	boolean := func(p *bool, flagName, env string, def bool, usage string) {
		v := def
		if s := getenv(env); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: not a boolean", env, s))
			}
			v = b
		}
		fs.BoolVar(p, flagName, v, usage+" (env "+env+")")
	}
	str(&c.DataDir, "data-dir", "HOOKRELAY_DATA_DIR", DataDirDefault, "dev stack state directory")
	str(&c.HTTPAddr, "http-addr", "HOOKRELAY_HTTP_ADDR", HTTPAddrDefault, "REST API listen address")
	str(&c.DatabaseURL, "database-url", "HOOKRELAY_DATABASE_URL", "", "Postgres URL (dev: empty starts a private cluster)")
	num(&c.DBMaxConns, "db-max-conns", "HOOKRELAY_DB_MAX_CONNS", DBMaxConnsDefault, "Postgres pool size")
	num(&c.PostgresPort, "pg-port", "HOOKRELAY_PG_PORT", PostgresPortDefault, "private Postgres port (dev)")
	str(&c.TemporalAddress, "temporal-address", "HOOKRELAY_TEMPORAL_ADDRESS", TemporalAddressDefault, "Temporal frontend host:port")
	str(&c.TemporalNamespace, "temporal-namespace", "HOOKRELAY_TEMPORAL_NAMESPACE", TemporalNamespaceDefault, "Temporal namespace")
	str(&c.TemporalUIAddr, "temporal-ui-addr", "HOOKRELAY_TEMPORAL_UI_ADDR", TemporalUIAddrDefault, "embedded Temporal Web UI address (dev; empty disables)")
	str(&c.AdminKey, "admin-key", "HOOKRELAY_ADMIN_KEY", "", "admin API key (dev: generated when empty)")
	str(&c.SecretKey, "secret-key", "HOOKRELAY_SECRET_KEY", "", "base64 AES-256 key sealing endpoint secrets (dev: generated when empty)")
	boolean(&c.AllowPrivateTargets, "allow-private-targets", "HOOKRELAY_ALLOW_PRIVATE_TARGETS", false, "allow loopback/private endpoint addresses (always on in dev)")
	boolean(&c.LocalActivity, "local-activity", "HOOKRELAY_LOCAL_ACTIVITY", true, "run SendSigned as a local activity")
	boolean(&c.EagerStart, "eager-start", "HOOKRELAY_EAGER_START", true, "start delivery workflows eagerly")
	num(&c.TemporalShards, "temporal-shards", "HOOKRELAY_TEMPORAL_SHARDS", 4, "embedded Temporal history shards (dev; fixed at first start)")
	str(&c.TemporalSQLite, "temporal-sqlite", "HOOKRELAY_TEMPORAL_SQLITE", "", "embedded Temporal on this SQLite file instead of Postgres")
	num(&c.DispatchBatch, "dispatch-batch", "HOOKRELAY_DISPATCH_BATCH", DispatchBatchDefault, "outbox rows claimed per dispatcher round")
	num(&c.MaxBacklog, "max-backlog", "HOOKRELAY_MAX_BACKLOG", MaxBacklogDefault, "outbox backlog past which ingest sheds with 503 (0 = never)")
	num(&c.WorkerConcurrency, "worker-concurrency", "HOOKRELAY_WORKER_CONCURRENCY", 0, "concurrent attempts per worker (0 = default 256)")
	str(&c.LogLevel, "log-level", "HOOKRELAY_LOG_LEVEL", LogLevelDefault, "debug, info, warn or error")
	shutdown := or(getenv("HOOKRELAY_SHUTDOWN_TIMEOUT"), ShutdownTimeoutDefault.String())
	fs.Func("shutdown-timeout", "graceful stop bound (env HOOKRELAY_SHUTDOWN_TIMEOUT, default "+ShutdownTimeoutDefault.String()+")", func(s string) error {
		shutdown = s
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		errs = append(errs, "unexpected arguments: "+strings.Join(fs.Args(), " "))
	}
	d, err := time.ParseDuration(shutdown)
	if err != nil || d <= 0 {
		errs = append(errs, fmt.Sprintf("shutdown-timeout %q: want a positive Go duration", shutdown))
	}
	c.ShutdownTimeout = d
	if dev {
		c.AllowPrivateTargets = true
	} else if c.DatabaseURL == "" {
		errs = append(errs, "database-url (HOOKRELAY_DATABASE_URL) is required outside dev mode")
	}
	if c.DispatchBatch <= 0 || c.DBMaxConns <= 0 {
		errs = append(errs, "dispatch-batch and db-max-conns must be positive")
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
