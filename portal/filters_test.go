package portal_test

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
)

// event publishes an event of typ with data and returns its ID and its
// deliveries by endpoint.
func (e *env) event(typ string, data any) (string, map[string]string) {
	e.t.Helper()
	var out struct {
		ID         string `json:"id"`
		Deliveries []struct {
			ID         string `json:"id"`
			EndpointID string `json:"endpoint_id"`
		} `json:"deliveries"`
	}
	require.Equal(e.t, http.StatusAccepted, e.call("POST", "/v1/apps/"+e.app.ID+"/events", map[string]any{"type": typ, "data": data}, &out))
	m := map[string]string{}
	for _, d := range out.Deliveries {
		m[d.EndpointID] = d.ID
	}
	// A dispatcher would have started their workflows.
	_, err := e.st.Pool().Exec(context.Background(), `DELETE FROM outbox`)
	require.NoError(e.t, err)
	return out.ID, m
}

// filterOf is the endpoint's filter as the API shows it.
func (e *env) filterOf(ep string) string {
	e.t.Helper()
	var v api.EndpointView
	require.Equal(e.t, http.StatusOK, e.call("GET", "/v1/apps/"+e.app.ID+"/endpoints/"+ep, nil, &v))
	return v.Filter
}

// TestFilterFieldIsSavedAndEscaped: the form saves its filter on create
// and on update, shows it back escaped (on the endpoint's page and in the
// list), shows a CEL error escaped, keeps the filter when an older page
// posts no filter field and removes it when the field is emptied.
func TestFilterFieldIsSavedAndEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	c := e.client()
	token := csrf(t, open(t, c, e.link(map[string]any{"capabilities": []string{"manage_endpoints"}})))
	const script = `type == '<script>alert(1)</script>'`
	form := func(filter ...string) url.Values {
		f := url.Values{"csrf": {token}, "url": {"http://127.0.0.1:9/hook"}, "subscribe": {"all"}, "retry_schedule": {"1s"}, "deadline": {"1h"}, "request_timeout": {"10s"}}
		if len(filter) > 0 {
			f.Set("filter", filter[0])
		}
		return f
	}
	code, body, _ := post(t, c, e.srv.URL+"/portal/endpoints", form(script+"\r\n"))
	require.Equal(t, http.StatusCreated, code, body)
	var ep string
	require.NoError(t, e.st.Pool().QueryRow(context.Background(), `SELECT id FROM endpoints WHERE app_id = $1`, e.app.ID).Scan(&ep))
	require.Equal(t, script, e.filterOf(ep), "saved as typed, the line break browsers add trimmed")

	page := e.srv.URL + "/portal/endpoints/" + ep
	for _, u := range []string{page, e.srv.URL + "/portal/endpoints"} {
		code, body := get(t, c, u)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `type == &#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39;`, u)
		require.NotContains(t, body, `<script>alert`, u)
	}

	code, body, _ = post(t, c, page, form(`type == '<b>bold</b>' &&`))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, `id="filter-error">filter: ERROR: &lt;input&gt;:1:`, "the CEL error, with line and column, next to the field")
	require.Contains(t, body, `| type == &#39;&lt;b&gt;bold&lt;/b&gt;&#39; &amp;&amp;`)
	require.NotContains(t, body, `<b>bold`)
	require.NotContains(t, body, `id="error"`, "shown once, next to the field")
	require.Equal(t, script, e.filterOf(ep), "nothing saved")

	code, _, _ = post(t, c, page, form())
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, script, e.filterOf(ep), "a form without the field keeps the filter")
	code, _, _ = post(t, c, page, form(" "))
	require.Equal(t, http.StatusSeeOther, code)
	require.Empty(t, e.filterOf(ep), "an emptied field removes it")
	_, body = get(t, c, e.srv.URL+"/portal/endpoints")
	require.Contains(t, body, `<span class="muted">none</span>`)
}

