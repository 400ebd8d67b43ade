package delivery_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goList runs `go list` with a template over pkg.
func goList(t *testing.T, format string, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, args...)...).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// TestLayering pins who may depend on whom: a producer that publishes in its
// own transaction (outbox) and the API link no Temporal code; the workflow
// knows nothing of Postgres; the receiver kit links nothing of the sender's;
// the vocabulary imports nothing of hookrelay's.
func TestLayering(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"hookrelay/outbox", "hookrelay/api", "hookrelay/delivery", "hookrelay/internal/tracing"} {
		for _, dep := range goList(t, "{{.ImportPath}}", "-deps", pkg) {
			require.False(t, strings.HasPrefix(dep, "go.temporal.io/"), "%s depends on %s", pkg, dep)
		}
	}
	// The workflows link, transitively, only the leaf packages they
	// exchange with their activities: no Postgres driver, no store, no
	// receiver kit.
	for _, dep := range goList(t, "{{.ImportPath}}", "-deps", "hookrelay/workflows") {
		if strings.HasPrefix(dep, "hookrelay/") {
			require.Contains(t, []string{"hookrelay/workflows", "hookrelay/attempt", "hookrelay/delivery"}, dep, "workflows depend on %s", dep)
		}
		require.False(t, strings.HasPrefix(dep, "github.com/jackc/pgx"), "workflows depend on %s", dep)
	}
	// The receiver kit, which a customer vendors, links nothing of the
	// sender's: hookrelay's packages it may use are its own and metrics.
	for _, dep := range goList(t, "{{.ImportPath}}", "-deps", "hookrelay/receiver", "hookrelay/inbox", "hookrelay/webhook") {
		if strings.HasPrefix(dep, "hookrelay/") {
			require.Contains(t, []string{"hookrelay/receiver", "hookrelay/inbox", "hookrelay/webhook", "hookrelay/metrics"}, dep, "the receiver kit depends on %s", dep)
		}
		require.False(t, strings.HasPrefix(dep, "github.com/google/cel-go"), "the receiver kit depends on %s", dep)
		require.False(t, strings.HasPrefix(dep, "go.temporal.io/"), "the receiver kit depends on %s", dep)
	}
	for _, imp := range goList(t, "{{join .Imports \"\\n\"}}", "hookrelay/delivery") {
		require.False(t, strings.HasPrefix(imp, "hookrelay/"), "delivery imports %s", imp)
	}
}
