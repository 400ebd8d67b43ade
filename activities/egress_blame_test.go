package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/internal/egress/egresstest"
)

// TestEndpointCannotPassItsFailuresOffAsTheProxys: a receiver answering
// 407 itself is a permanent failure; a receiver that is down, which the
// proxy says in Proxy-Status (RFC 9209, error=connection_refused), is the
// endpoint's retryable failure, not proxy_error (which never counts toward
// auto-disable or the breaker), from the first request on; a proxy's bare
// 502, 503 or 504 (no Proxy-Status naming the target), even right after it
// opened a tunnel, is its own failure: proxy_error.
func TestEndpointCannotPassItsFailuresOffAsTheProxys(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	set := delivery.Settings{}.WithDefaults()
	req := activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1, Timeout: 2 * time.Second, Settings: set, Deadline: time.Now().Add(time.Hour)}
	newActivities := func(opts egresstest.Options) *activities.Activities {
		px, err := egresstest.Start(opts)
		require.NoError(t, err)
		t.Cleanup(px.Close)
		via, err := activities.ParseProxy(px.URL(), "", "")
		require.NoError(t, err)
		return &activities.Activities{HTTP: activities.NewHTTPClientVia(false, nil, via), Egress: &activities.Egress{}, UserAgent: "test"}
	}
	toDead := func() *flakyStore {
		st := &flakyStore{target: target(t, 200)}
		st.target.URL = dead.URL
		return st
	}

	// The proxy names the target's failure: the endpoint's, at once.
	a := newActivities(egresstest.Options{})
	st := toDead()
	a.Store = st
	res, err := a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassRetryable, res.Class, "a receiver that is down: %s", res.Error)
	require.Contains(t, res.Error, "could not reach the target (CONNECT answered 502 Bad Gateway, Proxy-Status error=connection_refused)")
	require.Equal(t, string(delivery.ClassRetryable), st.records[0].Class)

	a.Store = &flakyStore{target: target(t, http.StatusProxyAuthRequired)}
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassPermanent, res.Class, "a receiver's own 407: %s", res.Error)

	// A bare 502 names no culprit: the proxy's, even right after it
	// opened a tunnel.
	a = newActivities(egresstest.Options{Bare: true})
	a.Store = &flakyStore{target: target(t, 200)}
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class, "a tunnel opened")
	a.Store = toDead()
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassProxy, res.Class, res.Error)
	for _, code := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		a = newActivities(egresstest.Options{Answer: code})
		a.Store = toDead()
		res, err = a.SendSigned(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, activities.ClassProxy, res.Class, "%d: %s", code, res.Error)
	}
}
