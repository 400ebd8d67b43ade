package portal_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/portal"
)

const refused = "This portal link is invalid, has expired or was already used."

// TestLinkIsSingleUseSignedAndExpiring: a link opens once, setting a
// Secure, HttpOnly, SameSite=None, Partitioned cookie outside dev mode;
// reused, tampered, expired (by its signature or by its row) or forged with
// another key, it gets the same plain page and no cookie.
func TestLinkIsSingleUseSignedAndExpiring(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{tls: true})
	link := e.link(map[string]any{"ttl": "5m"})

	c := e.client()
	resp, err := c.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/portal/deliveries", resp.Header.Get("Location"))
	ck := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{portal.CookieName + "=", "Path=/portal/", "HttpOnly", "Secure", "SameSite=None", "Partitioned", "Max-Age=29"} {
		require.Contains(t, ck, attr)
	}
	require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))

	refusedPage := func(u string) {
		t.Helper()
		fresh := e.client()
		resp, err := fresh.Get(u)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, u)
		require.Empty(t, resp.Header.Get("Set-Cookie"))
		code, body := get(t, fresh, u)
		require.Equal(t, http.StatusForbidden, code)
		require.Contains(t, body, refused)
		require.NotContains(t, body, "<nav>", "a plain page, nothing more")
	}
	refusedPage(link) // reused

	tok := strings.SplitN(link, "token=", 2)[1]
	raw, err := url.QueryUnescape(tok)
	require.NoError(t, err)
	fresh := e.link(map[string]any{})
	freshTok, _ := url.QueryUnescape(strings.SplitN(fresh, "token=", 2)[1])
	// Another link's body with this link's MAC; a flipped character.
	body1, mac1, _ := strings.Cut(raw, ".")
	_, mac2, _ := strings.Cut(freshTok, ".")
	refusedPage(e.srv.URL + "/portal/open?token=" + url.QueryEscape(body1+"."+mac2))
	refusedPage(e.srv.URL + "/portal/open?token=" + url.QueryEscape(body1+"."+mac1[:len(mac1)-3]+"AAA"))
	refusedPage(e.srv.URL + "/portal/open?token=")
	refusedPage(e.srv.URL + "/portal/open?token=hrpl_garbage")

	// Expired by its signature: a real, unused link's ID signed an hour ago.
	var unusedID string
	require.NoError(t, e.st.Pool().QueryRow(context.Background(), `SELECT id FROM portal_links WHERE used_at IS NULL LIMIT 1`).Scan(&unusedID))
	refusedPage(e.srv.URL + "/portal/open?token=" + url.QueryEscape(e.signer.Sign(unusedID, time.Now().Add(-time.Hour))))
	// Expired by its row, with a signature still valid.
	_, err = e.st.Pool().Exec(context.Background(), `UPDATE portal_links SET expires_at = now() - interval '1 second' WHERE id = $1`, unusedID)
	require.NoError(t, err)
	refusedPage(fresh)

	// The first session still works; without a cookie nothing is shown.
	code, body := get(t, c, e.srv.URL+"/portal/deliveries")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get(t, e.client(), e.srv.URL+"/portal/deliveries")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, "Open a new portal link")
	// A session past its end is refused the same way.
	_, err = e.st.Pool().Exec(context.Background(), `UPDATE portal_sessions SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	code, _ = get(t, c, e.srv.URL+"/portal/deliveries")
	require.Equal(t, http.StatusUnauthorized, code)
}

// TestViewOnlyCannotChange: a view-only session sees no button that
// changes anything, and each change it posts anyway (with a valid CSRF
// token) is refused and changes nothing.
func TestViewOnlyCannotChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	ep, dlv := e.deadLetter(404, delivery.ClassPermanent, "not here")

	c := e.client()
	page := open(t, c, e.link(map[string]any{"capabilities": []string{}}))
	token := csrf(t, page) // the sign-out form's
	code, detail := get(t, c, e.srv.URL+"/portal/deliveries/"+dlv)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, detail, "not here")
	require.NotContains(t, detail, `id="resend"`)
	code, epPage := get(t, c, e.srv.URL+"/portal/endpoints/"+ep)
	require.Equal(t, http.StatusOK, code)
	for _, id := range []string{`id="save"`, `id="test-filter"`, `id="rotate"`, `id="disable"`, `id="delete"`, `id="send-test"`, `id="count-replay"`} {
		require.NotContains(t, epPage, id)
	}
	_, list := get(t, c, e.srv.URL+"/portal/endpoints")
	require.NotContains(t, list, `id="new-endpoint"`)

	form := url.Values{"csrf": {token}, "url": {"http://127.0.0.1:9/changed"}, "grace_period": {"0s"}, "since": {"2020-01-01T00:00"}}
	for _, path := range []string{"/deliveries/" + dlv + "/resend", "/endpoints/" + ep, "/endpoints/" + ep + "/rotate",
		"/endpoints/" + ep + "/disable", "/endpoints/" + ep + "/delete", "/endpoints/" + ep + "/test", "/endpoints/" + ep + "/replay", "/endpoints",
		"/endpoints/filter-test", "/endpoints/" + ep + "/filter-test"} {
		code, body, _ := post(t, c, e.srv.URL+"/portal"+path, form)
		require.Equal(t, http.StatusForbidden, code, path)
		require.Contains(t, body, "does not allow that", path)
	}
	code, _ = get(t, c, e.srv.URL+"/portal/endpoints/new")
	require.Equal(t, http.StatusForbidden, code)
	var replays, changed, rotated, events, audited int
	require.NoError(t, e.st.Pool().QueryRow(context.Background(), `SELECT (SELECT count(*) FROM replays),
		(SELECT count(*) FROM endpoints WHERE url <> 'http://127.0.0.1:9/hook' OR disabled OR deleted_at IS NOT NULL),
		(SELECT count(*) FROM endpoint_secrets WHERE status <> 'current'), (SELECT count(*) FROM events WHERE app_id = $1),
		(SELECT count(*) FROM audit_log WHERE actor_kind = 'portal')`, e.app.ID).Scan(&replays, &changed, &rotated, &events, &audited))
	require.Equal(t, []int{0, 0, 0, 1, 0}, []int{replays, changed, rotated, events, audited}, "nothing changed")
}

// TestChangesNeedTheCSRFToken: a change without the session's CSRF token,
// or with another session's, is refused; with it, the resend is made and
// recorded as the portal session's.
func TestChangesNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	_, dlv := e.deadLetter(500, delivery.ClassRetryable, "down")
	full := map[string]any{"capabilities": []string{"resend", "manage_endpoints", "rotate_secret"}}
	c := e.client()
	page := open(t, c, e.link(full))
	other := csrf(t, open(t, e.client(), e.link(full)))
	resend := e.srv.URL + "/portal/deliveries/" + dlv + "/resend"
	for _, form := range []url.Values{{}, {"csrf": {""}}, {"csrf": {other}}, {"csrf": {csrf(t, page) + "x"}}} {
		code, body, _ := post(t, c, resend, form)
		require.Equal(t, http.StatusForbidden, code)
		require.Contains(t, body, "This form has expired")
	}
	code, _, loc := post(t, c, resend, url.Values{"csrf": {csrf(t, page)}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/portal/deliveries/"+dlv+"?done=resent", loc)
	var by, byName string
	require.NoError(t, e.st.Pool().QueryRow(context.Background(), `SELECT requested_by, requested_by_name FROM replays WHERE delivery_id = $1`, dlv).Scan(&by, &byName))
	require.True(t, strings.HasPrefix(by, "ps_"), by)
	require.Contains(t, byName, "portal session")
	_, detail := get(t, c, e.srv.URL+"/portal/deliveries/"+dlv+"?done=resent")
	require.Contains(t, detail, "Resend queued")
	require.Contains(t, detail, byName)
}

// TestEndpointLimitedSession: a link limited to one endpoint shows only
// that endpoint and its deliveries; the other's pages are 404 and it cannot
// create endpoints.
func TestEndpointLimitedSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	mine := e.endpoint("http://127.0.0.1:9/mine")
	theirs := e.endpoint("http://127.0.0.1:9/theirs")
	dl := e.publish("invoice.paid", map[string]any{"n": 1})
	c := e.client()
	log := open(t, c, e.link(map[string]any{"capabilities": []string{"manage_endpoints", "resend"}, "endpoint_ids": []string{mine}}))
	require.Contains(t, log, dl[mine])
	require.NotContains(t, log, dl[theirs])
	require.NotContains(t, log, "/theirs")
	for _, path := range []string{"/deliveries/" + dl[theirs], "/endpoints/" + theirs, "/deliveries?endpoint_id=" + theirs} {
		code, _ := get(t, c, e.srv.URL+"/portal"+path)
		require.Equal(t, http.StatusNotFound, code, path)
	}
	code, _ := get(t, c, e.srv.URL+"/portal/deliveries/"+dl[mine])
	require.Equal(t, http.StatusOK, code)
	_, eps := get(t, c, e.srv.URL+"/portal/endpoints")
	require.NotContains(t, eps, theirs)
	require.NotContains(t, eps, `id="new-endpoint"`)
	code, _, _ = post(t, c, e.srv.URL+"/portal/endpoints/"+theirs+"/disable", url.Values{"csrf": {csrf(t, log)}})
	require.Equal(t, http.StatusNotFound, code)
	code, _, _ = post(t, c, e.srv.URL+"/portal/endpoints", url.Values{"csrf": {csrf(t, log)}, "url": {"http://127.0.0.1:9/new"}})
	require.Equal(t, http.StatusForbidden, code)
	_, stats := get(t, c, e.srv.URL+"/portal/stats")
	require.Contains(t, stats, "<dt>Deliveries</dt><dd>1</dd>", "stats count only its endpoint's deliveries")
}

// TestPortalAnswersAreHardened: every page has a strict CSP (no inline
// script or style), framing only by the configured origins, and no caching.
func TestPortalAnswersAreHardened(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{frameAncestors: []string{"https://dash.example.com"}})
	c := e.client()
	open(t, c, e.link(map[string]any{}))
	for _, path := range []string{"/portal/deliveries", "/portal/open?token=x", "/portal/nowhere"} {
		resp, err := c.Get(e.srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self';", path)
		require.Contains(t, csp, "default-src 'none'", path)
		require.Contains(t, csp, "frame-ancestors https://dash.example.com", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
	}
}
