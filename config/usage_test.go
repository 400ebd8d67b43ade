package config_test

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/config"
	"hookrelay/internal/defaults"
)

// stderrOf runs f with os.Stderr captured (the flag package prints usage
// there).
func stderrOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	f()
	os.Stderr = old
	w.Close()
	return <-done
}

// TestUsageNeverShowsTheEnvironment: the usage, printed on -h and on any
// flag error (so into a container's log), shows the code's defaults, never
// a value from the environment, where the API key, the sealing key and the
// database password live.
func TestUsageNeverShowsTheEnvironment(t *testing.T) {
	secrets := map[string]string{
		"HOOKRELAY_TEMPORAL_API_KEY":      "sk-review-temporal-api-key",
		"HOOKRELAY_SECRET_KEY":            "review-sealing-key-base64",
		"HOOKRELAY_DATABASE_URL":          "postgres://u:review-db-password@db/hookrelay",
		"HOOKRELAY_EGRESS_PROXY":          "http://relay:review-proxy-url-password@proxy.internal:3128",
		"HOOKRELAY_EGRESS_PROXY_PASSWORD": "review-proxy-password",
	}
	for _, args := range [][]string{{"-h"}, {"--http-addr", "0.0.0.0:8080"}} {
		out := stderrOf(t, func() { _, _ = config.Load("worker", false, args, env(secrets), defaults.Components()) })
		require.Contains(t, out, "temporal-api-key", "the usage was printed")
		for name, v := range secrets {
			require.NotContains(t, out, v, "worker %v prints %s", args, name)
		}
	}
}

// TestEgressProxyErrorsNeverShowTheURL: a proxy URL that cannot be used
// is refused naming the setting, never repeating the URL (it may hold a
// password).
func TestEgressProxyErrorsNeverShowTheURL(t *testing.T) {
	for _, bad := range []string{"socks5://relay:review-pw@proxy:1080", "relay:review-pw@proxy:3128", "http://relay:review-pw@:3128"} {
		_, err := config.Load("worker", false, nil, env(map[string]string{"HOOKRELAY_DATABASE_URL": "postgres://db/x", "HOOKRELAY_EGRESS_PROXY": bad}), defaults.Components())
		require.ErrorContains(t, err, "egress-proxy (HOOKRELAY_EGRESS_PROXY)", bad)
		require.NotContains(t, err.Error(), "review-pw", bad)
	}
	c, err := config.Load("worker", false, []string{"--egress-proxy", "https://proxy.internal:3128"},
		env(map[string]string{"HOOKRELAY_DATABASE_URL": "postgres://db/x", "HOOKRELAY_EGRESS_PROXY_USER": "relay", "HOOKRELAY_EGRESS_PROXY_PASSWORD": "pw"}), defaults.Components())
	require.NoError(t, err)
	require.Equal(t, []string{"https://proxy.internal:3128", "relay", "pw"}, []string{c.EgressProxy, c.EgressProxyUser, c.EgressProxyPassword})
}
