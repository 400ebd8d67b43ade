package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/access"
	"hookrelay/api"
	"hookrelay/store"
)

// caller calls h with a bearer key and decodes the JSON answer.
type caller struct {
	t *testing.T
	h http.Handler
}

func (c caller) do(key, method, path string, body any, out any) (int, string) {
	c.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(raw)
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if out != nil && rec.Code < 300 && rec.Body.Len() > 0 {
		require.NoError(c.t, json.Unmarshal(rec.Body.Bytes(), out), rec.Body.String())
	}
	return rec.Code, rec.Body.String()
}

type keyAnswer struct {
	ID   string `json:"id"`
	Key  string `json:"key"`
	Role string `json:"role"`
}

// TestAppKeyReachesOnlyItsApp: an app key answers 404 on every route of
// another app and on every route outside apps, exactly as for an app that
// does not exist; on its own app it works, and what it changes is in the
// audit log under its ID and name; revoking it refuses its very next
// request although it was cached.
func TestAppKeyReachesOnlyItsApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, appA, admin := tenant(t, "scope")
	appB, err := st.CreateApp(ctx, store.App{Name: "other"})
	require.NoError(t, err)
	srv := api.New(api.Options{Store: st, AllowPrivateTargets: true})
	c := caller{t, srv.Handler()}

	var k keyAnswer
	code, body := c.do(admin, "POST", "/v1/api-keys", map[string]any{"name": "billing backend", "role": "app", "app_id": appA.ID}, &k)
	require.Equal(t, http.StatusCreated, code, body)
	require.True(t, strings.HasPrefix(k.Key, "hr_app_"), k.Key)
	var listed struct{ Data []json.RawMessage }
	code, body = c.do(admin, "GET", "/v1/api-keys", nil, &listed)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, k.Key, "a key is shown once")
	require.Contains(t, body, k.ID)

	// Every route, with another app's ID, and with an ID no app has.
	doc := api.OpenAPI()
	paths := doc["paths"].(map[string]any)
	routes := 0
	for path, item := range paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method := range item.(map[string]any) {
			method = strings.ToUpper(method)
			fill := func(app string) string {
				p := strings.ReplaceAll(path, "{app}", app)
				for _, param := range []string{"{ep}", "{dlv}", "{evt}", "{name}", "{key}"} {
					p = strings.ReplaceAll(p, param, "x")
				}
				return p
			}
			codeB, bodyB := c.do(k.Key, method, fill(appB.ID), map[string]any{}, nil)
			require.Equal(t, http.StatusNotFound, codeB, "%s %s: %s", method, path, bodyB)
			if strings.Contains(path, "{app}") {
				// Same words as for an app that does not exist (an admin's view).
				codeN, bodyN := c.do(admin, "GET", "/v1/apps/app_none", nil, nil)
				require.Equal(t, http.StatusNotFound, codeN)
				require.Equal(t, strings.ReplaceAll(bodyN, "app_none", appB.ID), bodyB, "%s %s", method, path)
			} else {
				_, bodyNo := c.do(admin, "GET", "/v1/no-such-route", nil, nil)
				require.Equal(t, bodyNo, bodyB, "%s %s", method, path)
			}
			routes++
		}
	}
	require.Greater(t, routes, 30)

	// Its own app: reads and changes work; deleting the app does not.
	code, body = c.do(k.Key, "POST", "/v1/apps/"+appA.ID+"/endpoints", map[string]any{"url": "http://127.0.0.1:9/hook"}, nil)
	require.Equal(t, http.StatusCreated, code, body)
	code, _ = c.do(k.Key, "GET", "/v1/apps/"+appA.ID+"/endpoints", nil, nil)
	require.Equal(t, http.StatusOK, code)
	code, _ = c.do(k.Key, "DELETE", "/v1/apps/"+appA.ID, nil, nil)
	require.Equal(t, http.StatusNotFound, code)
	// The catalog as the app sees it leaves out the operational types,
	// which only the operations app's endpoints receive.
	names := func(key, path string) []string {
		t.Helper()
		var out struct{ Data []store.EventType }
		code, body := c.do(key, "GET", path, nil, &out)
		require.Equal(t, http.StatusOK, code, body)
		var ns []string
		for _, et := range out.Data {
			ns = append(ns, et.Name)
		}
		return ns
	}
	require.Subset(t, names(admin, "/v1/event-types"), store.OperationalTypes())
	require.Subset(t, names(admin, "/v1/apps/"+store.OperationsApp+"/event-types"), store.OperationalTypes())
	for _, op := range store.OperationalTypes() {
		require.NotContains(t, names(k.Key, "/v1/apps/"+appA.ID+"/event-types"), op)
	}

	var audit struct {
		Data []store.AuditEntry `json:"data"`
	}
	code, _ = c.do(admin, "GET", "/v1/apps/"+appA.ID+"/audit-log", nil, &audit)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, audit.Data, 1, "only the successful change is recorded")
	require.Equal(t, k.ID, audit.Data[0].ActorID)
	require.Equal(t, "billing backend", audit.Data[0].ActorName)
	require.Equal(t, "/v1/apps/:app/endpoints", audit.Data[0].Route)
	require.Equal(t, http.StatusCreated, audit.Data[0].Status)

	// Revoked: the next request is refused, cache or not.
	code, _ = c.do(admin, "DELETE", "/v1/api-keys/"+k.ID, nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	code, _ = c.do(k.Key, "GET", "/v1/apps/"+appA.ID+"/endpoints", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = c.do(admin, "DELETE", "/v1/api-keys/"+k.ID, nil, nil)
	require.Equal(t, http.StatusNotFound, code, "a revoked key is gone")
}

// TestRevocationReachesOtherProcesses: a second API process that cached a
// key refuses it within the revocation poll after the first revokes it.
func TestRevocationReachesOtherProcesses(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "revoke")
	one := caller{t, api.New(api.Options{Store: st}).Handler()}
	srv2 := api.New(api.Options{Store: st})
	two := caller{t, srv2.Handler()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv2.WatchRevocations(ctx)

	var k keyAnswer
	code, _ := one.do(admin, "POST", "/v1/api-keys", map[string]any{"name": "ops", "role": "app", "app_id": app.ID}, &k)
	require.Equal(t, http.StatusCreated, code)
	code, _ = two.do(k.Key, "GET", "/v1/apps/"+app.ID, nil, nil)
	require.Equal(t, http.StatusOK, code, "cached by the second process")
	code, _ = one.do(admin, "DELETE", "/v1/api-keys/"+k.ID, nil, nil)
	require.Equal(t, http.StatusNoContent, code)
	require.Eventually(t, func() bool {
		code, _ := two.do(k.Key, "GET", "/v1/apps/"+app.ID, nil, nil)
		return code == http.StatusUnauthorized
	}, 3*api.RevocationPollInterval+time.Second, 50*time.Millisecond)
}

// TestChangedAdminKeyReplacesTheOld: a new HOOKRELAY_ADMIN_KEY replaces the
// configured one instead of adding to it; the same key again changes
// nothing; keys made through the API are untouched.
func TestChangedAdminKeyReplacesTheOld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, first := tenant(t, "bootstrap")
	c := caller{t, api.New(api.Options{Store: st}).Handler()}
	var made keyAnswer
	code, _ := c.do(first, "POST", "/v1/api-keys", map[string]any{"name": "second admin"}, &made)
	require.Equal(t, http.StatusCreated, code)
	require.Equal(t, "admin", made.Role)

	require.NoError(t, st.EnsureAdminKey(ctx, first), "the same key again")
	const next = "hr_admin_next_key_0123456789"
	require.NoError(t, st.EnsureAdminKey(ctx, next))
	fresh := caller{t, api.New(api.Options{Store: st}).Handler()}
	code, _ = fresh.do(first, "GET", "/v1/apps", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code, "the old configured key")
	var keys struct {
		Data []store.APIKey `json:"data"`
	}
	code, _ = fresh.do(next, "GET", "/v1/api-keys", nil, &keys)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, keys.Data, 2)
	bootstraps := 0
	for _, k := range keys.Data {
		if k.Bootstrap {
			bootstraps++
			require.NotNil(t, k.LastUsedAt, "last use is recorded")
		}
	}
	require.Equal(t, 1, bootstraps)
	code, _ = fresh.do(made.Key, "GET", "/v1/apps", nil, nil)
	require.Equal(t, http.StatusOK, code, "an API-made admin key stays")
}

