package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
)

// TestEgressProxyIsTheOperators: only the admin key sets an endpoint's
// egress_proxy; an app key giving it, even on its own endpoint, gets 403
// naming the field and changes nothing; values are "direct", a proxy URL
// without credentials, or "" (the deployment's).
func TestEgressProxyIsTheOperators(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "egress")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	key := appKey(t, h, admin, app.ID, "tenant")
	base := "/v1/apps/" + app.ID + "/endpoints"

	rec := send(t, h, key, "POST", base, map[string]any{"url": "http://127.0.0.1:9/hook", "egress_proxy": "direct"})
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Equal(t, []string{"egress_proxy"}, problemOf(t, rec).Fields)

	rec = send(t, h, key, "POST", base, map[string]any{"url": "http://127.0.0.1:9/hook"})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var ep api.EndpointView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
	require.Empty(t, ep.EgressProxy)
	path := base + "/" + ep.ID
	rec = send(t, h, key, "PATCH", path, map[string]any{"egress_proxy": "http://proxy.internal:3128"})
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Equal(t, []string{"egress_proxy"}, problemOf(t, rec).Fields)

	for _, bad := range []string{"socks5://proxy:1080", "http://u:pw@proxy:3128", "http://proxy:3128/path", "Direct"} {
		rec = send(t, h, admin, "PATCH", path, map[string]any{"egress_proxy": bad})
		require.Equal(t, http.StatusUnprocessableEntity, rec.Code, bad)
		require.Equal(t, []string{"egress_proxy"}, problemOf(t, rec).Fields, bad)
		require.NotContains(t, rec.Body.String(), "pw@", "the value is not repeated")
	}
	for _, good := range []string{"direct", "https://proxy.internal:3128", ""} {
		rec = send(t, h, admin, "PATCH", path, map[string]any{"egress_proxy": good})
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		ep = api.EndpointView{}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
		require.Equal(t, good, ep.EgressProxy)
	}
	rec = send(t, h, admin, "PATCH", path, map[string]any{"egress_proxy": "direct"})
	require.Equal(t, http.StatusOK, rec.Code)
	rec = send(t, h, key, "PATCH", path, map[string]any{"description": "mine"})
	require.Equal(t, http.StatusOK, rec.Code, "an app key still edits the rest: %s", rec.Body.String())
	ep = api.EndpointView{}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
	require.Equal(t, "direct", ep.EgressProxy, "and the override stays")
}