// TestFilterPreviewIsScoped: the preview needs manage_endpoints and the
// CSRF token, a session limited to some endpoints previews only its own
// endpoint's form, and a preview saves nothing.
func TestFilterPreviewIsScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	mine := e.endpoint("http://127.0.0.1:9/mine")
	theirs := e.endpoint("http://127.0.0.1:9/theirs")
	e.event("invoice.paid", map[string]any{"amount": 1})
	c := e.client()
	token := csrf(t, open(t, c, e.link(map[string]any{"capabilities": []string{"manage_endpoints"}, "endpoint_ids": []string{mine}})))
	form := url.Values{"csrf": {token}, "url": {"http://127.0.0.1:9/changed"}, "subscribe": {"all"}, "filter": {"data.amount == 1"}}

	code, _, _ := post(t, c, e.srv.URL+"/portal/endpoints/filter-test", form)
	require.Equal(t, http.StatusForbidden, code, "a limited session cannot create, so cannot preview a new endpoint")
	code, _, _ = post(t, c, e.srv.URL+"/portal/endpoints/"+theirs+"/filter-test", form)
	require.Equal(t, http.StatusNotFound, code)
	code, _, _ = post(t, c, e.srv.URL+"/portal/endpoints/"+mine+"/filter-test", url.Values{"filter": {"true"}})
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, body, _ := post(t, c, e.srv.URL+"/portal/endpoints/"+mine+"/filter-test", form)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<strong id="preview-matched">1</strong> of <span id="preview-evaluated">1</span> recent events would be delivered`)
	require.Contains(t, body, `value="http://127.0.0.1:9/changed"`, "the form as typed")
	var changed int
	require.NoError(t, e.st.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM endpoints WHERE url LIKE '%changed' OR filter <> ''`).Scan(&changed))
	require.Zero(t, changed, "a preview saves nothing")

	form.Set("subscribe", "some") // and no type checked
	code, body, _ = post(t, c, e.srv.URL+"/portal/endpoints/"+mine+"/filter-test", form)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, "check at least one event type", "the same check as a save")
}

// TestEventPageShowsWhatTheSessionSees: the event page lists the
// deliveries and the filter skips of the session's endpoints only; an
// event none of them got or skipped is no page of a limited session's.
func TestEventPageShowsWhatTheSessionSees(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	mine := e.endpoint("http://127.0.0.1:9/mine", "invoice.paid")
	theirs := e.endpoint("http://127.0.0.1:9/theirs")
	for ep, expr := range map[string]string{mine: "data.n > 1", theirs: "data.n > 2"} {
		require.Equal(t, http.StatusOK, e.call("PATCH", "/v1/apps/"+e.app.ID+"/endpoints/"+ep, map[string]any{"filter": expr}, nil))
	}
	both, _ := e.event("invoice.paid", map[string]any{"n": 1})        // skipped by both
	onlyTheirs, dl := e.event("invoice.paid", map[string]any{"n": 2}) // sent to mine, skipped by theirs
	require.Contains(t, dl, mine)
	require.NotContains(t, dl, theirs)
	broken, _ := e.event("invoice.paid", map[string]any{"m": 0}) // an error for both

	c := e.client()
	open(t, c, e.link(map[string]any{"endpoint_ids": []string{mine}}))
	code, body := get(t, c, e.srv.URL+"/portal/events/"+both)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<tr data-endpoint="`+mine+`">`)
	require.Contains(t, body, "the filter was false for this event")
	require.NotContains(t, body, theirs)
	code, body = get(t, c, e.srv.URL+"/portal/events/"+broken)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `the filter failed on this event: <pre class="filter-error">no such key: n</pre>`)
	code, body = get(t, c, e.srv.URL+"/portal/events/"+onlyTheirs)
	require.Equal(t, http.StatusOK, code, "delivered to mine")
	require.Contains(t, body, `<tr data-delivery="`+dl[mine]+`" data-endpoint="`+mine+`">`)
	require.Contains(t, body, `id="filtered-out-none"`, "theirs skipped it, which this session does not see")
	require.NotContains(t, body, theirs)
	_, body = get(t, c, e.srv.URL+"/portal/deliveries/"+dl[mine])
	require.NotContains(t, body, `id="filtered-out-count"`, "theirs skipped it, which this session does not see")

	sentToTheirsOnly, dl := e.event("invoice.voided", map[string]any{"n": 3}) // a type mine does not subscribe to
	require.Equal(t, []string{theirs}, slices.Collect(maps.Keys(dl)))
	for _, evt := range []string{sentToTheirsOnly, "evt_missing"} {
		code, _ = get(t, c, e.srv.URL+"/portal/events/"+evt)
		require.Equal(t, http.StatusNotFound, code, evt)
	}
	resp, err := c.Get(e.srv.URL + "/portal/events?id=+" + url.QueryEscape(both))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/portal/events/"+both, resp.Header.Get("Location"))
}
