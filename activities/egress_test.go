package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/internal/egress"
	"hookrelay/internal/egress/egresstest"
)

// TestSendThroughProxy: with a proxy, the attempt goes through its
// tunnel; a proxy that refuses connections makes a proxy_error attempt,
// recorded with its next attempt planned as a retryable one's; an
// endpoint whose override is "direct" skips the proxy.
func TestSendThroughProxy(t *testing.T) {
	t.Parallel()
	px, err := egresstest.Start(egresstest.Options{})
	require.NoError(t, err)
	t.Cleanup(px.Close)
	via, err := activities.ParseProxy(px.URL(), "", "")
	require.NoError(t, err)
	set := delivery.Settings{}.WithDefaults()
	req := activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1, Timeout: time.Second, Settings: set, Deadline: time.Now().Add(time.Hour)}

	st := &flakyStore{target: target(t, 200)}
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClientVia(false, nil, via), Egress: &activities.Egress{}, UserAgent: "test"}
	res, err := a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class)
	require.Len(t, px.Connects(), 1, "through the proxy")

	st.target.EgressProxy = egress.Direct
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class)
	require.Len(t, px.Connects(), 1, "the endpoint's override sends directly")

	px.Close()
	st = &flakyStore{target: target(t, 200)}
	a.Store = st
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassProxy, res.Class, res.Error)
	require.Contains(t, res.Error, "egress proxy "+px.URL())
	require.Len(t, st.records, 1, "recorded as an attempt, so the operator sees it")
	require.Equal(t, string(delivery.ClassProxy), st.records[0].Class)
	require.Nil(t, st.records[0].StatusCode)
	require.NotNil(t, st.records[0].NextAttemptAt, "retried on the schedule")

	st.target.EgressProxy = "ftp://nope"
	res, err = a.SendSigned(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassProxy, res.Class, "a stored override that cannot be used is the operator's fault too")
}
