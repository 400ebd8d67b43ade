package portal_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
)

// TestPortalOrdering: the endpoint form sets and shows an endpoint's
// ordering (a form without the field keeps it), and a delivery waiting in
// its sequence says which delivery it waits for.
func TestPortalOrdering(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	ep := e.endpoint("http://127.0.0.1:9/hook")
	c := e.client()
	token := csrf(t, open(t, c, e.link(map[string]any{"capabilities": []string{"manage_endpoints"}})))
	page := e.srv.URL + "/portal/endpoints/" + ep
	ordering := func() string {
		var v api.EndpointView
		require.Equal(t, http.StatusOK, e.call("GET", "/v1/apps/"+e.app.ID+"/endpoints/"+ep, nil, &v))
		return v.Ordering
	}
	require.Equal(t, "none", ordering())
	_, body := get(t, c, page)
	require.Contains(t, body, `<option value="none" selected>`)

	form := url.Values{"csrf": {token}, "url": {"http://127.0.0.1:9/hook"}, "subscribe": {"all"},
		"retry_schedule": {"1s, 5s"}, "deadline": {"75m"}, "request_timeout": {"10s"}, "ordering": {"fifo"}}
	code, _, _ := post(t, c, page, form)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "fifo", ordering())
	_, body = get(t, c, page)
	require.Contains(t, body, `<option value="fifo" selected>`)
	form.Del("ordering") // a page from before the field
	code, _, _ = post(t, c, page, form)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "fifo", ordering())
	form.Set("ordering", "lifo")
	code, _, _ = post(t, c, page, form)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	form.Set("ordering", "fifo")
	form.Set("fifo_on_dead_letter", "block")
	code, _, _ = post(t, c, page, form)
	require.Equal(t, http.StatusSeeOther, code)
	var v api.EndpointView
	require.Equal(t, http.StatusOK, e.call("GET", "/v1/apps/"+e.app.ID+"/endpoints/"+ep, nil, &v))
	require.Equal(t, "block", v.FIFOOnDeadLetter)
	_, body = get(t, c, page)
	require.Contains(t, body, `<option value="block" selected>`)

	var dlvs []string
	for range 2 {
		var out struct{ Deliveries []struct{ ID string } }
		require.Equal(t, http.StatusAccepted, e.call("POST", "/v1/apps/"+e.app.ID+"/events",
			map[string]any{"type": "ledger.entry", "data": map[string]any{}, "ordering_key": "cust:1"}, &out))
		require.Len(t, out.Deliveries, 1)
		dlvs = append(dlvs, out.Deliveries[0].ID)
	}
	_, body = get(t, c, e.srv.URL+"/portal/deliveries/"+dlvs[1])
	require.Contains(t, body, `After <a href="/portal/deliveries/`+dlvs[0]+`" id="waiting-for">`)
	_, body = get(t, c, e.srv.URL+"/portal/deliveries/"+dlvs[0])
	require.NotContains(t, body, `id="waiting-for"`)
	require.NotContains(t, body, `id="release"`, "only a blocking dead letter can be released")

	// The head dead-letters (as its workflow would record it): it blocks.
	_, err := e.st.Pool().Exec(t.Context(), `UPDATE deliveries SET status = 'dead_lettered' WHERE id = $1`, dlvs[0])
	require.NoError(t, err)
	var d struct {
		BlocksSequence bool `json:"blocks_sequence"`
	}
	require.Equal(t, http.StatusOK, e.call("GET", "/v1/apps/"+e.app.ID+"/deliveries/"+dlvs[0], nil, &d))
	require.True(t, d.BlocksSequence)
	resend := csrf(t, open(t, c, e.link(map[string]any{"capabilities": []string{"resend"}})))
	_, body = get(t, c, e.srv.URL+"/portal/deliveries/"+dlvs[0])
	require.Contains(t, body, `id="release"`)
	code, _, loc := post(t, c, e.srv.URL+"/portal/deliveries/"+dlvs[0]+"/release", url.Values{"csrf": {resend}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Contains(t, loc, "done=released")
	var after map[string]any
	require.Equal(t, http.StatusOK, e.call("GET", "/v1/apps/"+e.app.ID+"/deliveries/"+dlvs[0], nil, &after))
	require.NotContains(t, after, "blocks_sequence", "released")
	code, _, _ = post(t, c, e.srv.URL+"/portal/deliveries/"+dlvs[0]+"/release", url.Values{"csrf": {resend}})
	require.Equal(t, http.StatusConflict, code, "released once")
}
