package integration

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/config"
	"hookrelay/delivery"
	"hookrelay/store"
	"hookrelay/webhook"
)

func TestAPIEndToEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "event_types": []string{"payment.succeeded", "invoice.paid"}, "description": "billing"})
	require.True(t, strings.HasPrefix(ep.Secret, "whsec_"))
	rc.setSecrets(ep.Secret)

	// The secret is never readable again.
	var got map[string]any
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/endpoints/"+ep.ID, nil, &got))
	require.NotContains(t, got, "secret")

	matching := []eventResp{
		h.send(appID, "payment.succeeded", map[string]any{"amount": 9900}),
		h.send(appID, "invoice.paid", map[string]any{"invoice": "in_1"}),
	}
	other := h.send(appID, "customer.created", map[string]any{"id": "cus_1"})
	require.Empty(t, other.Deliveries, "a non-matching type creates no delivery")
	for _, ev := range matching {
		require.Len(t, ev.Deliveries, 1)
		d := h.waitDelivery(appID, ev.Deliveries[0].ID, 20*time.Second, delivery.StatusSucceeded)
		require.Equal(t, ev.ID, d.EventID)
		require.Equal(t, 1, d.AttemptCount)
		require.NotNil(t, d.LastAttempt)
		require.Equal(t, 200, *d.LastAttempt.StatusCode)
		atts := h.attempts(appID, d.ID)
		require.Len(t, atts, 1)
		require.Equal(t, "success", atts[0].Class)
	}
	require.Equal(t, map[string]int{matching[0].ID: 1, matching[1].ID: 1}, rc.byID())

	// Reads: the event with its deliveries, lists, stats.
	var evGot eventResp
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/events/"+matching[0].ID, nil, &evGot))
	require.Equal(t, delivery.StatusSucceeded, evGot.Deliveries[0].Status)
	var list struct {
		Data       []store.Delivery `json:"data"`
		NextCursor *string          `json:"next_cursor"`
	}
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries?status=succeeded&limit=1", nil, &list))
	require.Len(t, list.Data, 1)
	require.NotNil(t, list.NextCursor)
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/deliveries?status=succeeded&limit=1&cursor="+*list.NextCursor, nil, &list))
	require.Len(t, list.Data, 1)
	var st store.Stats
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/stats?last=1000", nil, &st))
	// The event no endpoint subscribes to is not in the denominator.
	require.Equal(t, 2, st.Events)
	require.Equal(t, 2, st.Deliveries)
	require.Equal(t, 2, st.FirstAttemptSuccess)
	require.InDelta(t, 1.0, st.EffectiveDeliveryRate, 1e-9)

	// The catalog: types used in ingest were added on first use; a type can
	// be described, given a schema and deprecated.
	var types struct {
		Data []store.EventType `json:"data"`
	}
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/event-types", nil, &types))
	var names []string
	for _, et := range types.Data {
		names = append(names, et.Name)
	}
	require.Contains(t, names, "customer.created")
	var et store.EventType
	require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/event-types/invoice.paid", map[string]any{
		"description": "An invoice was paid", "schema": map[string]any{"type": "object"}, "deprecated": true}, &et))
	require.True(t, et.Deprecated)
	require.JSONEq(t, `{"type":"object"}`, string(et.Schema))
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/event-types/invoice.paid", nil, &et))
	require.Equal(t, "An invoice was paid", et.Description)
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/event-types", map[string]any{"name": "refund.issued", "description": "x"}, nil))

	// Another app's objects are 404.
	other2 := h.createApp()
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/apps/"+other2+"/deliveries/"+matching[0].Deliveries[0].ID, nil, nil))
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/apps/"+other2+"/endpoints/"+ep.ID, nil, nil))

	// Idempotent ingest through the API: 200 with the original, 409 on a
	// different body.
	var first, again eventResp
	body := map[string]any{"id": "evt_order_42", "type": "payment.succeeded", "data": map[string]any{"amount": 1}}
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/events", body, &first))
	require.Equal(t, http.StatusOK, h.do("POST", "/v1/apps/"+appID+"/events", body, &again))
	require.Equal(t, first.Deliveries, again.Deliveries)
	body["data"] = map[string]any{"amount": 2}
	require.Equal(t, http.StatusConflict, h.do("POST", "/v1/apps/"+appID+"/events", body, nil))

	// No secret and no full signature in any log line.
	logs := h.logs.String()
	require.NotContains(t, logs, ep.Secret)
	require.NotContains(t, logs, strings.TrimPrefix(ep.Secret, "whsec_"))
	for _, r := range rc.receipts() {
		for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
			require.NotContains(t, logs, strings.TrimPrefix(sig, "v1,"))
		}
		require.NotContains(t, logs, r.Header.Get("X-Webhook-Signature"))
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, hdr := range []string{"", "Bearer ", "Bearer wrong", "Basic " + base64.StdEncoding.EncodeToString([]byte(h.adminKey))} {
		req, _ := http.NewRequest("GET", h.url+"/v1/apps", nil)
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, hdr)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	}
	code, ready := readyz(t, h.url)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, map[string]string{"status": "ok", "postgres": "ok", "temporal": "ok"}, ready)
}

