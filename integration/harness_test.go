// Package integration runs hookrelay against real parts: an embedded
// Temporal server on a private Postgres, hookrelay's own database, the
// worker, the outbox dispatcher, the REST API, and HTTP receivers on
// 127.0.0.1.
package integration

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"hookrelay/config"
	"hookrelay/delivery"
	"hookrelay/internal/app"
	"hookrelay/internal/defaults"
	"hookrelay/internal/devstack"
	"hookrelay/internal/testenv"
	"hookrelay/outbox"
	"hookrelay/secretbox"
	"hookrelay/store"
)

var (
	pg       *testenv.Postgres
	temporal *devstack.Server
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &pg, func(ctx context.Context, p *testenv.Postgres) (func(), error) {
		var s *devstack.Server
		var err error
		// Ports are chosen free and bound later; another test binary may
		// take one in between, so a bind failure is retried.
		for try := 0; try < 3; try++ {
			s, err = devstack.Start(ctx, devstack.Options{
				PostgresURL:        p.AdminURL,
				FrontendAddr:       "127.0.0.1:0",
				Database:           "hookrelay_it_temporal",
				VisibilityDatabase: "hookrelay_it_temporal_visibility",
				SearchAttributes:   app.SearchAttributes(),
				Logger:             slog.New(slog.DiscardHandler),
			})
			if err == nil || !strings.Contains(err.Error(), "address already in use") {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		temporal = s
		return s.Stop, nil
	}))
}

// logBuffer captures every log line the harness writes, so tests can check
// that no secret or signature ever reaches a log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// harness is one hookrelay deployment, assembled by app.Start as
// `hookrelay api` and `hookrelay worker` are: an API process and a worker
// process (worker and dispatcher) on their own database and task queue,
// Temporal reached through a proxy the test can cut.
type harness struct {
	t      *testing.T
	cfg    config.Config
	opts   app.Options
	logger *slog.Logger
	api    *app.Stack
	// worker is the worker process; nil while stopped.
	worker   *app.Stack
	store    *store.Store
	proxy    *proxy
	client   client.Client
	queue    string
	url      string
	adminKey string
	logs     *logBuffer
}

// inMode runs a harness in first-attempt mode (config.FirstAttempts*).
func inMode(mode string) func(*harnessConfig) {
	return func(hc *harnessConfig) { hc.firstAttempts = mode }
}

// harnessConfig varies a harness.
type harnessConfig struct {
	// production refuses private targets at creation and at dial time.
	production bool
	// maxBacklog makes ingest shed past this outbox size.
	maxBacklog int
	// firstAttempts is the first-attempt mode (config.FirstAttempts*);
	// empty keeps the default (workflow).
	firstAttempts string
	// trustedProxies are the API's trusted reverse proxies.
	trustedProxies []netip.Prefix
	// configure, when set, changes the configuration last.
	configure func(*config.Config)
	// oneProcess runs the API and the worker in one process, as `hookrelay
	// dev` does (ingest then hands rows due at once to its own sender);
	// stopWorker and startWorker are not for such a harness.
	oneProcess bool
}

