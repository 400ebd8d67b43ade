package integration

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/store"
)

// opsEvents returns the operational events the operator received, by type,
// each with its data; every one verified with the operator endpoint's
// secret.
func opsEvents(t *testing.T, rc *probe) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, r := range rc.receipts() {
		require.True(t, r.StdValid && r.XValid, "signed with the operator endpoint's secret")
		var env struct {
			Type string
			Data map[string]any
		}
		require.NoError(t, json.Unmarshal(r.Body, &env))
		out[env.Type] = append(out[env.Type], env.Data)
	}
	return out
}

// TestOperationalWebhooks: the operator's endpoint on app_operations hears
// of a 410 disable, of dead letters, of an endpoint that keeps failing and
// of its recovery, delivered by hookrelay's own outbox and workflows.
func TestOperationalWebhooks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ops := newReceiver(t, nil)
	opsEp := h.createEndpoint(store.OperationsApp, map[string]any{"url": ops.URL()})
	ops.setSecrets(opsEp.Secret)
	require.Equal(t, http.StatusConflict, h.do("DELETE", "/v1/apps/"+store.OperationsApp, nil, nil))

	appID := h.createApp()
	goneRC := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	goneEp := h.createEndpoint(appID, map[string]any{"url": goneRC.URL(), "event_types": []string{"a.gone"}})
	h.send(appID, "a.gone", map[string]any{})
	require.Eventually(t, func() bool { return len(opsEvents(t, ops)["endpoint.disabled"]) == 1 }, 20*time.Second, 50*time.Millisecond)
	disabled := opsEvents(t, ops)["endpoint.disabled"][0]
	require.Equal(t, goneEp.ID, disabled["endpoint_id"])
	require.Equal(t, "gone_410", disabled["reason"])

	var healthy atomic.Bool
	flaky := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusNotFound)
		}
	})
	failingEp := h.createEndpoint(appID, map[string]any{"url": flaky.URL(), "event_types": []string{"a.flaky"}, "retry_schedule": []string{"0s"}})
	for range store.FailingAfterDefault {
		h.send(appID, "a.flaky", map[string]any{})
	}
	require.Eventually(t, func() bool { return len(opsEvents(t, ops)["endpoint.failing"]) == 1 }, 30*time.Second, 50*time.Millisecond)
	failing := opsEvents(t, ops)["endpoint.failing"][0]
	require.Equal(t, failingEp.ID, failing["endpoint_id"])
	require.EqualValues(t, store.FailingAfterDefault, failing["consecutive_failures"])
	require.Eventually(t, func() bool {
		return len(opsEvents(t, ops)["delivery.dead_lettered"]) == store.FailingAfterDefault+1 // and the 410's
	}, 20*time.Second, 50*time.Millisecond)

	healthy.Store(true)
	h.send(appID, "a.flaky", map[string]any{})
	require.Eventually(t, func() bool { return len(opsEvents(t, ops)["endpoint.recovered"]) == 1 }, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, failingEp.ID, opsEvents(t, ops)["endpoint.recovered"][0]["endpoint_id"])
	require.Len(t, opsEvents(t, ops)["endpoint.failing"], 1, "warned once")
}
