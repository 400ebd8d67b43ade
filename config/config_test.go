package config_test

import (
	"flag"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/config"
	"hookrelay/internal/defaults"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := config.Load("dev", true, nil, env(nil), defaults.Components())
	require.NoError(t, err)
	require.Equal(t, config.DataDirDefault, c.DataDir)
	require.Equal(t, config.HTTPAddrDefault, c.HTTPAddr)
	require.Equal(t, config.TemporalAddressDefault, c.TemporalAddress)
	require.Equal(t, config.TemporalUIAddrDefault, c.TemporalUIAddr)
	require.Equal(t, config.ShutdownTimeoutDefault, c.ShutdownTimeout)
	require.True(t, c.AllowPrivateTargets, "dev mode allows private targets")
	require.True(t, c.EagerStart)
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	e := env(map[string]string{"HOOKRELAY_HTTP_ADDR": "127.0.0.1:1", "HOOKRELAY_DATABASE_URL": "postgres://env", "HOOKRELAY_SHUTDOWN_TIMEOUT": "5s", "HOOKRELAY_EAGER_START": "false"})
	c, err := config.Load("api", false, []string{"--http-addr", "127.0.0.1:2"}, e, defaults.Components())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:2", c.HTTPAddr)
	require.Equal(t, "postgres://env", c.DatabaseURL)
	require.Equal(t, 5*time.Second, c.ShutdownTimeout)
	require.True(t, c.EagerStart, "the API does not read the worker's settings")
	require.False(t, c.AllowPrivateTargets, "production refuses private targets by default")
	c, err = config.Load("worker", false, nil, e, defaults.Components())
	require.NoError(t, err)
	require.False(t, c.EagerStart)
}

// TestEachCommandHasItsOwnFlags: `hookrelay <command> -h` lists only what
// that command reads; a flag of another command is refused.
func TestEachCommandHasItsOwnFlags(t *testing.T) {
	flags := func(cmd string) string {
		var names []string
		for _, s := range config.Settings(defaults.Components()) {
			if slices.Contains(s.Commands, cmd) {
				names = append(names, s.Flag)
			}
		}
		return strings.Join(names, " ")
	}
	worker := flags("worker")
	for _, apiOnly := range []string{"--admin-key", "--http-header-timeout", "--auth-failures-per-minute", "--http-addr", "--trusted-proxies"} {
		require.NotContains(t, worker, apiOnly)
		require.Contains(t, flags("api"), apiOnly)
	}
	for _, workerOnly := range []string{"--carrier-size", "--first-attempts", "--worker-concurrency", "--metrics-addr"} {
		require.NotContains(t, flags("api"), workerOnly)
		require.Contains(t, worker, workerOnly)
	}
	require.Equal(t, "--database-url --log-level", flags("migrate"))
	require.Equal(t, "--temporal-address --temporal-namespace --temporal-tls --temporal-tls-ca --temporal-tls-cert --temporal-tls-key "+
		"--temporal-tls-server-name --temporal-compression --temporal-api-key --log-level", flags("setup-temporal"))
	require.NotContains(t, flags("dev"), "--temporal-tls", "dev embeds its own Temporal")

	_, err := config.Load("worker", false, []string{"--database-url", "postgres://x", "--admin-key", "k"}, env(nil), defaults.Components())
	require.ErrorContains(t, err, "admin-key")
	_, err = config.Load("api", false, []string{"--database-url", "postgres://x", "--temporal-tls-cert", "c.pem"}, env(nil), defaults.Components())
	require.ErrorContains(t, err, "temporal-tls-key")
	c, err := config.Load("setup-temporal", false, []string{"--temporal-api-key", "k"}, env(map[string]string{"HOOKRELAY_TEMPORAL_TLS_CA": "ca.pem"}), defaults.Components())
	require.NoError(t, err, "setup-temporal needs no database")
	require.Equal(t, "k", c.TemporalAPIKey)
	require.Equal(t, "ca.pem", c.TemporalTLSCA)
	_, err = config.Load("serve", false, nil, env(nil), defaults.Components())
	require.ErrorContains(t, err, "unknown command")
}

