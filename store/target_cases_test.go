package store_test

import (
	"context"
	"encoding/json"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/internal/testenv"
	"hookrelay/outbox"
	"hookrelay/store"
)

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

	b := store.NewBatched(f.st)
	t.Cleanup(b.Close)
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

// TestClaimTargetPlanUsesKeys: ClaimTarget, now the hottest statement of
// an attempt, runs on the hot pool as the product sets it (kept generic
// plans) beside a paused backlog and a delivery history, and reaches its
// rows by key: no sequential scan of a big table (TestHotPoolPlansUseKeys
// does not run it).
func TestClaimTargetPlanUsesKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	seedReview(t, f, 20_000)
	ctx := context.Background()
	var mu sync.Mutex
	var plans []string
	pool := testenv.PoolLike(t, f.st.Pool(), func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1
		cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			defer mu.Unlock()
			plans = append(plans, n.Message+"\n"+n.Detail)
		}
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, store.HotPoolSetup+`; LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_level = notice;
			SET auto_explain.log_analyze = on; SET auto_explain.log_nested_statements = on`)
			return err
		}
	})
	f.st.UseHotPool(pool)
	b := store.NewBatched(f.st)
	t.Cleanup(b.Close)
	pub := outbox.NewPublisher()
	for range 8 {
		p, err := pub.PublishNow(ctx, pool, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{"n":1}`)})
		require.NoError(t, err)
		for _, d := range p.Deliveries {
			if d.EndpointID == f.ep.ID {
				_, claimed, err := b.ClaimTarget(ctx, d.ID, time.Now(), time.Now().Add(time.Minute))
				require.NoError(t, err)
				require.True(t, claimed)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	seq := regexp.MustCompile(`Seq Scan on (outbox|deliveries|events|attempts)`)
	for _, p := range plans {
		if seq.MatchString(p) {
			t.Errorf("ClaimTarget scans a big table:\n%s", p)
		}
	}
}

// TestBatchedClaimIsTheFirstCallsUntil: a batch naming one delivery twice
// claims it for the first call (the others hear on the wire), so the mark
// must be the first call's until: that call gives its claim back with it
// (ReleaseClaim matches inflight_until), and its request is covered for
// its own timeout, not another call's.
func TestBatchedClaimIsTheFirstCallsUntil(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	b := store.NewBatched(f.st)
	t.Cleanup(b.Close)
	for _, targets := range []bool{true, false} {
		dlv := f.publish(t)
		first := time.Now().Add(time.Minute).Truncate(time.Microsecond)
		second := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		claimed, _, err := b.ClaimAsOneBatch(ctx, []string{dlv, dlv}, []time.Time{first, second}, targets)
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, claimed, "ClaimTarget: %v", targets)
		var until time.Time
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT inflight_until FROM deliveries WHERE id = $1`, dlv).Scan(&until))
		require.True(t, first.Equal(until), "ClaimTarget %v: claimed for the first call until %v, marked until %v", targets, first, until)
		// The first call's request is not made (its slot's wait ended): it
		// gives the claim back, and the delivery may be sent again.
		require.NoError(t, f.st.ReleaseClaim(ctx, dlv, first))
		c, err := f.st.ClaimAttempt(ctx, dlv, time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, store.Claimed, c, "ClaimTarget %v: the claim given back by the first call still holds the delivery", targets)
	}
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
	b := store.NewBatched(f.st)
	t.Cleanup(b.Close)
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
