package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/pgcluster"
)

// The test binary doubles as the hookrelay binary for the dev-stack test.
func TestMain(m *testing.M) {
	if os.Getenv("HOOKRELAY_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type devProc struct {
	cmd      *exec.Cmd
	stderr   *lockedBuffer
	api      string
	temporal string // host:port of the embedded Temporal frontend
	pgPort   int
	ui       string // host:port of the Temporal UI, "" when off
	exited   chan error
}

// databaseURL reaches hookrelay's database on the private cluster.
func (p *devProc) databaseURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/hookrelay?sslmode=disable", p.pgPort)
}

// lockedBuffer is a bytes.Buffer safe for one writer and many readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDev runs `hookrelay dev` on fresh ports (the UI only when withUI),
// retrying when another process took a port between choosing and binding.
func startDev(t *testing.T, dataDir string, withUI bool) *devProc {
	t.Helper()
	for try := 1; ; try++ {
		p, err := tryStartDev(t, dataDir, withUI)
		if err == nil {
			return p
		}
		if try == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
}

func tryStartDev(t *testing.T, dataDir string, withUI bool) (*devProc, error) {
	ports, err := pgcluster.FreePorts(2)
	require.NoError(t, err)
	ui := ""
	if withUI {
		ui = fmt.Sprintf("127.0.0.1:%d", ports[0])
	}
	p, m, err := startProc(t, []string{"HOOKRELAY_ADMIN_KEY=", "HOOKRELAY_SECRET_KEY=", "HOOKRELAY_DATABASE_URL="},
		regexp.MustCompile(`hookrelay dev is up" api=http://(\S+) temporal=(\S+)`),
		"dev", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0",
		"--temporal-address", "127.0.0.1:0", "--temporal-ui-addr", ui, "--pg-port", strconv.Itoa(ports[1]))
	if err != nil {
		return nil, err
	}
	p.api, p.temporal, p.ui, p.pgPort = m[1], m[2], ui, ports[1]
	return p, nil
}

// startProc runs this binary as `hookrelay args…` with env added to the
// environment, and returns once a line of its log matches ready (with the
// match), or the error it exited with.
func startProc(t *testing.T, env []string, ready *regexp.Regexp, args ...string) (*devProc, []string, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "HOOKRELAY_TEST_MAIN=1"), env...)
	// A test that panics runs no cleanup: the process must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	p := &devProc{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	require.NoError(t, cmd.Start())
	up := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			p.stderr.WriteString(line + "\n")
			if m := ready.FindStringSubmatch(line); m != nil {
				select {
				case up <- m:
				default:
				}
			}
		}
	}()
	go func() { p.exited <- cmd.Wait(); pw.Close() }()
	select {
	case m := <-up:
		return p, m, nil
	case err := <-p.exited:
		return nil, nil, fmt.Errorf("hookrelay %s exited: %v\n%s", args[0], err, p.stderr)
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		return nil, nil, fmt.Errorf("hookrelay %s not up within 120s\n%s", args[0], p.stderr)
	}
}

func (p *devProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-p.exited:
		require.NoError(t, err, p.stderr.String())
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatal("hookrelay dev did not stop within 60s after Ctrl-C")
	}
}

func get(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// postmasterPID reads the running server's pid from the cluster directory.
func postmasterPID(t *testing.T, dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	require.NoError(t, err)
	return pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// stackDir is a directory for a test's stack (its Postgres cluster runs as
// an unprivileged user, so it is world-readable), removed after the test;
// the test is skipped where PostgreSQL is not installed.
func stackDir(t *testing.T, prefix string) string {
	t.Helper()
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skip(err)
	}
	base, err := os.MkdirTemp("", prefix)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(base, 0o755))
	t.Cleanup(func() { os.RemoveAll(base) })
	return base
}

func TestDevStack(t *testing.T) {
	base := stackDir(t, "hookrelay-dev-")
	dataDir := filepath.Join(base, "data")

	start := time.Now()
	p := startDev(t, dataDir, true)
	t.Logf("dev stack up in %s", time.Since(start).Round(time.Millisecond))
	code, _ := get(t, "http://"+p.api+"/healthz", "")
	require.Equal(t, 200, code)
	code, body := get(t, "http://"+p.api+"/readyz", "")
	require.Equal(t, 200, code, string(body))
	require.Contains(t, string(body), `"status":"ok"`)
	ui := "http://" + p.ui
	code, _ = get(t, ui+"/", "")
	require.Equal(t, 200, code, "Temporal Web UI")
	code, body = get(t, ui+"/api/v1/namespaces", "")
	require.Equal(t, 200, code, string(body))
	require.Contains(t, string(body), `"default"`, "the default namespace is listed in the UI")

	keyFile := filepath.Join(dataDir, "admin-key")
	st, err := os.Stat(keyFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	raw, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	key := strings.TrimSpace(string(raw))
	require.Equal(t, 1, strings.Count(p.stderr.String(), key), "the admin key is printed once")

	// Data written in the first run survives a restart.
	req, _ := http.NewRequest("POST", "http://"+p.api+"/v1/apps", strings.NewReader(`{"name":"survivor"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var created struct{ ID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	resp.Body.Close()
	require.Equal(t, 201, resp.StatusCode)

	pgDir := filepath.Join(dataDir, "postgres")
	pid := postmasterPID(t, pgDir)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	uid := regexp.MustCompile(`(?m)^Uid:\s+(\d+)`).FindStringSubmatch(string(status))[1]
	if os.Geteuid() == 0 {
		require.NotEqual(t, "0", uid, "postgres must not run as root")
	}

	p.stop(t)
	require.False(t, alive(pid), "postgres is gone after exit")
	out, _ := exec.Command("pgrep", "-f", pgDir).Output()
	require.Empty(t, strings.TrimSpace(string(out)), "no stray processes")

	p2 := startDev(t, dataDir, false)
	defer p2.stop(t)
	require.NotContains(t, p2.stderr.String(), key, "not printed again")
	code, body = get(t, "http://"+p2.api+"/v1/apps/"+created.ID, key)
	require.Equal(t, 200, code, "same admin key, same data: %s", body)
}