func newHarness(t *testing.T, opts ...func(*harnessConfig)) *harness {
	t.Helper()
	var hc harnessConfig
	for _, o := range opts {
		o(&hc)
	}
	ctx := context.Background()
	dbURL := pg.Database(t, "it", true)
	secretKey, err := secretbox.GenerateKey()
	require.NoError(t, err)
	px, err := newProxy(temporal.FrontendAddr())
	require.NoError(t, err)
	logs := &logBuffer{}
	h := &harness{t: t, proxy: px, queue: "it-" + t.Name(), adminKey: "hr_test_" + t.Name(), logs: logs,
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	// Every default as `hookrelay dev` has it, then what this deployment
	// varies: its database, Temporal through the proxy, its own port, key
	// and secret key.
	h.cfg, err = config.Load("dev", true, nil, func(string) string { return "" }, defaults.Components())
	require.NoError(t, err)
	h.cfg.DatabaseURL, h.cfg.DBMaxConns = dbURL, 16
	h.cfg.TemporalAddress, h.cfg.HTTPAddr = px.Addr(), "127.0.0.1:0"
	h.cfg.AdminKey, h.cfg.SecretKey = h.adminKey, secretKey
	h.cfg.AllowPrivateTargets, h.cfg.MaxBacklog = !hc.production, hc.maxBacklog
	h.cfg.ShutdownTimeout = 10 * time.Second
	h.cfg.FirstAttempts = cmp.Or(hc.firstAttempts, h.cfg.FirstAttempts)
	h.cfg.TrustedProxies = hc.trustedProxies
	h.cfg.MetricsAddr = "127.0.0.1:0" // the worker process's /metrics
	if hc.configure != nil {
		hc.configure(&h.cfg)
	}
	// The SDK logs warnings and errors (a failing workflow task) with the rest.
	h.opts = app.Options{TaskQueue: h.queue, SDKLogger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	roles := app.RoleAPI
	if hc.oneProcess {
		roles |= app.RoleWorker
	}
	h.api, err = app.Start(ctx, h.cfg, h.logger.With("process", "api"), roles, h.opts)
	require.NoError(t, err)
	h.store, h.client, h.url = h.api.Store, h.api.Client, "http://"+h.api.APIAddr
	if !hc.oneProcess {
		h.startWorker()
	}
	t.Cleanup(func() {
		if t.Failed() {
			// The harness's own log tells why a delivery did not move.
			var lines []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if !strings.Contains(l, "msg=http ") {
					lines = append(lines, l)
				}
			}
			t.Logf("last log lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
			// And where each workflow stopped: a stall outside the log
			// (a timer, a signal, a start's backoff) shows here.
			t.Logf("workflows on %s:\n%s", h.queue, h.workflowTrail())
		}
		h.api.Close()
		if h.worker != nil {
			h.worker.Close()
		}
		px.Close()
	})
	return h
}

// stopWorker stops the worker process (worker and dispatcher): workflows
// make no progress and outbox rows wait until startWorker.
func (h *harness) stopWorker() {
	h.worker.Close()
	h.worker = nil
}

// startWorker starts a worker process on the harness's task queue.
func (h *harness) startWorker() {
	w, err := app.Start(context.Background(), h.cfg, h.logger.With("process", "worker"), app.RoleWorker, h.opts)
	require.NoError(h.t, err)
	h.worker = w
}

// do calls the API and decodes the JSON answer into out (when non-nil).
func (h *harness) do(method, path string, body any, out any) int {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		require.NoError(h.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+h.adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	if out != nil && len(raw) > 0 {
		require.NoError(h.t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode
}

type endpointResp struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

type eventResp struct {
	ID         string               `json:"id"`
	Deliveries []outbox.DeliveryRef `json:"deliveries"`
}

func (h *harness) createApp() string {
	var a store.App
	require.Equal(h.t, http.StatusCreated, h.do("POST", "/v1/apps", map[string]any{"name": h.t.Name()}, &a))
	return a.ID
}

func (h *harness) createEndpoint(appID string, body map[string]any) endpointResp {
	var e endpointResp
	require.Equal(h.t, http.StatusCreated, h.do("POST", "/v1/apps/"+appID+"/endpoints", body, &e))
	return e
}

func (h *harness) send(appID, typ string, data any) eventResp {
	var ev eventResp
	code := h.do("POST", "/v1/apps/"+appID+"/events", map[string]any{"type": typ, "data": data}, &ev)
	require.Equal(h.t, http.StatusAccepted, code)
	return ev
}

// waitDelivery polls a delivery until its status is one of want.
func (h *harness) waitDelivery(appID, dlvID string, timeout time.Duration, want ...delivery.Status) store.Delivery {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	var d store.Delivery
	for {
		d = store.Delivery{}
		h.do("GET", fmt.Sprintf("/v1/apps/%s/deliveries/%s", appID, dlvID), nil, &d)
		for _, w := range want {
			if d.Status == w {
				return d
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("delivery %s: status %q after %s, want %v", dlvID, d.Status, timeout, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nextSecond waits until the wall clock is past the second now is in, so
// a signature made from here on carries a later webhook-timestamp.
func nextSecond(t *testing.T) {
	t.Helper()
	from := time.Now().Unix()
	require.Eventually(t, func() bool { return time.Now().Unix() > from }, 2*time.Second, 10*time.Millisecond)
}

func (h *harness) attempts(appID, dlvID string) []store.Attempt {
	var out struct {
		Data []store.Attempt `json:"data"`
	}
	require.Equal(h.t, http.StatusOK, h.do("GET", fmt.Sprintf("/v1/apps/%s/deliveries/%s/attempts", appID, dlvID), nil, &out))
	return out.Data
}

// proxy forwards TCP to a target until closed; Open re-listens on the same
// port. Closing it is a real network outage between hookrelay and Temporal.
type proxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newProxy(target string) (*proxy, error) {
	p := &proxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	return p, nil
}

func (p *proxy) Addr() string { return p.addr }

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// Close stops accepting and cuts every open connection.
func (p *proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Open accepts again on the same address.
func (p *proxy) Open() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}
