package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"hookrelay/access"
	"hookrelay/internal/devstack"
	"hookrelay/internal/pgcluster"
	"hookrelay/internal/temporalconn"
	"hookrelay/secretbox"
	"hookrelay/store"
	"hookrelay/webhook"
)

// cluster is Postgres and a Temporal server started by the test, apart from
// any hookrelay process, as an operator's would be.
type cluster struct {
	pg       *pgcluster.Cluster
	temporal *devstack.Server
	dbURL    string
}

// startCluster starts a private Postgres and a Temporal server on it with
// the namespace "default" and none of hookrelay's search attributes
// (tlsOpts, when set, makes its frontend require mTLS).
func startCluster(t *testing.T, tlsOpts *devstack.TLS) *cluster {
	t.Helper()
	base := stackDir(t, "hookrelay-prod-")
	ctx := context.Background()
	port, err := pgcluster.FreePort()
	require.NoError(t, err)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(base, "pg"), Port: port, Log: io.Discard, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })
	require.NoError(t, pgcluster.CreateDatabase(ctx, pg.URL("postgres"), "hookrelay"))
	ts, err := devstack.Start(ctx, devstack.Options{PostgresURL: pg.URL("postgres"), FrontendAddr: "127.0.0.1:0", TLS: tlsOpts, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(ts.Stop)
	return &cluster{pg: pg, temporal: ts, dbURL: pg.URL("hookrelay")}
}

// env is what a production process of this cluster is given.
func (c *cluster) env(t *testing.T, adminKey string) []string {
	secret, err := secretbox.GenerateKey()
	require.NoError(t, err)
	return []string{"HOOKRELAY_DATABASE_URL=" + c.dbURL, "HOOKRELAY_TEMPORAL_ADDRESS=" + c.temporal.FrontendAddr(),
		"HOOKRELAY_ADMIN_KEY=" + adminKey, "HOOKRELAY_SECRET_KEY=" + secret, "HOOKRELAY_ALLOW_PRIVATE_TARGETS=true",
		"HOOKRELAY_TEMPORAL_NAMESPACE=default"}
}

// runToEnd runs `hookrelay args…` to its end: its exit code and its log.
func runToEnd(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "HOOKRELAY_TEST_MAIN=1"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err, string(out))
	return 0, string(out)
}

var started = regexp.MustCompile(`hookrelay started" api=(\S*)`)

// startRole starts `hookrelay role args…` and waits until it is up.
func startRole(t *testing.T, env []string, args ...string) *devProc {
	t.Helper()
	p, m, err := startProc(t, env, started, args...)
	require.NoError(t, err)
	p.api = m[1]
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.exited })
	return p
}

// flaky answers 503 to the first request of every fourth event and 200
// otherwise, counting the 200s per event ID.
type flaky struct {
	mu       sync.Mutex
	verifier *webhook.Verifier
	seen     map[string]int
	ok       map[string]int
	requests atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.requests.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.verifier == nil || f.verifier.Verify(r.Header, body) != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")
	f.seen[id]++
	if f.seen[id] == 1 && len(f.seen)%4 == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	f.ok[id]++
	w.WriteHeader(http.StatusOK)
}

// flakyApp creates, through api, an app named name with one endpoint on
// the given retry schedule (a 10 min deadline) at a new flaky receiver
// that verifies its signatures.
func flakyApp(t *testing.T, api *devProc, adminKey, name string, schedule ...string) (*crashRig, string, *flaky) {
	t.Helper()
	rc := &flaky{seen: map[string]int{}, ok: map[string]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	r := &crashRig{t: t, key: adminKey}
	var a struct{ ID string }
	require.Equal(t, 201, r.call(api, "POST", "/v1/apps", map[string]any{"name": name}, &a))
	var ep struct{ Secret string }
	require.Equal(t, 201, r.call(api, "POST", "/v1/apps/"+a.ID+"/endpoints", map[string]any{
		"url": srv.URL + "/hook", "retry_schedule": schedule, "deadline": "10m"}, &ep))
	v, err := webhook.NewVerifier(ep.Secret)
	require.NoError(t, err)
	rc.mu.Lock()
	rc.verifier = v
	rc.mu.Unlock()
	return r, a.ID, rc
}

func (f *flaky) delivered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ok)
}

