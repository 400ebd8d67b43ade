package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
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

// TestHoldOutboxLeasesAndLeavesTheConnectionAsItWas: a hold moves each
// row's lease, and its commit's synchronous_commit = off ends with its
// statement: the pooled connection it ran on commits the next statement
// (a claim or a round's, say) synchronously again.
func TestHoldOutboxLeasesAndLeavesTheConnectionAsItWas(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	var id int64
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT id FROM outbox WHERE delivery_id = $1`, dlv).Scan(&id))
	conn, err := f.st.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	require.NoError(t, store.HoldOutbox(ctx, conn, []int64{id}, []time.Time{until}))
	var leased time.Time
	var setting string
	require.NoError(t, conn.QueryRow(ctx, `SELECT leased_until, current_setting('synchronous_commit') FROM outbox WHERE id = $1`, id).Scan(&leased, &setting))
	require.True(t, leased.Equal(until), "leased until %v, not %v", leased, until)
	require.Equal(t, "on", setting, "the hold's setting outlived its statement")
}

// TestClaimTargetLeavesTheConnectionAsItWas: a claim, whose commit does
// not wait for the WAL flush, claims as before, and its setting ends with
// its statement: the hot pool's one connection commits the next statement
// (the attempt's record, say) synchronously again.
func TestClaimTargetLeavesTheConnectionAsItWas(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	cfg := f.st.Pool().Config().Copy()
	cfg.MaxConns, cfg.MinConns = 1, 0
	hot, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(hot.Close)
	f.st.UseHotPool(hot)
	now := time.Now()
	until := now.Add(time.Minute).Truncate(time.Microsecond)
	_, claimed, err := f.st.ClaimTarget(ctx, dlv, now, until)
	require.NoError(t, err)
	require.True(t, claimed)
	var setting, status string
	var inflight time.Time
	require.NoError(t, hot.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), status, inflight_until FROM deliveries WHERE id = $1`, dlv).
		Scan(&setting, &status, &inflight))
	require.Equal(t, "on", setting, "the claim's setting outlived its statement")
	require.Equal(t, string(delivery.StatusDelivering), status)
	require.True(t, inflight.Equal(until), "claimed until %v, not %v", inflight, until)
	_, claimed, err = f.st.ClaimTarget(ctx, dlv, now, until.Add(time.Minute))
	require.NoError(t, err)
	require.False(t, claimed, "a second claim while the first is on the wire")
	// Its own transaction commits without waiting for the flush.
	other := f.publish(t)
	tx, err := hot.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	setting, err = store.ClaimTargetSetting(ctx, tx, other, until)
	require.NoError(t, err)
	require.Equal(t, "off", setting, "the claim's transaction commits synchronously")
}
