package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
)

// sequenceReceiver records, per ordering key, each request's event number
// and webhook-sequence in arrival order, and fails the first request of
// every fifth event (so sequences also wait on retries in their own
// workflows when the process dies).
type sequenceReceiver struct {
	mu     sync.Mutex
	got    map[string][]int
	seqs   map[string][]string
	failed map[string]bool
}

func (s *sequenceReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var env struct {
		Data struct {
			Key string `json:"key"`
			I   int    `json:"i"`
		} `json:"data"`
	}
	body, _ := io.ReadAll(r.Body)
	if json.Unmarshal(body, &env) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, i := env.Data.Key, env.Data.I
	s.got[k] = append(s.got[k], i)
	s.seqs[k] = append(s.seqs[k], r.Header.Get(delivery.HeaderSequence))
	id := k + "/" + strconv.Itoa(i)
	if i%5 == 0 && !s.failed[id] {
		s.failed[id] = true
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// delivered counts the distinct events received per key.
func (s *sequenceReceiver) delivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, got := range s.got {
		n += len(slices.Compact(slices.Clone(got)))
	}
	return n
}

// TestKillNineMidSequence kills the whole dev process (worker, sequencers,
// embedded Temporal, the private Postgres through its parent-death signal)
// while three keys of a fifo endpoint are being sent, then starts it again:
// every event arrives, and each key's requests arrive in acceptance order
// (a request cut off by the kill may come again, never after a later one).
func TestKillNineMidSequence(t *testing.T) {
	base := stackDir(t, "hookrelay-crash-ordered-")
	dataDir := filepath.Join(base, "data")
	rc := &sequenceReceiver{got: map[string][]int{}, seqs: map[string][]string{}, failed: map[string]bool{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)

	p := startDev(t, dataDir, false)
	raw, err := os.ReadFile(filepath.Join(dataDir, "admin-key"))
	require.NoError(t, err)
	r := &crashRig{t: t, key: strings.TrimSpace(string(raw))}
	var app struct{ ID string }
	require.Equal(t, 201, r.call(p, "POST", "/v1/apps", map[string]any{"name": "crash-ordered"}, &app))
	require.Equal(t, 201, r.call(p, "POST", "/v1/apps/"+app.ID+"/endpoints", map[string]any{
		"url": srv.URL + "/hook", "ordering": "fifo", "retry_schedule": []string{"0s", "1s", "2s", "5s"}, "deadline": "10m"}, nil))
	keys := []string{"a", "b", "c"}
	const perKey = 40
	for i := 1; i <= perKey; i++ {
		for _, k := range keys {
			body := map[string]any{"type": "ledger.entry", "ordering_key": k, "data": map[string]any{"key": k, "i": i}}
			require.Equal(t, 202, r.call(p, "POST", "/v1/apps/"+app.ID+"/events", body, nil))
		}
	}
	n := perKey * len(keys)
	require.Eventually(t, func() bool { return rc.delivered() >= 30 }, time.Minute, 10*time.Millisecond)
	pid := postmasterPID(t, filepath.Join(dataDir, "postgres"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited
	before := rc.delivered()
	require.Eventually(t, func() bool { return !alive(pid) }, 30*time.Second, 50*time.Millisecond, "postgres follows its killed parent")

	p2 := startDev(t, dataDir, false)
	defer p2.stop(t)
	require.Eventually(t, func() bool { return rc.delivered() == n }, 3*time.Minute, 100*time.Millisecond, "every accepted event delivered after the crash")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	want := make([]int, perKey)
	for i := range want {
		want[i] = i + 1
	}
	again := 0
	for _, k := range keys {
		got := rc.got[k]
		require.True(t, slices.IsSorted(got), "key %s arrived out of order: %v", k, got)
		require.Equal(t, want, slices.Compact(slices.Clone(got)), "key %s", k)
		for j, s := range rc.seqs[k] {
			require.Equal(t, strconv.Itoa(got[j]), s, "webhook-sequence of key %s", k)
		}
		again += len(got) - perKey
	}
	t.Logf("reliability | kill -9 mid-sequence (3 fifo keys, %d of %d delivered), then restart | %d | %d | 0 | %d requests beyond one per event (retries of every fifth event and requests cut off) | order kept",
		before, n, n, n, again)
}
