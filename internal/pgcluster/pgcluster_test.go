package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hookrelay/internal/pgcluster"
)

// TestUnreachableDataDir: as root, a data dir inside a directory the
// postgres user cannot enter (a clone under /root, mode 0700) still gets a
// working cluster, kept under RelocatedRoot.
func TestUnreachableDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the cluster to the postgres user")
	}
	private, err := os.MkdirTemp("", "hookrelay-private-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(private) })
	require.NoError(t, os.Chmod(private, 0o700))
	want := filepath.Join(private, "data", "postgres")

	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: want})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Stop()
		os.RemoveAll(filepath.Dir(c.Dir()))
	})
	require.True(t, strings.HasPrefix(c.Dir(), pgcluster.RelocatedRoot+"/"), c.Dir())
	conn, err := pgx.Connect(context.Background(), c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var one int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
}
