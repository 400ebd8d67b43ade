package devstack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/pgcluster"
)

// retryCounter counts Start's "trying other ports" warnings.
type retryCounter struct{ n *atomic.Int32 }

func (h retryCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h retryCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "trying other ports") {
		h.n.Add(1)
	}
	return nil
}
func (h retryCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h retryCounter) WithGroup(string) slog.Handler      { return h }

// ownListeners counts the TCP sockets this process listens on.
func ownListeners(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			c := strings.Fields(line)
			if len(c) > 9 && c[3] == "0A" && inodes[c[9]] {
				n++
			}
		}
	}
	return n
}

func startPostgres(t *testing.T) *pgcluster.Cluster {
	t.Helper()
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skip(err)
	}
	base, err := os.MkdirTemp("", "hookrelay-devstack-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(base, 0o755))
	t.Cleanup(func() { os.RemoveAll(base) })
	discard := slog.New(slog.DiscardHandler)
	pg, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: filepath.Join(base, "pg"), Log: io.Discard, Logger: discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })
	return pg
}

// TestStartDoesNotRetryATakenFixedFrontendPort: when the frontend port
// the caller fixed is the one taken, other ports cannot help: Start
// reports it at once, without building the server on it.
func TestStartDoesNotRetryATakenFixedFrontendPort(t *testing.T) {
	pg := startPostgres(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })

	var retries atomic.Int32
	s, err := Start(context.Background(), Options{PostgresURL: pg.URL("postgres"), FrontendAddr: taken.Addr().String(),
		Logger: slog.New(retryCounter{&retries})})
	if s != nil {
		s.Stop()
	}
	require.True(t, errors.Is(err, syscall.EADDRINUSE), "%v", err)
	require.Zero(t, retries.Load(), "the server was built again on the same taken frontend port")
}

// TestFailedStartLeavesNoListener: a Start that fails because a port is
// taken leaves none of the server's listeners (gRPC, membership) bound in
// the process.
func TestFailedStartLeavesNoListener(t *testing.T) {
	pg := startPostgres(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })

	before := ownListeners(t)
	s, err := Start(context.Background(), Options{PostgresURL: pg.URL("postgres"), FrontendAddr: taken.Addr().String(),
		Logger: slog.New(slog.DiscardHandler)})
	if s != nil {
		s.Stop()
	}
	require.Error(t, err)
	require.Equal(t, before, ownListeners(t), "listeners left bound by the failed start")
}

// TestStartServerReportsATakenPort: a port the server cannot bind (here
// its history service's, taken by another listener) makes startServer
// return a *FatalError saying the address is in use, which Start's retry
// recognises, instead of the server's logger panicking the process.
func TestStartServerReportsATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })
	ports, err := pickPorts(0)
	require.NoError(t, err)
	ports[portHistory] = taken.Addr().(*net.TCPAddr).Port

	opts := Options{Logger: slog.New(slog.DiscardHandler)}
	opts.withDefaults()
	db, err := sqliteStore(filepath.Join(t.TempDir(), "temporal.db"), "active", opts.Namespace, opts.SearchAttributes)
	require.NoError(t, err)
	logger := serverLogger{l: opts.Logger, min: new(slog.LevelVar)}
	srv, _, err := startServer(opts, "127.0.0.1", ports, logger, db, db)
	if srv != nil {
		srv.Stop()
	}
	var fatal *FatalError
	require.True(t, errors.As(err, &fatal), "%T: %v", err, err)
	require.True(t, errors.Is(err, syscall.EADDRINUSE), "%v", err)
}
