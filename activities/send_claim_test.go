package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
)

// TestClaimWithTargetGivesBackItsPlace: an attempt that takes its
// endpoint's place to claim with its target gives the place back whatever
// the claim answers (an error, or not claimed: paused), so the next
// attempt finds it free and claims with its target (no claim on its own).
func TestClaimWithTargetGivesBackItsPlace(t *testing.T) {
	t.Parallel()
	st := &flakyStore{target: target(t, 200)}
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test",
		Shares: &activities.Shares{PerEndpoint: 1, Total: 1}}
	req := activities.SendRequest{DeliveryID: "dlv_1", EndpointID: st.target.EndpointID, Cycle: 1, Number: 1, Timeout: time.Second}
	ctx := context.Background()

	st.loadErr = errors.New("boom")
	_, err := a.SendSigned(ctx, req)
	require.Error(t, err)
	st.loadErr = nil

	st.target.Paused = true
	res, err := a.SendSigned(ctx, req)
	require.NoError(t, err)
	require.Equal(t, activities.ClassEndpointPaused, res.Class)
	st.target.Paused = false

	for range 3 {
		res, err = a.SendSigned(ctx, req)
		require.NoError(t, err)
		require.Equal(t, activities.ClassSuccess, res.Class, res.Error)
	}
	require.Zero(t, st.claimsAlone.Load(), "each found the place free and claimed with its target")
	require.Zero(t, st.released.Load())
	require.Len(t, st.records, 3)
}
