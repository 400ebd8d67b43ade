package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/store"
)

// TestEndedPausedEndpointsRowsAreClaimed: deleting or disabling a paused
// endpoint cancels its pending deliveries and lets its held rows be
// claimed (and refused), so they and the cancel rows behind them leave the
// outbox (review finding, older than held rows: they stayed for good,
// growing the app's backlog and the oldest-row gauge).
func TestEndedPausedEndpointsRowsAreClaimed(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(ctx context.Context, f fixture) error{
		"deleted": func(ctx context.Context, f fixture) error { return f.st.DeleteEndpoint(ctx, f.app.ID, f.ep.ID) },
		"disabled": func(ctx context.Context, f fixture) error {
			yes := true
			_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &yes})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			ctx := context.Background()
			f.publish(t)
			yes := true
			_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Paused: &yes})
			require.NoError(t, err)
			require.NoError(t, end(ctx, f))
			_, err = store.ReleaseHeld(ctx, f.st.Pool())
			require.NoError(t, err)
			tx, err := f.st.Pool().Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback(ctx) //nolint:errcheck
			rows, err := store.ClaimOutbox(ctx, tx, 100)
			require.NoError(t, err)
			require.NotEmpty(t, rows, "a %s endpoint's rows are claimed, even while it is paused (outbox: %v)", name, f.outboxKinds(t))
		})
	}
}
