package portal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/access"
	"hookrelay/api"
	"hookrelay/delivery"
	"hookrelay/internal/testenv"
	"hookrelay/portal"
	"hookrelay/service"
	"hookrelay/store"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

// env is one API and portal over one service, served together as `hookrelay api` serves
// them, on their own database, with no delivery engine: the tests here
// write what a worker would (attempts, dead letters) through the store.
type env struct {
	t      *testing.T
	st     *store.Store
	app    store.App
	admin  string
	apiH   http.Handler
	srv    *httptest.Server
	signer access.Signer
}

type envConfig struct {
	tls            bool
	frameAncestors []string
}

func newEnv(t *testing.T, cfg envConfig) *env {
	t.Helper()
	ctx := context.Background()
	st := pg.Store(t, "portal")
	app, err := st.CreateApp(ctx, store.App{Name: "Acme Billing"})
	require.NoError(t, err)
	e := &env{t: t, st: st, app: app, admin: "hr_admin_portal_test_0123456789", signer: access.NewSigner([]byte("portal test secret"))}
	require.NoError(t, st.EnsureAdminKey(ctx, e.admin))
	svc := service.New(service.Options{Store: st, AllowPrivateTargets: true, LinkSigner: e.signer})
	e.apiH = api.New(api.Options{Store: st, AllowPrivateTargets: true, LinkSigner: e.signer, Service: svc}).Handler()
	p, err := portal.New(portal.Options{Service: svc, Store: st, LinkSigner: e.signer, InsecureCookies: !cfg.tls, FrameAncestors: cfg.frameAncestors})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(portal.Prefix, p.Handler())
	mux.Handle("/", e.apiH)
	if cfg.tls {
		e.srv = httptest.NewTLSServer(mux)
	} else {
		e.srv = httptest.NewServer(mux)
	}
	t.Cleanup(e.srv.Close)
	return e
}

// call calls the API as the admin.
func (e *env) call(method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(e.t, err)
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.apiH.ServeHTTP(rec, req)
	if out != nil {
		require.NoError(e.t, json.Unmarshal(rec.Body.Bytes(), out), rec.Body.String())
	}
	return rec.Code
}

// link makes a portal link and returns its URL on the test server.
func (e *env) link(body map[string]any) string {
	e.t.Helper()
	var out struct{ URL string }
	require.Equal(e.t, http.StatusCreated, e.call("POST", "/v1/apps/"+e.app.ID+"/portal-links", body, &out))
	u, err := url.Parse(out.URL)
	require.NoError(e.t, err)
	return e.srv.URL + u.RequestURI()
}

// endpoint makes an endpoint and returns its ID.
func (e *env) endpoint(u string, types ...string) string {
	e.t.Helper()
	var out struct{ ID string }
	body := map[string]any{"url": u, "description": "orders service"}
	if len(types) > 0 {
		body["event_types"] = types
	}
	require.Equal(e.t, http.StatusCreated, e.call("POST", "/v1/apps/"+e.app.ID+"/endpoints", body, &out))
	return out.ID
}

// publish ingests an event of typ and returns its deliveries by endpoint.
func (e *env) publish(typ string, data any) map[string]string {
	e.t.Helper()
	_, m := e.event(typ, data)
	return m
}

// attempt records what a worker records of an attempt.
func (e *env) attempt(dlv string, number, code int, class delivery.Class, excerpt string) {
	e.t.Helper()
	require.NoError(e.t, e.st.RecordAttempt(context.Background(), store.Attempt{DeliveryID: dlv, Cycle: 1, Number: number,
		StartedAt: time.Now().Add(-time.Minute), DurationMS: 42, StatusCode: &code, Class: string(class), ResponseExcerpt: excerpt}))
}

// finish marks a delivery as a worker does when its current cycle ends.
func (e *env) finish(dlv string, status delivery.Status, reason string) {
	e.t.Helper()
	var cycle int
	require.NoError(e.t, e.st.Pool().QueryRow(context.Background(), `SELECT cycle FROM deliveries WHERE id = $1`, dlv).Scan(&cycle))
	_, err := e.st.MarkDelivery(context.Background(), store.Mark{DeliveryID: dlv, Status: status, Reason: reason, Cycle: max(cycle, 1)})
	require.NoError(e.t, err)
}

// deadLetter makes an endpoint and an event whose delivery to it failed
// once with code and excerpt and dead-lettered; it returns both IDs.
func (e *env) deadLetter(code int, class delivery.Class, excerpt string) (ep, dlv string) {
	e.t.Helper()
	ep = e.endpoint("http://127.0.0.1:9/hook")
	dlv = e.publish("invoice.paid", map[string]any{"n": 1})[ep]
	e.attempt(dlv, 1, code, class, excerpt)
	e.finish(dlv, delivery.StatusDeadLettered, "failed")
	return ep, dlv
}

// client is an HTTP client with a cookie jar that trusts the test
// server, following no redirects.
func (e *env) client() *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(e.t, err)
	c := *e.srv.Client() // the server's client is shared: copy it
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// get fetches a page and returns its status and body.
func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// post submits a form and returns its status, body and Location.
func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page's forms.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "no CSRF field in page")
	return m[1]
}

// open opens link with c and returns the delivery log page it lands on.
func open(t *testing.T, c *http.Client, link string) string {
	t.Helper()
	code, _ := get(t, c, link)
	require.Equal(t, http.StatusSeeOther, code)
	code, body := get(t, c, strings.SplitN(link, "/portal/", 2)[0]+"/portal/deliveries")
	require.Equal(t, http.StatusOK, code, body)
	return body
}