// TestTemporalOutage: while Temporal is unreachable, first attempts still
// go out straight from the outbox; a first attempt that fails is recorded
// once and waits in the outbox (with its outcome) for its workflow, which
// takes it over when Temporal is back, without sending it again.
// outageRig is an app with two endpoints on one receiver (firstFails):
// payment.succeeded's answers 200, payment.failed's answers 502 to the
// first request of each event and 200 after.
type outageRig struct {
	h     *harness
	appID string
	rc    *probe
}

func newOutageRig(h *harness) outageRig {
	appID := h.createApp()
	rc, _ := firstFails(h.t)
	schedule := []string{"0s", "1s", "1s", "1s", "1s"}
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "event_types": []string{"payment.succeeded"}, "retry_schedule": schedule})
	flakyEp := h.createEndpoint(appID, map[string]any{"url": rc.URL() + "?flaky=1", "event_types": []string{"payment.failed"}, "retry_schedule": schedule})
	rc.setSecrets(ep.Secret, flakyEp.Secret)
	return outageRig{h: h, appID: appID, rc: rc}
}

// publish sends n events, every (n/failing)th to the failing endpoint,
// and returns every delivery and the failing ones.
func (r outageRig) publish(n, failing int) (dlvs, failed []string) {
	for i := range n {
		typ := "payment.succeeded"
		if i%(n/failing) == 0 {
			typ = "payment.failed"
		}
		id := r.h.send(r.appID, typ, map[string]any{"i": i}).Deliveries[0].ID
		dlvs = append(dlvs, id)
		if typ == "payment.failed" {
			failed = append(failed, id)
		}
	}
	return dlvs, failed
}

// receiptsBeyondFirst counts the requests past each event's first.
func (r outageRig) receiptsBeyondFirst() int {
	dups := 0
	for _, c := range r.rc.byID() {
		dups += c - 1
	}
	return dups
}

func TestTemporalOutage(t *testing.T) {
	h := newHarness(t, inMode(config.FirstAttemptsSender))
	r := newOutageRig(h)
	appID, rc := r.appID, r.rc

	h.proxy.Close() // Temporal is unreachable from hookrelay from here on.
	const n, failing = 200, 20
	dlvs, failed := r.publish(n, failing)
	for _, id := range dlvs {
		if !slices.Contains(failed, id) {
			h.waitDelivery(appID, id, 30*time.Second, delivery.StatusSucceeded)
		}
	}
	var waiting, withOutcome int
	require.Eventually(t, func() bool {
		require.NoError(t, h.store.Pool().QueryRow(context.Background(),
			`SELECT count(*), count(outcome) FROM outbox`).Scan(&waiting, &withOutcome))
		return waiting == failing && withOutcome == failing
	}, 30*time.Second, 50*time.Millisecond, "the failed first attempts wait, recorded, for their workflows")
	require.Len(t, rc.byID(), n, "every event was sent once while Temporal was down")

	require.NoError(t, h.proxy.Open())
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 90*time.Second, delivery.StatusSucceeded)
	}
	require.Len(t, rc.byID(), n, "every event delivered")
	dups := r.receiptsBeyondFirst()
	t.Logf("outage: %d events accepted while Temporal was down, %d delivered during it, %d failed first attempts taken over after it, %d receipts beyond the first",
		n, n-failing, failing, dups)
	require.Equal(t, failing, dups, "each failed first attempt was sent once more, by its workflow")
	for _, id := range failed {
		require.Len(t, h.attempts(appID, id), 2, id)
	}
}

