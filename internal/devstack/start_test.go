package devstack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/pgcluster"
)

// TestStartReportsATakenPort: a frontend port something else listens on
// makes Start return a typed error saying the address is in use, after its
// retries, instead of the server's logger panicking the process.
func TestStartReportsATakenPort(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skip(err)
	}
	base, err := os.MkdirTemp("", "hookrelay-devstack-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(base, 0o755))
	t.Cleanup(func() { os.RemoveAll(base) })
	ctx := context.Background()
	discard := slog.New(slog.DiscardHandler)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(base, "pg"), Log: io.Discard, Logger: discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })

	s, err := Start(ctx, Options{PostgresURL: pg.URL("postgres"), FrontendAddr: taken.Addr().String(), Logger: discard})
	if s != nil {
		s.Stop()
	}
	require.Error(t, err)
	var fatal *FatalError
	require.True(t, errors.As(err, &fatal), "%T: %v", err, err)
	require.True(t, errors.Is(err, syscall.EADDRINUSE), "%v", err)
}
