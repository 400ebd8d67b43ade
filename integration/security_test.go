package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/delivery"
	"hookrelay/store"
)

// TestEveryRouteNeedsAKey walks the OpenAPI document: no key and a wrong
// key both get a bare 401 on every route.
func TestEveryRouteNeedsAKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	raw, err := json.Marshal(api.OpenAPI())
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	routes := 0
	for path, ops := range doc.Paths {
		if path == "/healthz" || path == "/readyz" {
			continue
		}
		concrete := strings.NewReplacer("{app}", "app_x", "{ep}", "ep_x", "{evt}", "evt_x", "{dlv}", "dlv_x", "{name}", "a.b").Replace(path)
		for method := range ops {
			for _, auth := range []string{"", "Bearer hr_wrong_key", "Bearer " + h.adminKey + "x"} {
				req, _ := http.NewRequest(strings.ToUpper(method), h.url+concrete, strings.NewReader(`{}`))
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				var p api.Problem
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
				resp.Body.Close()
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s", method, path)
				require.Empty(t, p.Detail, "a 401 says nothing more")
			}
			routes++
		}
	}
	require.GreaterOrEqual(t, routes, 25)
}

// TestIngestProperty: any ingest request either gets 2xx and is delivered,
// or gets a 4xx and leaves no row.
func TestIngestProperty(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL()})
	rc.setSecrets(ep.Secret)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	var delivered []string
	for i := 0; i < 150; i++ {
		fields := []string{}
		if rng.IntN(10) > 0 {
			fields = append(fields, `"type":`+pick(`"payment.succeeded"`, `"payment.succeeded"`, `"a.b_c.d"`, `"a.b_c.d"`, `"Bad"`, `"x"`, `7`, `null`, `"a..b"`))
		}
		if rng.IntN(10) > 0 {
			fields = append(fields, `"data":`+pick(`{}`, `{"a":[1,2,{"b":null}]}`, `{"k":"v"}`, `{}`, `[]`, `"s"`, `null`, `{"n":1e400}`))
		}
		if rng.IntN(3) == 0 {
			fields = append(fields, `"id":`+pick(fmt.Sprintf(`"prop-%d"`, i), fmt.Sprintf(`"prop-%d"`, i), `"bad id"`, `""`, `5`))
		}
		if rng.IntN(4) == 0 {
			fields = append(fields, `"created":`+pick(`"2026-11-30T10:00:00Z"`, `"2026-11-30T10:00:00+01:00"`, `"yesterday"`, `1`))
		}
		if rng.IntN(20) == 0 {
			fields = append(fields, `"surprise":1`)
		}
		body := "{" + strings.Join(fields, ",") + "}"
		if rng.IntN(25) == 0 {
			body = body[:rng.IntN(len(body))]
		}
		before := h.snapshot()
		var ev eventResp
		code := h.do("POST", "/v1/apps/"+appID+"/events", body, &ev)
		switch {
		case code == http.StatusAccepted:
			require.Len(t, ev.Deliveries, 1, body)
			delivered = append(delivered, ev.Deliveries[0].ID)
		case code >= 400 && code < 500:
			require.Equal(t, before, h.snapshot(), "%d for %s left a row", code, body)
		default:
			t.Fatalf("status %d for %s", code, body)
		}
	}
	require.NotEmpty(t, delivered)
	for _, id := range delivered {
		h.waitDelivery(appID, id, 30*time.Second, delivery.StatusSucceeded)
	}
	t.Logf("property: %d of 150 random requests accepted and delivered; the rest got a 4xx and left nothing", len(delivered))
}

// TestNoSecretsAtRest: after endpoints, rotations and deliveries, no log
// line and no database column holds a secret, a custom header's value, a
// full signature or an API key in plaintext.
func TestNoSecretsAtRest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	const headerToken = "receiver-auth-token-90210"
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "headers": map[string]string{"X-Receiver-Auth": headerToken}})
	var got map[string]any
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/endpoints/"+ep.ID, nil, &got))
	require.Equal(t, map[string]any{"X-Receiver-Auth": store.HeaderMask}, got["headers"], "GET shows the name, masked")
	var rot struct{ Secret string }
	require.Equal(t, http.StatusOK, h.do("POST", "/v1/apps/"+appID+"/endpoints/"+ep.ID+"/secret/rotate", map[string]any{"grace_period": "1h"}, &rot))
	rc.setSecrets(rot.Secret)
	var dlvs []string
	for i := 0; i < 5; i++ {
		dlvs = append(dlvs, h.send(appID, "payment.succeeded", map[string]any{"i": i}).Deliveries[0].ID)
	}
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 20*time.Second, delivery.StatusSucceeded)
	}
	for _, r := range rc.receipts() {
		require.Equal(t, headerToken, r.Header.Get("X-Receiver-Auth"), "the request carries the real value")
	}
	// An app key, a portal link and its session, used.
	var appKey struct{ Key string }
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/api-keys", map[string]any{"name": "app", "role": "app", "app_id": appID}, &appKey))
	var link struct{ URL string }
	req, err := http.NewRequest("POST", h.url+"/v1/apps/"+appID+"/portal-links", strings.NewReader(`{"capabilities":["resend"]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+appKey.Key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&link))
	resp.Body.Close()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browserless := &http.Client{Jar: jar}
	resp, err = browserless.Get(link.URL)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = browserless.Get(link.URL) // reused: refused, and logged
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	u, err := url.Parse(h.url + "/portal/")
	require.NoError(t, err)
	cookies := jar.Cookies(u)
	require.Len(t, cookies, 1)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	require.NotNil(t, csrf)
	token, err := url.QueryUnescape(strings.SplitN(link.URL, "token=", 2)[1])
	require.NoError(t, err)

	forbidden := []string{h.adminKey, headerToken, appKey.Key, token, cookies[0].Value, string(csrf[1])}
	for _, s := range []string{ep.Secret, rot.Secret} {
		forbidden = append(forbidden, s, strings.TrimPrefix(s, "whsec_"))
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		forbidden = append(forbidden, fmt.Sprintf("%x", raw))
	}
	for _, r := range rc.receipts() {
		for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
			forbidden = append(forbidden, strings.TrimPrefix(sig, "v1,"))
		}
		for _, part := range strings.Split(r.Header.Get("X-Webhook-Signature"), ",")[1:] {
			forbidden = append(forbidden, strings.TrimPrefix(part, "v1="))
		}
	}
	var dump strings.Builder
	for _, table := range []string{"apps", "api_keys", "event_types", "endpoints", "endpoint_secrets", "events", "deliveries", "attempts", "replays", "outbox", "audit_log", "portal_links"} {
		rows, err := h.store.Pool().Query(context.Background(), fmt.Sprintf(`SELECT t::text, encode(convert_to(t::text, 'UTF8'), 'escape') FROM %s t`, table))
		require.NoError(t, err)
		for rows.Next() {
			var a, b string
			require.NoError(t, rows.Scan(&a, &b))
			dump.WriteString(a + "\n" + b + "\n")
		}
		rows.Close()
	}
	logs := h.logs.String()
	require.NotEmpty(t, logs)
	for _, f := range forbidden {
		require.NotContains(t, dump.String(), f, "database holds a secret or signature")
		require.NotContains(t, logs, f, "logs hold a secret or signature")
	}
	// The session's CSRF token is the one value stored in the clear (it is
	// not a credential: it only proves a form came from the session's page).
	var hashLen int
	require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT octet_length(key_hash) FROM api_keys LIMIT 1`).Scan(&hashLen))
	require.Equal(t, 32, hashLen, "API keys are stored as SHA-256 hashes")
}
