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
		"HOOKRELAY_TEMPORAL_API_KEY": "sk-review-temporal-api-key",
		"HOOKRELAY_SECRET_KEY":       "review-sealing-key-base64",
		"HOOKRELAY_DATABASE_URL":     "postgres://u:review-db-password@db/hookrelay",
	}
	for _, args := range [][]string{{"-h"}, {"--http-addr", "0.0.0.0:8080"}} {
		out := stderrOf(t, func() { _, _ = config.Load("worker", false, args, env(secrets), defaults.Components()) })
		require.Contains(t, out, "temporal-api-key", "the usage was printed")
		for name, v := range secrets {
			require.NotContains(t, out, v, "worker %v prints %s", args, name)
		}
	}
}
