package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/metrics"
	"hookrelay/outbox"
)

// filterErrors is the value of series name in reg (of endpointID when
// it has that label), and whether any series carries an endpoint_id label.
func filterErrors(t *testing.T, reg *prometheus.Registry, name, endpointID string) (n int, labeled bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labeled = labeled || l.GetName() == "endpoint_id"
			}
			if mf.GetName() == name && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() == endpointID) {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	return n, labeled
}

// A filter is checked when it is saved: a syntax error, a type error, a
// non-boolean expression or one past 4 KiB is a 422 naming "filter" with
// CEL's message (line and column), on create and on PATCH, and nothing is
// written; a valid one is shown in every read and "" removes it.
func TestFilterIsCheckedWhenSaved(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "filters")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	path := "/v1/apps/" + app.ID + "/endpoints"
	for _, tc := range []struct{ filter, says string }{
		{"data.amount >= ", "<input>:1:16"},
		{"type > 5", "no matching overload"},
		{"data.amount", "must be a boolean expression"},
		{"type.matches(data.re)", "literal pattern"},
		{strings.Repeat(" ", 4097) + "true", "at most 4096"},
	} {
		rec := send(t, h, admin, "POST", path, map[string]any{"url": "http://127.0.0.1:9/h", "filter": tc.filter})
		require.Equal(t, http.StatusUnprocessableEntity, rec.Code, "%.30q: %s", tc.filter, rec.Body.String())
		p := problemOf(t, rec)
		require.Equal(t, []string{"filter"}, p.Fields)
		require.Contains(t, p.Detail, tc.says)
	}
	rec := send(t, h, admin, "POST", path, map[string]any{"url": "http://127.0.0.1:9/h", "filter": "data.amount >= 5000 && data.currency == 'usd'"})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var ep api.EndpointView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
	require.Equal(t, "data.amount >= 5000 && data.currency == 'usd'", ep.Filter)

	rec = send(t, h, admin, "PATCH", path+"/"+ep.ID, map[string]any{"filter": "type =="})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	rec = send(t, h, admin, "GET", path+"/"+ep.ID, nil)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
	require.Equal(t, "data.amount >= 5000 && data.currency == 'usd'", ep.Filter, "a refused PATCH changes nothing")
	rec = send(t, h, admin, "PATCH", path+"/"+ep.ID, map[string]any{"description": "still filtered"})
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
	require.NotEmpty(t, ep.Filter, "a PATCH without filter keeps it")
	rec = send(t, h, admin, "PATCH", path+"/"+ep.ID, map[string]any{"filter": ""})
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))
	require.Empty(t, ep.Filter)
}

// The filter test's verdicts are what fan-out did: for every event
// published through the API while the endpoint had its filter, "matched"
// exactly when the event got a delivery to it, "not_subscribed" for a
// type it does not take, and "error" exactly when the event records the
// filter's error. An evaluation error never fails the ingest.
func TestFilterTestEqualsFanOut(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "filtertest")
	reg := prometheus.NewRegistry()
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true, Metrics: metrics.NewSender(reg, false)}).Handler()
	base := "/v1/apps/" + app.ID
	const expr = "data.amount >= 5000 && data.currency in ['usd', 'eur']"
	rec := send(t, h, admin, "POST", base+"/endpoints", map[string]any{"url": "http://127.0.0.1:9/h", "filter": expr,
		"event_types": []string{"invoice.paid", "invoice.voided"}})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var ep api.EndpointView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ep))

	datas := []string{`{"amount": 9000, "currency": "usd"}`, `{"amount": 10, "currency": "usd"}`, `{"amount": 9000, "currency": "gbp"}`,
		`{"currency": "usd"}`, `{"amount": "lots", "currency": "eur"}`, `{"amount": 5000, "currency": "eur"}`}
	delivered := map[string]bool{}
	errored := map[string]bool{}
	for i, typ := range []string{"invoice.paid", "invoice.voided", "order.created"} {
		for j, data := range datas {
			rec := send(t, h, admin, "POST", base+"/events", map[string]any{"type": typ, "data": json.RawMessage(data)})
			require.Equal(t, http.StatusAccepted, rec.Code, "event %d/%d: %s", i, j, rec.Body.String())
			var pub outbox.Published
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &pub))
			delivered[pub.ID] = len(pub.Deliveries) == 1
			for _, f := range pub.FilteredOut {
				require.Equal(t, ep.ID, f.EndpointID)
				errored[pub.ID] = f.Error != ""
			}
		}
	}
	// Each evaluation error is counted by endpoint.
	failures := 0
	for _, e := range errored {
		if e {
			failures++
		}
	}
	require.Equal(t, 4, failures, "2 subscribed types × 2 failing payloads")
	n, labeled := filterErrors(t, reg, "hookrelay_filter_errors_total", ep.ID)
	require.Equal(t, failures, n)
	require.False(t, labeled, "no endpoint ID in a label unless opted in (--metrics-endpoint-labels)")

	rec = send(t, h, admin, "POST", base+"/endpoints/"+ep.ID+"/filter-test", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var ft api.FilterTest
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ft))
	require.Equal(t, expr, ft.Filter)
	require.Equal(t, 18, ft.Evaluated)
	require.Equal(t, ft.Evaluated, ft.Matched+ft.NotMatched+ft.Errored+ft.NotSubscribed)
	require.Equal(t, 6, ft.NotSubscribed)
	require.Equal(t, 4, ft.Matched)
	for _, e := range ft.Events {
		require.Equal(t, delivered[e.ID], e.Verdict == api.VerdictMatched, "%s %s: %s", e.ID, e.Type, e.Verdict)
		require.Equal(t, errored[e.ID], e.Verdict == api.VerdictError, "%s: %s %s", e.ID, e.Verdict, e.Error)
	}

	// The app's route tests a filter before an endpoint has it, with the
	// subscription given, on the last N events only.
	rec = send(t, h, admin, "POST", base+"/filter-test", map[string]any{"filter": "type == 'order.created'", "last": 5})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ft))
	require.Equal(t, 5, ft.Evaluated)
	require.Equal(t, 5, ft.Matched, "the latest events are order.created")
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"filter": "type ==", "last": 5}, "filter"},
		{map[string]any{"filter": "true", "last": 0}, "last"},
		{map[string]any{"filter": "true", "last": 1001}, "last"},
		{map[string]any{"filter": "true", "event_types": []string{"Not A Type"}}, "event_types"},
	} {
		rec = send(t, h, admin, "POST", base+"/filter-test", tc.body)
		require.Equal(t, http.StatusUnprocessableEntity, rec.Code, "%v: %s", tc.body, rec.Body.String())
		require.Equal(t, []string{tc.field}, problemOf(t, rec).Fields)
	}
	rec = send(t, h, admin, "POST", "/v1/apps/app_nope/filter-test", map[string]any{"filter": "true"})
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// A filter test changes nothing, so it leaves no audit entry.
func TestFilterTestIsNotAudited(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "filteraudit")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	rec := send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/filter-test", map[string]any{"filter": "true"})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	rec = send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/endpoints", map[string]any{"url": "http://127.0.0.1:9/h"})
	require.Equal(t, http.StatusCreated, rec.Code)
	var n int
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE path LIKE '%filter-test'`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log`).Scan(&n))
	require.Equal(t, 1, n, "the endpoint's creation is audited")
}
