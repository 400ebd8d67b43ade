package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/store"
)

// TestDeletedPausedEndpointsRowsAreClaimed: deleting a paused endpoint
// cancels its pending deliveries and lets its held rows be claimed (and
// refused), so they and the cancel rows behind them leave the outbox
// (review finding, older than held rows: they stayed for good, growing
// the app's backlog and the oldest-row gauge).
func TestDeletedPausedEndpointsRowsAreClaimed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publish(t)
	yes := true
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Paused: &yes})
	require.NoError(t, err)
	require.NoError(t, f.st.DeleteEndpoint(ctx, f.app.ID, f.ep.ID))
	_, err = store.ReleaseHeld(ctx, f.st.Pool())
	require.NoError(t, err)

	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	rows, err := store.ClaimOutbox(ctx, tx, 100)
	require.NoError(t, err)
	t.Logf("outbox rows: %v; claimable: %d", f.outboxKinds(t), len(rows))
	require.NotEmpty(t, rows, "a deleted endpoint's rows can never be claimed, so never leave the outbox")
}

// TestDisabledPausedEndpointsRowsAreClaimed is the same for a disable.
func TestDisabledPausedEndpointsRowsAreClaimed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publish(t)
	yes := true
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Paused: &yes})
	require.NoError(t, err)
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &yes})
	require.NoError(t, err)
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	rows, err := store.ClaimOutbox(ctx, tx, 100)
	require.NoError(t, err)
	require.NotEmpty(t, rows, "a disabled endpoint's rows are claimed, even while it is paused")
}
