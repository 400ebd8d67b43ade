package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/store"
)

// fast is a short per-endpoint schedule: attempts 1.1 s apart so each has
// its own webhook-timestamp second.
func fast(url string) map[string]any {
	return map[string]any{"url": url, "retry_schedule": []string{"0s", "1100ms", "1100ms", "1100ms"}, "request_timeout": "1s", "deadline": "30s"}
}

func TestEngineScenarios(t *testing.T) {
	h := newHarness(t)
	appID := h.createApp()
	type scenario struct {
		name     string
		respond  func(n int, w http.ResponseWriter, r *http.Request)
		status   delivery.Status
		attempts int
		check    func(t *testing.T, atts []store.Attempt, d store.Delivery, rc *probe)
	}
	thenOK := func(first func(w http.ResponseWriter, r *http.Request)) func(int, http.ResponseWriter, *http.Request) {
		return func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				first(w, r)
				return
			}
			w.WriteHeader(http.StatusOK)
		}
	}
	scenarios := []scenario{
		{
			name: "502 then 200",
			respond: thenOK(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "bad gateway: deploying", http.StatusBadGateway)
			}),
			status: delivery.StatusSucceeded, attempts: 2,
			check: func(t *testing.T, atts []store.Attempt, _ store.Delivery, _ *probe) {
				require.Equal(t, 502, *atts[1].StatusCode)
				require.Equal(t, "retryable", atts[1].Class)
				require.Contains(t, atts[1].ResponseExcerpt, "deploying")
			},
		},
		{
			name: "sleeps past the request timeout then 200",
			respond: thenOK(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(1500 * time.Millisecond):
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusOK)
			}),
			status: delivery.StatusSucceeded, attempts: 2,
			check: func(t *testing.T, atts []store.Attempt, _ store.Delivery, _ *probe) {
				require.Nil(t, atts[1].StatusCode)
				require.Contains(t, atts[1].Error, "timeout")
				require.GreaterOrEqual(t, atts[1].DurationMS, int64(1000))
			},
		},
		{
			name:    "404 dead-letters after one attempt",
			respond: func(_ int, w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) },
			status:  delivery.StatusDeadLettered, attempts: 1,
			check: func(t *testing.T, atts []store.Attempt, d store.Delivery, _ *probe) {
				require.Equal(t, "permanent", atts[0].Class)
				require.Contains(t, *d.DeadLetterReason, "check the endpoint's configuration")
			},
		},
		{
			name: "429 with Retry-After: 1 then 200",
			respond: thenOK(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			}),
			status: delivery.StatusSucceeded, attempts: 2,
			check: func(t *testing.T, atts []store.Attempt, _ store.Delivery, rc *probe) {
				require.Equal(t, "throttled", atts[1].Class)
				got := rc.receipts()
				require.GreaterOrEqual(t, got[1].At.Sub(got[0].At), 900*time.Millisecond)
			},
		},
		{
			name: "connection reset then 200",
			respond: thenOK(func(w http.ResponseWriter, _ *http.Request) {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
			}),
			status: delivery.StatusSucceeded, attempts: 2,
			check: func(t *testing.T, atts []store.Attempt, _ store.Delivery, _ *probe) {
				require.Equal(t, "retryable", atts[1].Class)
				require.Nil(t, atts[1].StatusCode)
			},
		},
		{
			name: "redirect is not followed",
			respond: func(_ int, w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			},
			status: delivery.StatusDeadLettered, attempts: 1,
			check: func(t *testing.T, atts []store.Attempt, _ store.Delivery, rc *probe) {
				require.Contains(t, atts[0].Error, "redirect not followed")
				require.Len(t, rc.receipts(), 1)
			},
		},
		{
			name:    "410 dead-letters and disables the endpoint",
			respond: func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) },
			status:  delivery.StatusDeadLettered, attempts: 1,
		},
		{
			name:    "always 503 exhausts the schedule",
			respond: func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
			status:  delivery.StatusDeadLettered, attempts: 4,
			check: func(t *testing.T, _ []store.Attempt, d store.Delivery, _ *probe) {
				require.Contains(t, *d.DeadLetterReason, "all 4 attempts failed")
			},
		},
	}
	type running struct {
		scenario
		rc    *probe
		ep    endpointResp
		dlvID string
	}
	var runs []running
	// All scenarios run at once; each has its own receiver and endpoint.
	for i, sc := range scenarios {
		rc := newReceiver(t, sc.respond)
		typ := fmt.Sprintf("scenario.s%d", i)
		body := fast(rc.URL())
		body["event_types"] = []string{typ}
		ep := h.createEndpoint(appID, body)
		rc.setSecrets(ep.Secret)
		ev := h.send(appID, typ, map[string]any{"scenario": sc.name})
		require.Len(t, ev.Deliveries, 1)
		runs = append(runs, running{sc, rc, ep, ev.Deliveries[0].ID})
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			d := h.waitDelivery(appID, r.dlvID, 30*time.Second, delivery.StatusSucceeded, delivery.StatusDeadLettered)
			require.Equal(t, r.status, d.Status)
			require.Equal(t, r.attempts, d.AttemptCount)
			atts := h.attempts(appID, r.dlvID)
			require.Len(t, atts, r.attempts)
			got := r.rc.receipts()
			require.Len(t, got, r.attempts, "every attempt reached the receiver")
			seen := map[int64]bool{}
			for i, rec := range got {
				require.True(t, rec.StdValid, "attempt %d: webhook-signature", i+1)
				require.True(t, rec.XValid, "attempt %d: X-Webhook-Signature", i+1)
				require.Equal(t, got[0].ID, rec.ID, "same webhook-id on every attempt")
				require.False(t, seen[rec.Timestamp], "attempt %d: fresh webhook-timestamp", i+1)
				seen[rec.Timestamp] = true
				require.Equal(t, "application/json", rec.Header.Get("Content-Type"))
				require.True(t, strings.HasPrefix(rec.Header.Get("User-Agent"), "hookrelay/"))
				require.Equal(t, got[0].Body, rec.Body, "frozen payload")
			}
			for _, a := range atts {
				require.NotEmpty(t, a.KeyIDs)
				require.False(t, a.StartedAt.IsZero())
			}
			if r.check != nil {
				r.check(t, atts, d, r.rc)
			}
		})
	}
	var ep struct {
		Disabled       bool    `json:"disabled"`
		DisabledReason *string `json:"disabled_reason"`
	}
	for _, r := range runs {
		if strings.HasPrefix(r.name, "410") {
			h.do("GET", "/v1/apps/"+appID+"/endpoints/"+r.ep.ID, nil, &ep)
			require.True(t, ep.Disabled)
			require.Contains(t, *ep.DisabledReason, "410")
		}
	}
}

