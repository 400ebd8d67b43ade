package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/store"
)

// TestCustomHeadersAreValidated: a custom header that could not be sent
// (a name that is not a token, a value with CR, LF or another control
// character) is a 422 naming the header, on create and on PATCH, and
// changes nothing; a tab, non-ASCII text and the masked value of a stored
// header are accepted.
func TestCustomHeadersAreValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, admin := tenant(t, "headers")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	path := "/v1/apps/" + app.ID + "/endpoints"
	for _, tc := range []struct {
		headers map[string]string
		field   string
	}{
		{map[string]string{"X-Ok": "fine", "X-Split": "a\r\nX-Injected: 1"}, "headers.X-Split"},
		{map[string]string{"X-Nul": "a\x00b"}, "headers.X-Nul"},
		{map[string]string{"X-Bell": "\a"}, "headers.X-Bell"},
		{map[string]string{"Bad Name": "x"}, "headers.Bad Name"},
		{map[string]string{"X-Colon:": "x"}, "headers.X-Colon:"},
		{map[string]string{"": "x"}, "headers."},
		{map[string]string{"webhook-id": "x"}, "headers"},
	} {
		rec := send(t, h, admin, "POST", path, map[string]any{"url": "http://127.0.0.1:9/h", "headers": tc.headers})
		require.Equal(t, http.StatusUnprocessableEntity, rec.Code, "%q: %s", tc.headers, rec.Body.String())
		require.Equal(t, []string{tc.field}, problemOf(t, rec).Fields, "%q", tc.headers)
	}
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM endpoints`).Scan(&n))
	require.Zero(t, n, "no invalid endpoint was stored")

	rec := send(t, h, admin, "POST", path, map[string]any{"url": "http://127.0.0.1:9/h", "headers": map[string]string{"X-Tab": "a\tb", "X-Name": "Zoë", "X-Token": "secret"}})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var ep api.EndpointView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
	sealed := func() []byte {
		var b []byte
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT headers_sealed FROM endpoints WHERE id = $1`, ep.ID).Scan(&b))
		return b
	}
	before := sealed()
	rec = send(t, h, admin, "PATCH", path+"/"+ep.ID, map[string]any{"headers": map[string]string{"X-Token": store.HeaderMask, "X-Split": "a\nb"}})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code, rec.Body.String())
	require.Equal(t, []string{"headers.X-Split"}, problemOf(t, rec).Fields)
	require.Equal(t, before, sealed(), "a refused PATCH changes nothing")
	rec = send(t, h, admin, "PATCH", path+"/"+ep.ID, map[string]any{"headers": map[string]string{"X-Token": store.HeaderMask}})
	require.Equal(t, http.StatusOK, rec.Code, "the masked value (non-ASCII) is accepted: %s", rec.Body.String())
	var patched api.EndpointView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &patched))
	require.Equal(t, map[string]string{"X-Token": store.HeaderMask}, patched.Headers)
}

// TestAuditCursorIsValidated: a cursor no list gave is a 422 naming
// cursor, not a 500; the list's own next_cursor pages on.
func TestAuditCursorIsValidated(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "auditcursor")
	h := api.New(api.Options{Store: st}).Handler()
	for _, name := range []string{"one", "two", "three"} {
		require.Equal(t, http.StatusOK, send(t, h, admin, "PATCH", "/v1/apps/"+app.ID, map[string]any{"name": name}).Code)
	}
	for _, cursor := range []string{"abc", "-1", "0", "1.5", "99999999999999999999", "\x00", "\xff"} {
		rec := send(t, h, admin, "GET", "/v1/apps/"+app.ID+"/audit-log?cursor="+url.QueryEscape(cursor), nil)
		require.Equal(t, http.StatusUnprocessableEntity, rec.Code, "%q: %s", cursor, rec.Body.String())
		require.Equal(t, []string{"cursor"}, problemOf(t, rec).Fields, "%q", cursor)
	}
	var page struct {
		Data       []store.AuditEntry `json:"data"`
		NextCursor *string            `json:"next_cursor"`
	}
	seen := 0
	next := ""
	for {
		rec := send(t, h, admin, "GET", "/v1/apps/"+app.ID+"/audit-log?limit=2&cursor="+url.QueryEscape(next), nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		page.NextCursor = nil
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		seen += len(page.Data)
		if page.NextCursor == nil {
			break
		}
		next = *page.NextCursor
	}
	require.Equal(t, 3, seen)
	rec := send(t, h, admin, "GET", "/v1/apps/"+app.ID+"/endpoints?cursor="+url.QueryEscape("\xff"), nil)
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code, "every list refuses a cursor Postgres text cannot hold")
}
