package portal_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLimitedPreviewSeesOnlyItsEvents: a session limited to
// endpoint "mine" (subscribed to invoice.paid) may not open the page of an
// event sent only to another endpoint (TestEventPageShowsWhatTheSessionSees),
// but its own endpoint's filter preview, with "all types" ticked in the
// unsaved form, evaluates any filter on that event: it learns the event's
// ID and type, a boolean oracle on its data, and, through CEL's error
// text, the data itself.
func TestLimitedPreviewSeesOnlyItsEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	mine := e.endpoint("http://127.0.0.1:9/mine", "invoice.paid")
	theirs := e.endpoint("http://127.0.0.1:9/theirs", "payroll.run")
	evt, dl := e.event("payroll.run", map[string]any{"iban": "DE89370400440532013000"})
	require.Contains(t, dl, theirs)
	require.NotContains(t, dl, mine)

	c := e.client()
	token := csrf(t, open(t, c, e.link(map[string]any{"capabilities": []string{"manage_endpoints"}, "endpoint_ids": []string{mine}})))
	code, _ := get(t, c, e.srv.URL+"/portal/events/"+evt)
	require.Equal(t, http.StatusNotFound, code, "not this session's event")

	form := url.Values{"csrf": {token}, "url": {"http://127.0.0.1:9/mine"}, "subscribe": {"all"}, "filter": {"timestamp(data.iban) > created"}}
	code, body, _ := post(t, c, e.srv.URL+"/portal/endpoints/"+mine+"/filter-test", form)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, evt, "the preview lists an event none of the session's endpoints got")
	require.NotContains(t, body, "DE89370400440532013000", "the preview shows another endpoint's event data")
}