// TestCancelOnEndpointDeleteAndDisable: deleting or disabling an endpoint
// ends its waiting deliveries as canceled, and nothing more is sent.
func TestCancelOnEndpointDeleteAndDisable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	appID := h.createApp()
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	for _, how := range []string{"delete", "disable"} {
		typ := "cancel." + how
		ep := h.createEndpoint(appID, map[string]any{"url": rc.URL(), "event_types": []string{typ}, "retry_schedule": []string{"0s", "1h"}})
		rc.setSecrets(ep.Secret)
		ev := h.send(appID, typ, map[string]any{})
		dlv := ev.Deliveries[0].ID
		// The first attempt fails; the next one is an hour away.
		require.Eventually(t, func() bool { return len(h.attempts(appID, dlv)) == 1 }, 10*time.Second, 20*time.Millisecond)
		var d store.Delivery
		h.do("GET", "/v1/apps/"+appID+"/deliveries/"+dlv, nil, &d)
		require.NotNil(t, d.NextAttemptAt, "the workflow answers when the next attempt is")
		require.WithinDuration(t, time.Now().Add(time.Hour), *d.NextAttemptAt, 10*time.Minute)
		if how == "delete" {
			require.Equal(t, http.StatusNoContent, h.do("DELETE", "/v1/apps/"+appID+"/endpoints/"+ep.ID, nil, nil))
		} else {
			require.Equal(t, http.StatusOK, h.do("PATCH", "/v1/apps/"+appID+"/endpoints/"+ep.ID, map[string]any{"disabled": true}, nil))
		}
		d = h.waitDelivery(appID, dlv, 20*time.Second, delivery.StatusCanceled)
		require.Nil(t, d.NextAttemptAt)
		require.Len(t, h.attempts(appID, dlv), 1, "nothing more was sent")
	}
}
