package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
)

// snapshot counts what a request could write synchronously: the rows of
// every table the API writes, the outbox's sequence (the dispatcher deletes
// outbox rows concurrently, so their count is no witness) and the latest
// update times. Attempts are written by the worker, not by requests.
func (h *harness) snapshot() map[string]int {
	h.t.Helper()
	out := map[string]int{}
	var outboxSeq int
	require.NoError(h.t, h.store.Pool().QueryRow(context.Background(), `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM outbox_id_seq`).Scan(&outboxSeq))
	out["outbox_seq"] = outboxSeq
	for _, table := range []string{"apps", "api_keys", "event_types", "endpoints", "endpoint_secrets", "events", "deliveries", "replays"} {
		var n int
		require.NoError(h.t, h.store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
		out[table] = n
	}
	var updated string
	require.NoError(h.t, h.store.Pool().QueryRow(context.Background(),
		`SELECT coalesce(max(updated_at)::text, '') || (SELECT coalesce(max(updated_at)::text, '') FROM endpoints) || (SELECT coalesce(max(updated_at)::text, '') FROM event_types) FROM apps`).Scan(&updated))
	out["updated:"+updated] = 1
	return out
}

func TestBadInputs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	other := h.createApp()
	ep := h.createEndpoint(appID, map[string]any{"url": "http://127.0.0.1:1/hook"})
	otherEP := h.createEndpoint(other, map[string]any{"url": "http://127.0.0.1:1/hook"})
	h.do("POST", "/v1/event-types", map[string]any{"name": "known.type"}, nil)
	big := `{"type":"a.b","data":{"x":"` + strings.Repeat("a", 300<<10) + `"}}`
	app := "/v1/apps/" + appID
	for _, tc := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"POST", "/v1/apps", `{}`, 422, "name"},
		{"POST", "/v1/apps", `{"name":5}`, 422, "name"},
		{"POST", "/v1/apps", `{"name":"x","extra":1}`, 422, "extra"},
		{"POST", "/v1/apps", `{"name":`, 400, ""},
		{"POST", "/v1/apps", `{"name":"` + strings.Repeat("n", 300) + `"}`, 422, "name"},
		{"PATCH", app, `{"name":""}`, 422, "name"},
		{"PATCH", "/v1/apps/app_missing", `{"name":"x"}`, 404, ""},
		{"POST", "/v1/event-types", `{"name":"NotAType"}`, 422, "name"},
		{"POST", "/v1/event-types", `{"name":"known.type"}`, 409, "name"},
		{"POST", "/v1/event-types", `{"name":"a.b","schema":[1]}`, 422, "schema"},
		{"PATCH", "/v1/event-types/known.type", `{"deprecated":"yes"}`, 422, "deprecated"},
		{"PATCH", "/v1/event-types/unknown.type", `{"description":"x"}`, 404, ""},
		{"POST", app + "/endpoints", `{}`, 422, "url"},
		{"POST", app + "/endpoints", `{"url":"ftp://example.com"}`, 422, "url"},
		{"POST", app + "/endpoints", `{"url":"file:///etc/passwd"}`, 422, "url"},
		{"POST", app + "/endpoints", `{"url":"gopher://example.com"}`, 422, "url"},
		{"POST", app + "/endpoints", `{"url":"https://user:pw@example.com"}`, 422, "url"},
		{"POST", app + "/endpoints", `{"url":"https://example.com/` + strings.Repeat("p", 2100) + `"}`, 422, "url"},
		{"POST", app + "/endpoints", `{"url":"not a url"}`, 422, "url"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","event_types":["Bad Type"]}`, 422, "event_types"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","event_types":"payment.succeeded"}`, 422, "event_types"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","environment":"staging"}`, 422, "environment"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","retry_schedule":["1s","soon"]}`, 422, "retry_schedule"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","retry_schedule":[]}`, 422, "retry_schedule"},
		{"POST", "/v1/apps", `{"name":"a","retention":"30m"}`, 422, "retention"},
		{"PATCH", app, `{"retention":"forever"}`, 422, "retention"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","rate_limit":-1}`, 422, "rate_limit"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","max_in_flight":1001}`, 422, "max_in_flight"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","max_in_flight":"2"}`, 422, "max_in_flight"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","deadline":"forever"}`, 422, "deadline"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","request_timeout":"5m"}`, 422, "request_timeout"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","deadline":"5s","request_timeout":"10s"}`, 422, "request_timeout"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","headers":{"webhook-id":"x"}}`, 422, "headers"},
		{"POST", app + "/endpoints", `{"url":"https://example.com","headers":{"X-A":1}}`, 422, "headers"},
		{"POST", "/v1/apps/app_missing/endpoints", `{"url":"https://example.com"}`, 404, ""},
		{"PATCH", app + "/endpoints/" + ep.ID, `{"url":"javascript:alert(1)"}`, 422, "url"},
		{"PATCH", app + "/endpoints/" + otherEP.ID, `{"description":"x"}`, 404, ""},
		{"DELETE", app + "/endpoints/" + otherEP.ID, ``, 404, ""},
		{"POST", app + "/endpoints/" + ep.ID + "/secret/rotate", `{"grace_period":"8d"}`, 422, "grace_period"},
		{"POST", app + "/endpoints/" + ep.ID + "/secret/rotate", `{"grace_period":"200h"}`, 422, "grace_period"},
		{"POST", app + "/endpoints/" + otherEP.ID + "/secret/rotate", `{}`, 404, ""},
		{"POST", app + "/endpoints/" + otherEP.ID + "/secret/revoke-previous", ``, 404, ""},
		{"POST", app + "/endpoints/" + ep.ID + "/replay", `{}`, 422, "since"},
		{"POST", app + "/endpoints/" + ep.ID + "/replay", `{"since":"yesterday"}`, 422, "since"},
		{"POST", app + "/endpoints/" + ep.ID + "/replay", `{"since":"2026-11-30T10:00:00Z","until":"2026-11-29T10:00:00Z"}`, 422, "until"},
		{"POST", app + "/events", `{"data":{}}`, 422, "type"},
		{"POST", app + "/events", `{"type":"Payment!","data":{}}`, 422, "type"},
		{"POST", app + "/events", `{"type":"payment.succeeded"}`, 422, "data"},
		{"POST", app + "/events", `{"type":"payment.succeeded","data":[]}`, 422, "data"},
		{"POST", app + "/events", `{"type":"payment.succeeded","data":{},"created":"noon"}`, 422, "created"},
		{"POST", app + "/events", `{"type":"payment.succeeded","data":{},"created":"2099-01-01T00:00:00Z"}`, 422, "created"},
		{"POST", app + "/events", `{"type":"payment.succeeded","data":{},"id":"has spaces"}`, 422, "id"},
		{"POST", app + "/events", big, 413, ""},
		{"POST", "/v1/apps/" + other + "/events", `{"type":"payment.succeeded","data":{},"id":"x"}` + " trailing", 400, ""},
		{"POST", "/v1/apps/app_missing/events", `{"type":"payment.succeeded","data":{}}`, 404, ""},
		{"POST", "/v1/apps/" + other + "/deliveries/dlv_missing/replay", ``, 404, ""},
	} {
		name := fmt.Sprintf("%s %s %.60s", tc.method, tc.path, tc.body)
		before := h.snapshot()
		var p api.Problem
		code := h.do(tc.method, tc.path, tc.body, &p)
		require.Equal(t, tc.status, code, name)
		require.Equal(t, tc.status, p.Status, name)
		require.NotEmpty(t, p.Title, name)
		if tc.field != "" {
			require.Equal(t, []string{tc.field}, p.Fields, name)
			require.NotEmpty(t, p.Detail, name)
		}
		if tc.status == 413 {
			require.Contains(t, p.Detail, "262144", "413 names the limit")
		}
		require.Equal(t, before, h.snapshot(), "%s left the database changed", name)
	}
}

// TestProblemContentType: errors are application/problem+json.
func TestProblemContentType(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	req, _ := http.NewRequest("POST", h.url+"/v1/apps", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+h.adminKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
}
