package integration

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/pgcluster"
)

// exampleReceiver runs one of examples/receivers and collects its lines.
type exampleReceiver struct {
	mu    sync.Mutex
	lines []string
	up    chan struct{}
}

func (e *exampleReceiver) has(line string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.lines {
		if l == line {
			return true
		}
	}
	return false
}

func startExample(t *testing.T, dir string, env []string, name string, args ...string) *exampleReceiver {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e := &exampleReceiver{up: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			e.mu.Lock()
			e.lines = append(e.lines, sc.Text())
			e.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "listening") {
				close(e.up)
			}
		}
	}()
	select {
	case <-e.up:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start listening", name)
	}
	return e
}

// TestExampleReceivers runs the Node.js (stock standardwebhooks package)
// and the Python (standard library only) example receivers against real
// deliveries: each verifies a delivery and refuses a forgery. A missing
// toolchain skips its case, saying so.
func TestExampleReceivers(t *testing.T) {
	root, err := filepath.Abs("../examples/receivers")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, tool, dir string
		args            []string
		install         bool
	}{
		{"node", "node", "node", []string{"server.js"}, true},
		{"python", "python3", "python", []string{"server.py"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				t.Skipf("%s is not installed; the %s example receiver is not tested", tc.tool, tc.name)
			}
			if tc.install {
				out, err := exec.Command(filepath.Join(root, "install")).CombinedOutput()
				var exit *exec.ExitError
				if errors.As(err, &exit) && exit.ExitCode() == 3 {
					t.Skipf("the %s example's packages cannot be installed: %s", tc.name, out)
				}
				require.NoError(t, err, string(out))
			}
			h := newHarness(t)
			appID := h.createApp()
			port, err := pgcluster.FreePort()
			require.NoError(t, err)
			url := fmt.Sprintf("http://127.0.0.1:%d/webhook", port)
			ep := h.createEndpoint(appID, map[string]any{"url": url})
			rc := startExample(t, filepath.Join(root, tc.dir), []string{"WEBHOOK_SECRET=" + ep.Secret, fmt.Sprintf("PORT=%d", port)}, tc.tool, tc.args...)

			ev := h.send(appID, "order.paid", map[string]any{"amount": 4200, "note": "ünïcødé ✓"})
			h.waitDelivery(appID, ev.Deliveries[0].ID, 20*time.Second, delivery.StatusSucceeded)
			require.Eventually(t, func() bool { return rc.has("verified " + ev.ID) }, 5*time.Second, 20*time.Millisecond)

			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"id":"evt_forged","data":{}}`))
			req.Header.Set("webhook-id", "evt_forged")
			req.Header.Set("webhook-timestamp", fmt.Sprint(time.Now().Unix()))
			req.Header.Set("webhook-signature", "v1,"+strings.Repeat("A", 43)+"=")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			require.False(t, rc.has("verified evt_forged"))
		})
	}
}
