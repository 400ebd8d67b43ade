package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
)

// TestEndpointTraceContext: an endpoint's trace_context is "linked",
// "fresh", "off" or "" (the deployment's), set at creation or by PATCH,
// kept by PATCHes of other fields; anything else is 422 naming the field.
func TestEndpointTraceContext(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "traces")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	key := appKey(t, h, admin, app.ID, "tenant")
	base := "/v1/apps/" + app.ID + "/endpoints"
	view := func(rec interface{ Bytes() []byte }) api.EndpointView {
		var ep api.EndpointView
		require.NoError(t, json.Unmarshal(rec.Bytes(), &ep))
		return ep
	}

	rec := send(t, h, key, "POST", base, map[string]any{"url": "http://127.0.0.1:9/hook", "trace_context": "fresh"})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	ep := view(rec.Body)
	require.Equal(t, "fresh", ep.TraceContext)
	path := base + "/" + ep.ID
	for _, bad := range []string{"Fresh", "none", "tracestate"} {
		rec = send(t, h, key, "PATCH", path, map[string]any{"trace_context": bad})
		require.Equal(t, http.StatusUnprocessableEntity, rec.Code, bad)
		require.Equal(t, []string{"trace_context"}, problemOf(t, rec).Fields, bad)
	}
	rec = send(t, h, key, "PATCH", path, map[string]any{"description": "x"})
	require.Equal(t, "fresh", view(rec.Body).TraceContext, "kept")
	for _, good := range []string{"off", "linked", ""} {
		rec = send(t, h, key, "PATCH", path, map[string]any{"trace_context": good})
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, good, view(rec.Body).TraceContext)
	}
}
