package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/pgcluster"
)

// walkthrough is the README's two-minute walkthrough: its first sh block.
func walkthrough(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)## Two-minute walkthrough\n.*?```sh\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "README.md has a two-minute walkthrough")
	return string(m[1])
}

// TestREADMEWalkthrough runs the README's walkthrough as written (bash,
// curl, jq, python3) against `hookrelay dev`, with only the API's address
// and the receiver's port put in, and checks what it says happens does:
// the app and endpoint are made, the event is accepted and delivered to the
// walkthrough's receiver, the three questions are answered.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthrough needs %s: %v", tool, err)
		}
	}
	base := stackDir(t, "hookrelay-walkthrough-")
	p := startDev(t, filepath.Join(base, ".data"), false)
	ports, err := pgcluster.FreePorts(1)
	require.NoError(t, err)
	script := walkthrough(t)
	require.Contains(t, script, "http://127.0.0.1:8080")
	require.Contains(t, script, "9000")
	script = strings.ReplaceAll(script, "http://127.0.0.1:8080", "http://"+p.api)
	script = strings.ReplaceAll(script, "9000", fmt.Sprint(ports[0]))
	// Its receiver starts in the background: give it a moment before the
	// endpoint gets its first attempt (1 s after the event).
	script = strings.Replace(script, "serve_forever()' &\n", "serve_forever()' &\nsleep 0.5\n", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The background receiver keeps the script's output open: Wait returns
	// once the script itself exited.
	cmd.WaitDelay = time.Second
	var out, errOut lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the background receiver too
	if err := cmd.Wait(); !errors.Is(err, exec.ErrWaitDelay) {
		require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}

	said := out.String()
	require.Contains(t, said, `"secret": "whsec_`, "the endpoint's secret, shown once")
	require.Regexp(t, `"deliveries": \[\s*\{\s*"id": "dlv_`, said, "the event's deliveries")
	require.Contains(t, said, `"status": "pending"`, "the delivery's state, asked at once")
	raw, err := os.ReadFile(filepath.Join(base, ".data", "admin-key"))
	require.NoError(t, err)
	key := strings.TrimSpace(string(raw))
	require.Eventually(t, func() bool {
		code, body := get(t, "http://"+p.api+"/v1/apps", key)
		require.Equal(t, 200, code)
		var apps struct{ Data []struct{ ID, Name string } }
		require.NoError(t, json.Unmarshal(body, &apps))
		acme := ""
		for _, a := range apps.Data {
			if a.Name == "acme" {
				acme = a.ID
			}
		}
		require.NotEmpty(t, acme, "the walkthrough's app: %s", body)
		code, body = get(t, "http://"+p.api+"/v1/apps/"+acme+"/deliveries", key)
		require.Equal(t, 200, code)
		return bytes.Contains(body, []byte(`"status":"succeeded"`))
	}, time.Minute, 200*time.Millisecond, "the walkthrough's event is delivered to its receiver")
}