// TestProductionPathAsSeparateProcesses runs the README's production path
// as an operator would: a Temporal server hookrelay did not set up (no
// search attributes), `api` refusing to start on it with the commands to
// run, then `setup-temporal`, `migrate`, `api` and two `worker`s (one
// making first attempts from the outbox, one carrying them in carrier
// workflows) as separate processes. A burst with a failing first attempt
// for one event in four goes through; one worker is killed with SIGKILL
// mid-burst, and every event is delivered.
func TestProductionPathAsSeparateProcesses(t *testing.T) {
	c := startCluster(t, nil)
	adminKey, err := store.NewKey(access.RoleAdmin)
	require.NoError(t, err)
	env := c.env(t, adminKey)

	code, out := runToEnd(t, env, "api", "--http-addr", "127.0.0.1:0")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "migrations pending: run `hookrelay migrate` first")
	code, out = runToEnd(t, env, "migrate")
	require.Equal(t, 0, code, out)

	code, out = runToEnd(t, env, "api", "--http-addr", "127.0.0.1:0")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `Temporal namespace "default" at `+c.temporal.FrontendAddr()+" lacks search attributes hookrelay sets")
	for _, a := range temporalconn.Required() {
		require.Contains(t, out, a.CreateCommand("default"), "the message gives the command for each")
	}
	code, out = runToEnd(t, env, "worker", "--temporal-namespace", "production")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `Temporal namespace "production" does not exist`)
	require.Contains(t, out, "temporal operator namespace create --namespace production")

	code, out = runToEnd(t, env, "setup-temporal")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "HookrelayDeliveries (KeywordList)")
	code, out = runToEnd(t, env, "setup-temporal")
	require.Equal(t, 0, code, "setup-temporal again changes nothing: %s", out)
	require.Contains(t, out, "added=[]")

	api := startRole(t, env, "api", "--http-addr", "127.0.0.1:0")
	sender := startRole(t, env, "worker")
	startRole(t, env, "worker", "--first-attempts", "carrier")

	r, a, rc := flakyApp(t, api, adminKey, "production", "0s", "1s", "2s", "5s", "10s", "30s")

	const n = 400
	var wg sync.WaitGroup
	next := atomic.Int64{}
	killed := make(chan int, 1)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				require.Equal(t, 202, r.call(api, "POST", "/v1/apps/"+a+"/events", map[string]any{"type": "payment.succeeded", "data": map[string]any{"i": i}}, nil))
				if i == n/3 {
					// Mid-burst: the sender worker dies with what it holds.
					require.NoError(t, sender.cmd.Process.Signal(syscall.SIGKILL))
					killed <- rc.delivered()
				}
			}
		}()
	}
	wg.Wait()
	before := <-killed
	require.Eventually(t, func() bool { return rc.delivered() == n }, 4*time.Minute, 100*time.Millisecond,
		"every event delivered after a worker died (%d of %d)", rc.delivered(), n)

	ctx := context.Background()
	db, err := pgx.Connect(ctx, c.dbURL)
	require.NoError(t, err)
	defer db.Close(ctx)
	var succeeded, retries int
	require.Eventually(t, func() bool {
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'succeeded') FROM deliveries`).Scan(&succeeded))
		return succeeded == n
	}, time.Minute, 100*time.Millisecond)
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM attempts WHERE number > 1`).Scan(&retries))
	require.Positive(t, retries, "failed first attempts were retried")

	tc, err := client.Dial(client.Options{HostPort: c.temporal.FrontendAddr(), Logger: nil})
	require.NoError(t, err)
	defer tc.Close()
	carriers, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "WorkflowType = 'CarrierWorkflow'"})
	require.NoError(t, err)
	require.Positive(t, carriers.GetCount(), "the carrier worker carried first attempts")
	t.Logf("production path | %d events, sender worker killed after %d delivered | %d delivered, %d retries, %d carrier workflows, %d requests",
		n, before, rc.delivered(), retries, carriers.GetCount(), rc.requests.Load())
}

// certs writes a CA, a frontend certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, into dir.
type certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

func newCerts(t *testing.T) certs {
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hookrelay test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "PRIVATE KEY", keyDER)
	}
	c := certs{CA: write("ca.pem", "CERTIFICATE", caDER)}
	c.ServerCert, c.ServerKey = leaf(2, "frontend", x509.ExtKeyUsageServerAuth)
	c.ClientCert, c.ClientKey = leaf(3, "hookrelay", x509.ExtKeyUsageClientAuth)
	return c
}

// TestTemporalMTLS: against a frontend that requires mTLS, hookrelay
// connects with its client certificate and, without one, fails at start
// with a message that says how it tried and what to set.
func TestTemporalMTLS(t *testing.T) {
	cs := newCerts(t)
	c := startCluster(t, &devstack.TLS{CAFile: cs.CA, CertFile: cs.ServerCert, KeyFile: cs.ServerKey,
		ClientCertFile: cs.ClientCert, ClientKeyFile: cs.ClientKey, ServerName: "127.0.0.1"})
	adminKey, err := store.NewKey(access.RoleAdmin)
	require.NoError(t, err)
	env := c.env(t, adminKey)

	code, out := runToEnd(t, env, "setup-temporal")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "connect to Temporal at "+c.temporal.FrontendAddr()+" without TLS")
	require.Contains(t, out, "a frontend that requires TLS needs --temporal-tls")
	code, out = runToEnd(t, append(env, "HOOKRELAY_TEMPORAL_TLS_CA="+cs.CA), "setup-temporal")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "over TLS without a client certificate")
	require.Contains(t, out, "a frontend that requires mTLS needs --temporal-tls-cert and --temporal-tls-key")

	env = append(env, "HOOKRELAY_TEMPORAL_TLS_CA="+cs.CA, "HOOKRELAY_TEMPORAL_TLS_CERT="+cs.ClientCert, "HOOKRELAY_TEMPORAL_TLS_KEY="+cs.ClientKey)
	for _, args := range [][]string{{"setup-temporal"}, {"migrate"}} {
		code, out = runToEnd(t, env, args...)
		require.Equal(t, 0, code, out)
	}
	api := startRole(t, env, "api", "--http-addr", "127.0.0.1:0")
	startRole(t, env, "worker")
	status, body := get(t, "http://"+api.api+"/readyz", "")
	require.Equal(t, http.StatusOK, status, string(body))
	require.Contains(t, string(body), `"status":"ok"`)

	r, a, rc := flakyApp(t, api, adminKey, "mtls", "0s", "1s")
	for i := range 8 {
		require.Equal(t, 202, r.call(api, "POST", "/v1/apps/"+a+"/events", map[string]any{"type": "payment.succeeded", "data": map[string]any{"i": i}}, nil))
	}
	require.Eventually(t, func() bool { return rc.delivered() == 8 }, time.Minute, 50*time.Millisecond,
		"delivered over the mTLS connection, including the retried ones")
}
