// Package pgcluster runs a private PostgreSQL cluster from the system's
// binaries: initialised once in a directory, started on a loopback port, and
// stopped with the process that owns it. When the caller is root the server
// runs as the unprivileged "postgres" user, because PostgreSQL refuses root.
package pgcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the role initdb creates; it is reachable only over loopback
// with trust authentication, so the cluster is private to this machine.
const Superuser = "postgres"

// ErrNoBinaries reports that no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (install the postgresql package, e.g. `apt-get install postgresql`, set HOOKRELAY_PG_BIN to the directory holding initdb and postgres, or set HOOKRELAY_DATABASE_URL)")

// Options configures a private cluster.
type Options struct {
	// Dir holds the cluster's data files. It is created if missing.
	Dir string
	// Port is the TCP port on 127.0.0.1. Zero picks a free one.
	Port int
	// BinDir holds initdb, postgres and pg_ctl. Empty searches
	// /usr/lib/postgresql/*/bin (newest first) and then PATH.
	BinDir string
	// Log receives the server's own output. Nil discards it.
	Log io.Writer
	// Logger reports lifecycle steps. Defaults to slog.Default().
	Logger *slog.Logger
}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	opts Options
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan error
	port int
}

// FindBinDir returns the directory holding the newest system PostgreSQL
// server binaries.
func FindBinDir() (string, error) {
	if dir := os.Getenv("HOOKRELAY_PG_BIN"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err != nil {
			return "", fmt.Errorf("HOOKRELAY_PG_BIN=%s: %w", dir, ErrNoBinaries)
		}
		return dir, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(matches, func(i, j int) bool { return pgMajor(matches[i]) > pgMajor(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	return "", ErrNoBinaries
}

func pgMajor(path string) int {
	// /usr/lib/postgresql/<major>/bin/postgres
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// Start initialises the cluster if Dir is empty and starts the server. It
// returns once the server accepts connections.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.BinDir == "" {
		dir, err := FindBinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolve postgres dir: %w", err)
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	if blocked := unreachable(dir, cred); blocked != "" {
		// A clone under /root (mode 0700): keep the cluster where the
		// postgres user can reach it, one directory per data dir.
		sum := sha256.Sum256([]byte(dir))
		moved := filepath.Join(RelocatedRoot, hex.EncodeToString(sum[:8]), filepath.Base(dir))
		opts.Logger.Warn("the postgres user cannot enter the data dir; the private cluster is kept elsewhere",
			"not_reachable", blocked, "postgres_dir", moved)
		dir = moved
	}
	opts.Dir = dir
	if err := prepareDir(opts.Dir, cred); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		opts.Logger.Info("initialising private postgres cluster", "dir", opts.Dir)
		initdb := exec.CommandContext(ctx, filepath.Join(opts.BinDir, "initdb"),
			"-D", opts.Dir, "-U", Superuser, "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := initdb.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb %s: %w: %s", opts.Dir, err, strings.TrimSpace(string(out)))
		}
	}
	port := opts.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{opts: opts, port: port, cred: cred}
	if err := c.launch(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// launch starts the server process and waits until it accepts connections.
func (c *Cluster) launch(ctx context.Context) error {
	// A kill -9 of a previous owner can leave postmaster.pid behind; postgres
	// itself checks whether that pid is alive, so the file is left to it.
	cmd := exec.Command(filepath.Join(c.opts.BinDir, "postgres"),
		"-D", c.opts.Dir,
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+c.opts.Dir,
		"-c", "max_connections=300",
		"-c", "shared_buffers=256MB",
		"-c", "logging_collector=off",
	)
	cmd.Stdout, cmd.Stderr = c.opts.Log, c.opts.Log
	// Pdeathsig stops the server if this process dies without cleaning up
	// (kill -9), so no postgres outlives its owner. Its own process group
	// keeps a terminal's Ctrl-C from reaching it before hookrelay is done.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd = cmd
	c.done = make(chan error, 1)
	go func() { c.done <- cmd.Wait() }()
	if err := c.waitReady(ctx); err != nil {
		_ = c.Stop()
		return err
	}
	c.opts.Logger.Info("private postgres started", "dir", c.opts.Dir, "port", c.port, "pid", cmd.Process.Pid)
	return nil
}

// Start starts a stopped server again (after Stop or Kill).
func (c *Cluster) Start(ctx context.Context) error { return c.launch(ctx) }

// Dir is where the cluster's files are: Options.Dir, or a directory under
// RelocatedRoot when the postgres user cannot reach Options.Dir.
func (c *Cluster) Dir() string { return c.opts.Dir }

// Port is the TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// URL returns a connection URL for database name as the superuser.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, c.port, database)
}

// PID is the postmaster's process ID.
func (c *Cluster) PID() int { return c.cmd.Process.Pid }

func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case exitErr := <-c.done:
			c.done <- exitErr
			return fmt.Errorf("postgres exited during start (see its log in %s): %v", c.opts.Dir, exitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 60s: %w", err)
		}
	}
}

// Stop shuts the server down (fast mode: active sessions are rolled back,
// data is flushed) and waits for it to exit.
func (c *Cluster) Stop() error {
	if c.cmd.Process == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-c.done:
		c.done <- err
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		err := <-c.done
		c.done <- err
	}
	c.opts.Logger.Info("private postgres stopped", "dir", c.opts.Dir)
	return nil
}

// CreateDatabase creates name unless it exists. adminURL must reach a
// database of the same server as a role allowed to create databases.
func CreateDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to create database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// runAs returns the credential the server runs under: nil for a non-root
// caller, the postgres user for root.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a 'postgres' user to run the private cluster (install the postgresql package or run as a normal user): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// RelocatedRoot holds private clusters whose data dir the postgres user
// cannot reach (root's clone under /root, mode 0700).
const RelocatedRoot = "/var/lib/hookrelay"

// unreachable returns the first parent of dir that the server's user cannot
// enter, or "" when it can reach dir (always for a non-root caller).
func unreachable(dir string, cred *syscall.Credential) string {
	if cred == nil {
		return ""
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			// Not there yet: MkdirAll creates it with mode 0700, reachable
			// only through its parents, checked next.
			if p == "/" {
				return ""
			}
			continue
		}
		if st.Mode().Perm()&0o001 == 0 {
			sys, ok := st.Sys().(*syscall.Stat_t)
			if !ok || sys.Uid != cred.Uid {
				return p
			}
		}
		if p == "/" {
			return ""
		}
	}
}

// prepareDir creates dir owned by the server's user with mode 0700; its
// parents are made traversable by others (0711 at least) where they were
// created here.
func prepareDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("create postgres dir: %w", err)
	}
	if cred == nil {
		return nil
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("chown postgres dir to the postgres user: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod postgres dir: %w", err)
	}
	if p := unreachable(dir, cred); p != "" {
		return fmt.Errorf("the postgres user cannot enter %s; choose a data dir outside it with --data-dir or HOOKRELAY_DATA_DIR", p)
	}
	return nil
}