// TestKeyAndLinkInputs: bad key and portal-link requests name their field
// and change nothing.
func TestKeyAndLinkInputs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, admin := tenant(t, "keyinput")
	other, err := st.CreateApp(ctx, store.App{Name: "other"})
	require.NoError(t, err)
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: other.ID, URL: "http://127.0.0.1:9/x", Environment: "live", EventTypes: []string{}, Headers: map[string]string{},
		RetrySchedule: []time.Duration{time.Second}, Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	c := caller{t, api.New(api.Options{Store: st, LinkSigner: testSigner}).Handler()}
	for _, tc := range []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/v1/api-keys", map[string]any{}, "name"},
		{"/v1/api-keys", map[string]any{"name": strings.Repeat("n", 200)}, "name"},
		{"/v1/api-keys", map[string]any{"name": "x", "role": "root"}, "role"},
		{"/v1/api-keys", map[string]any{"name": "x", "role": "app"}, "app_id"},
		{"/v1/api-keys", map[string]any{"name": "x", "role": "app", "app_id": "app_none"}, "app_id"},
		{"/v1/api-keys", map[string]any{"name": "x", "role": "admin", "app_id": app.ID}, "app_id"},
		{"/v1/api-keys", map[string]any{"name": "x", "scope": "all"}, "scope"},
		{"/v1/apps/" + app.ID + "/portal-links", map[string]any{"capabilities": []string{"admin"}}, "capabilities"},
		{"/v1/apps/" + app.ID + "/portal-links", map[string]any{"ttl": "1s"}, "ttl"},
		{"/v1/apps/" + app.ID + "/portal-links", map[string]any{"ttl": "48h"}, "ttl"},
		{"/v1/apps/" + app.ID + "/portal-links", map[string]any{"ttl": "soon"}, "ttl"},
		{"/v1/apps/" + app.ID + "/portal-links", map[string]any{"endpoint_ids": []string{ep.ID}}, "endpoint_ids"},
	} {
		var prob struct{ Fields []string }
		code, body := c.do(admin, "POST", tc.path, tc.body, nil)
		require.Equal(t, http.StatusUnprocessableEntity, code, "%v: %s", tc.body, body)
		require.NoError(t, json.Unmarshal([]byte(body), &prob))
		require.Equal(t, []string{tc.field}, prob.Fields, "%v", tc.body)
	}
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM api_keys) + (SELECT count(*) FROM portal_links)`).Scan(&n))
	require.Equal(t, 1, n, "only the tenant's admin key")

	var link struct {
		URL          string   `json:"url"`
		Capabilities []string `json:"capabilities"`
	}
	code, body := c.do(admin, "POST", "/v1/apps/"+app.ID+"/portal-links", map[string]any{"capabilities": []string{"resend"}, "ttl": "10m"}, &link)
	require.Equal(t, http.StatusCreated, code, body)
	require.Contains(t, link.URL, "/portal/open?token=hrpl_")
	require.Equal(t, []string{"view", "resend"}, link.Capabilities)
}

var testSigner = access.NewSigner([]byte("test secret"))
