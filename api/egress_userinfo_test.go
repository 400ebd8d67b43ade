package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
)

// TestEgressProxyOverrideRefusesAnyUserinfo: a proxy URL with only a
// password ("http://:pw@host") or an empty user is still a URL with
// credentials: refused, never stored (it would be shown in every read of
// the endpoint, app keys' included).
func TestEgressProxyOverrideRefusesAnyUserinfo(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "egressui")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	base := "/v1/apps/" + app.ID + "/endpoints"
	rec := send(t, h, admin, "POST", base, map[string]any{"url": "http://127.0.0.1:9/hook"})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	for _, bad := range []string{"http://:topsecret@proxy:3128", "https://:topsecret@proxy", "http://@proxy:3128"} {
		rec = send(t, h, admin, "POST", base, map[string]any{"url": "http://127.0.0.1:9/hook", "egress_proxy": bad})
		require.Equal(t, http.StatusUnprocessableEntity, rec.Code, "%s: %s", bad, rec.Body.String())
		require.Equal(t, []string{"egress_proxy"}, problemOf(t, rec).Fields, bad)
		require.NotContains(t, rec.Body.String(), "topsecret")
	}
}
