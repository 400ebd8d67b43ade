package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/store"
)

// TestClaimTargetClaimsWhatNeedsNoWait: ClaimTarget loads what LoadTarget
// loads and claims the attempt only when nothing must come between: an
// enabled, unpaused endpoint with no rate limit, no max_in_flight and a
// valid key, and a delivery that may be sent and is not on the wire.
// Otherwise the delivery is left as it was.
func TestClaimTargetClaimsWhatNeedsNoWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	one := func(n int) *int { return &n }
	yes := true
	for name, c := range map[string]struct {
		change  func(t *testing.T, f fixture, dlv string)
		claimed bool
		status  delivery.Status
	}{
		"no limits": {change: func(*testing.T, fixture, string) {}, claimed: true, status: delivery.StatusDelivering},
		"rate limit": {change: func(t *testing.T, f fixture, _ string) {
			_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{RateLimit: one(10)})
			require.NoError(t, err)
		}, status: delivery.StatusPending},
		"max in flight": {change: func(t *testing.T, f fixture, _ string) {
			_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{MaxInFlight: one(2)})
			require.NoError(t, err)
		}, status: delivery.StatusPending},
		"paused": {change: func(t *testing.T, f fixture, _ string) {
			_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Paused: &yes})
			require.NoError(t, err)
		}, status: delivery.StatusPending},
		"disabled": {change: func(t *testing.T, f fixture, _ string) {
			_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &yes})
			require.NoError(t, err)
		}, status: delivery.StatusCanceled},
		"no valid key": {change: func(t *testing.T, f fixture, _ string) {
			_, err := f.st.Pool().Exec(ctx, `UPDATE endpoint_secrets SET status = 'revoked' WHERE endpoint_id = $1`, f.ep.ID)
			require.NoError(t, err)
		}, status: delivery.StatusPending},
		"on the wire": {change: func(t *testing.T, f fixture, dlv string) {
			claim, err := f.st.ClaimAttempt(ctx, dlv, time.Now().Add(time.Minute))
			require.NoError(t, err)
			require.Equal(t, store.Claimed, claim)
		}, status: delivery.StatusDelivering},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			dlv := f.publish(t)
			c.change(t, f, dlv)
			want, err := f.st.LoadTarget(ctx, dlv, time.Now())
			require.NoError(t, err)
			got, claimed, err := f.st.ClaimTarget(ctx, dlv, time.Now(), time.Now().Add(time.Minute))
			require.NoError(t, err)
			require.Equal(t, want, got, "the target LoadTarget loads")
			require.Equal(t, c.claimed, claimed)
			d, err := f.st.GetDelivery(ctx, f.app.ID, dlv)
			require.NoError(t, err)
			require.Equal(t, c.status, d.Status)
		})
	}
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		_, _, err := f.st.ClaimTarget(ctx, "dlv_missing", time.Now(), time.Now().Add(time.Minute))
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

// TestBatchedClaimsOnceForCallsAtOnce: calls that name one delivery in one
// coalesced statement claim it once between them, through ClaimTarget and
// through ClaimAttempt; calls of other deliveries in it are claimed too.
func TestBatchedClaimsOnceForCallsAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	b := store.NewBatched(f.st)
	t.Cleanup(b.Close)
	for _, targets := range []bool{true, false} {
		dlv, other := f.publish(t), f.publish(t)
		until := time.Now().Add(time.Minute)
		claimed, _, err := b.ClaimAsOneBatch(ctx, []string{dlv, other, dlv, dlv}, []time.Time{until, until, until, until}, targets)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false, false}, claimed, "ClaimTarget: %v", targets)
	}
}
