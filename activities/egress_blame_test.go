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

// TestEndpointCannotPassItsFailuresOffAsTheProxys: through a working
// proxy, a receiver answering 407 itself is a permanent failure, and a
// receiver that is down (the proxy answers CONNECT 502) is the endpoint's
// retryable failure, not proxy_error (which never counts toward
// auto-disable); a proxy that has opened no tunnel answering the same is
// still proxy_error.
func TestEndpointCannotPassItsFailuresOffAsTheProxys(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	set := delivery.Settings{}.WithDefaults()
	req := activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1, Timeout: 2 * time.Second, Settings: set, Deadline: time.Now().Add(time.Hour)}
	newActivities := func() *activities.Activities {
		px, err := egresstest.Start(egresstest.Options{})
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

	// A proxy that never opened a tunnel: its 502 may be its own failure.
	a := newActivities()
	a.Store = toDead()
	res, err := a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassProxy, res.Class, res.Error)

	a.Store = &flakyStore{target: target(t, http.StatusProxyAuthRequired)}
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassPermanent, res.Class, "a receiver's own 407: %s", res.Error)

	// The proxy opened a tunnel just now: it works.
	st := toDead()
	a.Store = st
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassRetryable, res.Class, "a receiver that is down: %s", res.Error)
	require.Contains(t, res.Error, "could not reach the target (CONNECT answered 502 Bad Gateway)")
	require.Equal(t, string(delivery.ClassRetryable), st.records[0].Class)
}
