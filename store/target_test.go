package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/testenv"
	"hookrelay/outbox"
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
// coalesced statement claim it once between them, for the first call and
// until that call's until (so that call gives its claim back with it:
// ReleaseClaim matches inflight_until), through ClaimTarget and through
// ClaimAttempt; calls of other deliveries in it are claimed too.
func TestBatchedClaimsOnceForCallsAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	b := f.batched(t)
	for _, targets := range []bool{true, false} {
		dlv, other := f.publish(t), f.publish(t)
		first := time.Now().Add(time.Minute).Truncate(time.Microsecond)
		later := func(h int) time.Time { return first.Add(time.Duration(h) * time.Hour) }
		claimed, _, err := b.ClaimAsOneBatch(ctx, []string{dlv, other, dlv, dlv}, []time.Time{first, later(1), later(2), later(3)}, targets)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false, false}, claimed, "ClaimTarget: %v", targets)
		var until time.Time
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT inflight_until FROM deliveries WHERE id = $1`, dlv).Scan(&until))
		require.True(t, first.Equal(until), "ClaimTarget %v: claimed for the first call until %v, marked until %v", targets, first, until)
		require.NoError(t, f.st.ReleaseClaim(ctx, dlv, first))
		c, err := f.st.ClaimAttempt(ctx, dlv, time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, store.Claimed, c, "ClaimTarget %v: the claim given back by the first call still holds the delivery", targets)
	}
}

// TestClaimTargetThatDoesNotOpenIsGivenBack: a target whose sealed parts
// do not open (a secret no sealing key opens) is an error, as with
// LoadTarget, and the claim its statement made is given back before
// ClaimTarget returns: nothing of the delivery is on the wire.
func TestClaimTargetThatDoesNotOpenIsGivenBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	dlv := f.publish(t)
	_, err := f.st.Pool().Exec(ctx, `UPDATE endpoint_secrets SET sealed = '\x00'::bytea WHERE endpoint_id = $1`, f.ep.ID)
	require.NoError(t, err)
	_, err = f.st.LoadTarget(ctx, dlv, time.Now())
	require.Error(t, err, "LoadTarget fails on the unopenable secret")
	_, claimed, err := f.st.ClaimTarget(ctx, dlv, time.Now(), time.Now().Add(time.Minute))
	require.Error(t, err)
	require.False(t, claimed)
	require.False(t, onTheWire(t, f, dlv), "an attempt that failed to load is not on the wire")
}

// TestClaimTargetBatchOneBadTarget: one delivery whose target does not
// open, coalesced with another endpoint's delivery, fails alone: the other
// is claimed and loaded for its caller, and the bad one's claim is given
// back.
func TestClaimTargetBatchOneBadTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	ep2, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: f.app.ID, URL: "https://example.org/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	p, err := outbox.Publish(ctx, tx, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	var okID, badID string
	for _, d := range p.Deliveries {
		if d.EndpointID == ep2.ID {
			badID = d.ID
		} else {
			okID = d.ID
		}
	}
	require.NotEmpty(t, badID)
	require.NotEmpty(t, okID)
	_, err = f.st.Pool().Exec(ctx, `UPDATE endpoint_secrets SET sealed = '\x00'::bytea WHERE endpoint_id = $1`, ep2.ID)
	require.NoError(t, err)

	b := f.batched(t)
	until := time.Now().Add(time.Minute)
	claimed, errs, err := b.ClaimAsOneBatch(ctx, []string{okID, badID}, []time.Time{until, until}, true)
	require.NoError(t, err, "one bad target does not fail the batch")
	require.Equal(t, []bool{true, false}, claimed)
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "no sealing key opens")
	d, err := f.st.GetDelivery(ctx, f.app.ID, okID)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusDelivering, d.Status)
	require.True(t, onTheWire(t, f, okID))
	require.False(t, onTheWire(t, f, badID), "the bad target's claim is given back")
}

// onTheWire is whether dlv is marked on the wire now.
func onTheWire(t *testing.T, f fixture, dlv string) bool {
	t.Helper()
	var on bool
	require.NoError(t, f.st.Pool().QueryRow(context.Background(),
		`SELECT COALESCE(inflight_until > now(), false) FROM deliveries WHERE id = $1`, dlv).Scan(&on))
	return on
}

// TestBatchedClaimIsTheFirstCallsUntilHot is the same on the hot pool
// (kept generic plans), in a batch of many deliveries.
func TestBatchedClaimIsTheFirstCallsUntilHot(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	pool := testenv.PoolLike(t, f.st.Pool(), func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, store.HotPoolSetup)
			return err
		}
	})
	f.st.UseHotPool(pool)
	b := f.batched(t)
	for round := range 6 {
		targets := round%2 == 0
		var ids []string
		var untils []time.Time
		dlv := f.publish(t)
		first := time.Now().Add(time.Minute).Truncate(time.Microsecond)
		for i := range 20 {
			if i == 3 {
				ids, untils = append(ids, dlv), append(untils, first)
			}
			if i == 7 || i == 15 {
				ids, untils = append(ids, dlv), append(untils, time.Now().Add(time.Duration(i)*time.Hour).Truncate(time.Microsecond))
			}
			ids, untils = append(ids, f.publish(t)), append(untils, time.Now().Add(time.Minute))
		}
		_, _, err := b.ClaimAsOneBatch(ctx, ids, untils, targets)
		require.NoError(t, err)
		var until time.Time
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT inflight_until FROM deliveries WHERE id = $1`, dlv).Scan(&until))
		require.True(t, first.Equal(until), "round %d ClaimTarget %v: claimed for the first call until %v, marked until %v", round, targets, first, until)
	}
}