func TestErrorsNameTheSetting(t *testing.T) {
	_, err := config.Load("api", false, nil, env(nil), defaults.Components())
	require.ErrorContains(t, err, "HOOKRELAY_DATABASE_URL")
	_, err = config.Load("dev", true, nil, env(map[string]string{"HOOKRELAY_DB_MAX_CONNS": "many"}), defaults.Components())
	require.ErrorContains(t, err, "HOOKRELAY_DB_MAX_CONNS")
	_, err = config.Load("dev", true, []string{"--shutdown-timeout", "soon"}, env(nil), defaults.Components())
	require.ErrorContains(t, err, "shutdown-timeout")
	_, err = config.Load("dev", true, []string{"extra"}, env(nil), defaults.Components())
	require.ErrorContains(t, err, "unexpected arguments")
}

var update = flag.Bool("update", false, "rewrite docs/operations.md's configuration table")

// TestREADMETable: docs/operations.md's configuration table is config.Settings, so
// a default changed in code cannot leave the docs behind.
func TestREADMETable(t *testing.T) {
	const path = "../docs/operations.md"
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(raw)
	const begin, end = "<!-- config:begin (generated from config.Settings; go test ./config -update) -->\n", "<!-- config:end -->"
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	require.True(t, i >= 0 && j > i, "docs/operations.md has the config markers")
	want := config.MarkdownTable(defaults.Components())
	if *update {
		readme = readme[:i+len(begin)] + want + readme[j:]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
		return
	}
	require.Equal(t, want, readme[i+len(begin):j], "run go test ./config -update")
}

func TestEveryDefaultIsTheFlagDefault(t *testing.T) {
	c, err := config.Load("worker", false, []string{"--database-url", "postgres://x"}, env(nil), defaults.Components())
	require.NoError(t, err)
	for _, s := range config.Settings(defaults.Components()) {
		require.NotEmpty(t, s.Default, s.Flag)
		require.NotEmpty(t, s.Usage, s.Flag)
	}
	require.Equal(t, 4, c.TemporalShards)
	require.Equal(t, 30*time.Second, c.ShutdownTimeout)
}

// TestTrustedProxiesAndIngestLimits: --trusted-proxies takes
// comma-separated CIDRs (a bare address is its own host route) from the
// flag or HOOKRELAY_TRUSTED_PROXIES, none by default; a bad entry names the
// setting. The ingest limits default to the API's.
func TestTrustedProxiesAndIngestLimits(t *testing.T) {
	c, err := config.Load("dev", true, nil, env(nil), defaults.Components())
	require.NoError(t, err)
	require.Empty(t, c.TrustedProxies)
	require.Equal(t, api.IngestRateDefault, c.IngestRate)
	require.Equal(t, api.IngestBurstDefault, c.IngestBurst)

	c, err = config.Load("dev", true, nil, env(map[string]string{"HOOKRELAY_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1,2001:db8::/32", "HOOKRELAY_INGEST_RATE": "50"}), defaults.Components())
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/32")}, c.TrustedProxies)
	require.Equal(t, 50, c.IngestRate)
	c, err = config.Load("dev", true, []string{"--trusted-proxies", "172.16.0.0/12"}, env(map[string]string{"HOOKRELAY_TRUSTED_PROXIES": "10.0.0.0/8"}), defaults.Components())
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}, c.TrustedProxies, "the flag wins")

	_, err = config.Load("dev", true, nil, env(map[string]string{"HOOKRELAY_TRUSTED_PROXIES": "10.0.0.0/8,proxy.internal"}), defaults.Components())
	require.ErrorContains(t, err, "HOOKRELAY_TRUSTED_PROXIES")
	_, err = config.Load("dev", true, []string{"--trusted-proxies", "10.0.0.0/33"}, env(nil), defaults.Components())
	require.ErrorContains(t, err, "trusted-proxies")
}
