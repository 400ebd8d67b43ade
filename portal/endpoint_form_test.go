package portal_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/store"
)

var checkedType = regexp.MustCompile(`name="event_types" value="([^"]+)" checked`)
var anyType = regexp.MustCompile(`name="event_types" value="([^"]+)"`)

// matches lists the first group of every match of re in page.
func matches(re *regexp.Regexp, page string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestSavingKeepsEverySubscribedType: the endpoint form lists the whole
// catalog (past its first page) and every type the endpoint subscribes to
// (one no event has used yet included), checked, so saving it as shown
// keeps them all; a save that would turn a non-empty subscription into
// "every type" needs that choice made explicitly.
func TestSavingKeepsEverySubscribedType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envConfig{})
	const catalog = 260 // past the API's page of 250
	for i := range catalog {
		_, err := e.st.CreateEventType(ctx, store.EventType{Name: fmt.Sprintf("cat.type_%03d", i)})
		require.NoError(t, err)
	}
	subscribed := []string{"cat.type_259", "zz.not_yet_used"}
	ep := e.endpoint("http://127.0.0.1:9/hook", subscribed...)
	c := e.client()
	token := csrf(t, open(t, c, e.link(map[string]any{"capabilities": []string{"manage_endpoints"}})))
	page := e.srv.URL + "/portal/endpoints/" + ep

	code, body := get(t, c, page)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, subscribed, matches(checkedType, body), "every subscribed type is shown checked")
	require.Len(t, matches(anyType, body), catalog+1, "the whole catalog and the type not in it")

	types := func() []string {
		var v api.EndpointView
		require.Equal(t, http.StatusOK, e.call("GET", "/v1/apps/"+e.app.ID+"/endpoints/"+ep, nil, &v))
		return v.EventTypes
	}
	save := func(subscribe string, checked []string) (int, string) {
		form := url.Values{"csrf": {token}, "url": {"http://127.0.0.1:9/hook"}, "description": {"orders service"},
			"retry_schedule": {"1s, 5s"}, "deadline": {"75m"}, "request_timeout": {"10s"}, "event_types": checked}
		if subscribe != "" {
			form.Set("subscribe", subscribe)
		}
		code, body, _ := post(t, c, page, form)
		return code, body
	}
	code, _ = save("some", matches(checkedType, body))
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, subscribed, types(), "saved as shown, nothing dropped")

	for _, subscribe := range []string{"some", ""} { // "": a page from before the choice
		code, body := save(subscribe, nil)
		require.Equal(t, http.StatusUnprocessableEntity, code, "subscribe=%q", subscribe)
		require.Contains(t, body, "check at least one event type, or choose all event types")
		require.Equal(t, subscribed, types(), "nothing checked never silently means every type")
	}
	code, _ = save("all", nil)
	require.Equal(t, http.StatusSeeOther, code)
	require.Empty(t, types(), "every type, chosen explicitly")
	_, body = get(t, c, page)
	require.Contains(t, body, `name="subscribe" value="all" checked`)
	code, _ = save("", []string{"cat.type_001"})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, []string{"cat.type_001"}, types())
}

// TestPortalCatalogIsPerApp: the portal's catalog (its page and the
// endpoint form) shows the operator's types and the app's own, never
// another app's.
func TestPortalCatalogIsPerApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envConfig{})
	other, err := e.st.CreateApp(ctx, store.App{Name: "Globex"})
	require.NoError(t, err)
	_, err = e.st.CreateEventType(ctx, store.EventType{Name: "shared.defined", Description: "Everyone's."})
	require.NoError(t, err)
	e.publish("acme.own_type", map[string]any{})
	require.Equal(t, http.StatusAccepted, e.call("POST", "/v1/apps/"+other.ID+"/events", map[string]any{"type": "globex.secret_merger", "data": map[string]any{}}, nil))
	c := e.client()
	open(t, c, e.link(map[string]any{"capabilities": []string{"manage_endpoints"}}))
	for _, path := range []string{"/portal/event-types", "/portal/endpoints/new"} {
		code, body := get(t, c, e.srv.URL+path)
		require.Equal(t, http.StatusOK, code, path)
		require.Contains(t, body, "acme.own_type", path)
		require.Contains(t, body, "shared.defined", path)
		require.NotContains(t, body, "globex", path)
	}
}