// TestTemporalOutageInWorkflowMode: in the default mode every delivery is
// its workflow's, so while Temporal is unreachable ingest goes on (202),
// nothing is sent and every start row waits in the outbox; once Temporal is
// back every event is delivered, each sent once (a failing first attempt
// once more, by its workflow's retry), 0 lost.
func TestTemporalOutageInWorkflowMode(t *testing.T) {
	h := newHarness(t)
	r := newOutageRig(h)
	appID, rc := r.appID, r.rc

	h.proxy.Close() // Temporal is unreachable from hookrelay from here on.
	const n, failing = 100, 10
	dlvs, failed := r.publish(n, failing)
	require.Never(t, func() bool { return len(rc.byID()) > 0 }, 3*time.Second, 50*time.Millisecond,
		"nothing is sent while no workflow can start")
	var waiting int
	require.NoError(t, h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE kind = 'start'`).Scan(&waiting))
	require.Equal(t, n, waiting, "every start row waits in the outbox")

	require.NoError(t, h.proxy.Open())
	for _, id := range dlvs {
		h.waitDelivery(appID, id, 90*time.Second, delivery.StatusSucceeded)
	}
	require.Len(t, rc.byID(), n, "every event delivered")
	require.Equal(t, failing, r.receiptsBeyondFirst(), "each failing first attempt was sent once more, by its workflow")
	for _, id := range failed {
		require.Len(t, h.attempts(appID, id), 2, id)
	}
	for _, id := range dlvs[:5] {
		_, err := h.client.DescribeWorkflowExecution(context.Background(), id, "")
		require.NoError(t, err, "delivery %s has its DeliveryWorkflow", id)
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, nil)
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL()})
	oldSecret := ep.Secret

	var rot struct {
		Secret             string    `json:"secret"`
		PreviousValidUntil time.Time `json:"previous_valid_until"`
	}
	require.Equal(t, http.StatusOK, h.do("POST", "/v1/apps/"+appID+"/endpoints/"+ep.ID+"/secret/rotate", map[string]any{"grace_period": "1h"}, &rot))
	require.NotEqual(t, oldSecret, rot.Secret)
	require.WithinDuration(t, time.Now().Add(time.Hour), rot.PreviousValidUntil, time.Minute)

	// During the grace: both signatures; a receiver holding only the old
	// secret accepts.
	rc.setSecrets(oldSecret)
	ev := h.send(appID, "payment.succeeded", map[string]any{"n": 1})
	h.waitDelivery(appID, ev.Deliveries[0].ID, 20*time.Second, delivery.StatusSucceeded)
	r := rc.receipts()[0]
	require.Len(t, strings.Fields(r.Header.Get("webhook-signature")), 2)
	require.Len(t, strings.Split(r.Header.Get("X-Webhook-Signature"), ","), 3)
	require.True(t, r.StdValid && r.XValid, "old secret verifies during the grace")
	rc.setSecrets(rot.Secret)
	require.True(t, rc.recheck(0), "new secret verifies too")

	// After revoke-previous: only the new one.
	require.Equal(t, http.StatusOK, h.do("POST", "/v1/apps/"+appID+"/endpoints/"+ep.ID+"/secret/revoke-previous", nil, nil))
	rc.setSecrets(oldSecret)
	ev = h.send(appID, "payment.succeeded", map[string]any{"n": 2})
	h.waitDelivery(appID, ev.Deliveries[0].ID, 20*time.Second, delivery.StatusSucceeded)
	r = rc.receipts()[1]
	require.Len(t, strings.Fields(r.Header.Get("webhook-signature")), 1)
	require.False(t, r.StdValid || r.XValid, "the revoked secret never signs again")
	rc.setSecrets(rot.Secret)
	require.True(t, rc.recheck(1))
}

func TestReplay(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	healthy := false
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	})
	ep := h.createEndpoint(appID, map[string]any{"url": rc.URL()})
	rc.setSecrets(ep.Secret)
	since := time.Now().Add(-time.Minute)
	var dead []eventResp
	for i := 0; i < 3; i++ {
		ev := h.send(appID, "payment.succeeded", map[string]any{"i": i})
		h.waitDelivery(appID, ev.Deliveries[0].ID, 20*time.Second, delivery.StatusDeadLettered)
		dead = append(dead, ev)
	}
	healthy = true
	nextSecond(t) // a replay's timestamp is a later second

	// Replay one by ID: a still-running dead-lettered workflow gets the signal.
	var out map[string]int
	dlv0 := dead[0].Deliveries[0].ID
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlv0+"/replay", nil, &out))
	require.Equal(t, 1, out["replayed"])
	d := h.waitDelivery(appID, dlv0, 20*time.Second, delivery.StatusSucceeded)
	require.Equal(t, 2, d.Cycle)
	require.Len(t, d.Replays, 1)
	require.Equal(t, "key_", d.Replays[0].By[:4])

	// Replay the rest by time range.
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/endpoints/"+ep.ID+"/replay",
		map[string]any{"since": since.UTC().Format(time.RFC3339), "until": time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}, &out))
	require.Equal(t, 2, out["replayed"])
	for _, ev := range dead {
		h.waitDelivery(appID, ev.Deliveries[0].ID, 20*time.Second, delivery.StatusSucceeded)
	}
	// Same event ID, fresh timestamp and signature on every replay.
	for _, ev := range dead {
		var recs []receipt
		for _, r := range rc.receipts() {
			if r.ID == ev.ID {
				recs = append(recs, r)
			}
		}
		require.Len(t, recs, 2)
		require.Greater(t, recs[1].Timestamp, recs[0].Timestamp)
		require.NotEqual(t, recs[0].Header.Get("webhook-signature"), recs[1].Header.Get("webhook-signature"))
		require.True(t, recs[1].StdValid && recs[1].XValid)
	}
	// A running delivery cannot be replayed; a succeeded one can (again).
	require.Equal(t, http.StatusAccepted, h.do("POST", "/v1/apps/"+appID+"/deliveries/"+dlv0+"/replay", nil, nil))
	d = h.waitDelivery(appID, dlv0, 20*time.Second, delivery.StatusSucceeded)
	require.Eventually(t, func() bool { return rc.byID()[dead[0].ID] == 3 }, 20*time.Second, 50*time.Millisecond)
}

// TestEd25519Endpoint: an endpoint signed with Ed25519 shows only its public
// key; every attempt carries v1a (and no HMAC header), which a receiver
// holding only the public key verifies; rotation signs with both keys
// during the grace period.
func TestEd25519Endpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r.Clone(context.Background())), append(bodies, b)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	var ep struct {
		ID        string `json:"id"`
		Secret    string `json:"secret"`
		PublicKey string `json:"public_key"`
	}
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/apps/"+appID+"/endpoints",
		map[string]any{"url": srv.URL, "signature_scheme": "ed25519"}, &ep))
	require.Empty(t, ep.Secret, "the signing key is never shown")
	require.True(t, strings.HasPrefix(ep.PublicKey, "whpk_"), ep.PublicKey)
	var read struct {
		PublicKey       string `json:"public_key"`
		SignatureScheme string `json:"signature_scheme"`
	}
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/apps/"+appID+"/endpoints/"+ep.ID, nil, &read))
	require.Equal(t, ep.PublicKey, read.PublicKey)
	require.Equal(t, "ed25519", read.SignatureScheme)
	require.Equal(t, http.StatusUnprocessableEntity, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"signature_scheme": "hmac-sha256"}, nil))

	verifier := func(keys ...string) *webhook.Verifier {
		v := &webhook.Verifier{}
		for _, k := range keys {
			require.NoError(t, v.AddPublicKey(k))
		}
		return v
	}
	dlv := h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
	mu.Lock()
	first, firstBody := got[0], bodies[0]
	mu.Unlock()
	require.Empty(t, first.Header.Get("X-Webhook-Signature"), "no HMAC header for an Ed25519 endpoint")
	require.True(t, strings.HasPrefix(first.Header.Get("webhook-signature"), "v1a,"))
	require.NoError(t, verifier(ep.PublicKey).Verify(first.Header, firstBody), "verified with the public key alone")

	var rot struct {
		PublicKey string `json:"public_key"`
	}
	require.Equal(t, http.StatusOK, h.do("POST", "/v1/apps/"+appID+"/endpoints/"+ep.ID+"/secret/rotate", map[string]any{"grace_period": "1h"}, &rot))
	require.True(t, strings.HasPrefix(rot.PublicKey, "whpk_"))
	require.NotEqual(t, ep.PublicKey, rot.PublicKey)
	dlv = h.send(appID, "order.paid", map[string]any{}).Deliveries[0].ID
	h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusSucceeded)
	mu.Lock()
	second, secondBody := got[len(got)-1], bodies[len(bodies)-1]
	mu.Unlock()
	require.Len(t, strings.Fields(second.Header.Get("webhook-signature")), 2, "both keys sign during the grace period")
	require.NoError(t, verifier(rot.PublicKey).Verify(second.Header, secondBody))
	require.NoError(t, verifier(ep.PublicKey).Verify(second.Header, secondBody))
}

// TestAppRetention: an app's retention override is shown, changed alone by
// PATCH, and cleared with "" back to the server's.
func TestAppRetention(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var a map[string]any
	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/apps", map[string]any{"name": "short", "retention": "168h"}, &a))
	require.Equal(t, "168h0m0s", a["retention"])
	path := "/v1/apps/" + a["id"].(string)
	var got map[string]any
	require.Equal(t, http.StatusOK, h.do("PATCH", path, map[string]any{"retention": "24h"}, &got))
	require.Equal(t, "24h0m0s", got["retention"])
	require.Equal(t, "short", got["name"])
	got = nil
	require.Equal(t, http.StatusOK, h.do("PATCH", path, map[string]any{"retention": ""}, &got))
	require.NotContains(t, got, "retention")
	got = nil
	require.Equal(t, http.StatusOK, h.do("GET", path, nil, &got))
	require.NotContains(t, got, "retention")
}
