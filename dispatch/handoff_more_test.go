package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
	"hookrelay/store"
)

// TestTakeKeepsHeldMaxOverManyEndpoints: one event to an app with three
// endpoints due at once, published while the sender holds nothing and
// HeldMax is 1: Handoff says yes (0 < 1) and the publish leases all three
// rows; Take sends one and puts the other two back.
func TestTakeKeepsHeldMaxOverManyEndpoints(t *testing.T) {
	f, d, _ := setupHandoff(t, 3*time.Second, 5*time.Second, func(d *Dispatcher) { d.HeldMax = 1 })
	ctx := context.Background()
	sched := []time.Duration{0, time.Second}
	for range 2 {
		_, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: f.app.ID, URL: f.ep.URL, Environment: "live",
			RetrySchedule: sched, Deadline: time.Hour, RequestTimeout: 5 * time.Second})
		require.NoError(t, err)
	}
	p := f.publishHandoff(t, handoff(t, d, f.app.ID))
	require.Len(t, p.Leased, 3)
	d.Take(p.Leased)
	require.LessOrEqual(t, d.held.Load(), int64(1), "the sender holds more than HeldMax rows")
	var back int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE leased_until IS NULL`).Scan(&back))
	// Two, or three when the dispatcher's first round held the one place.
	require.GreaterOrEqual(t, back, 2, "the rows past the bound went back to the rounds")
}

// handoff waits for d to offer app a hand-off (a round holds the places it may
// fill while it runs: with a HeldMax of 1, every place) and returns it.
func handoff(t *testing.T, d *Dispatcher, app string) outbox.Handoff {
	t.Helper()
	var h outbox.Handoff
	require.Eventually(t, func() bool {
		var ok bool
		h, ok = d.Handoff(app)
		return ok
	}, 10*time.Second, time.Millisecond)
	return h
}

// TestTakeKeepsHeldMaxOverConcurrentIngests: three ingests that asked
// for a hand-off before any of them took its rows (concurrent requests)
// each lease and take one row: with HeldMax 1 the sender holds one.
func TestTakeKeepsHeldMaxOverConcurrentIngests(t *testing.T) {
	f, d, _ := setupHandoff(t, 3*time.Second, 5*time.Second, func(d *Dispatcher) { d.HeldMax = 1 })
	var hs []outbox.Handoff
	for range 3 {
		hs = append(hs, handoff(t, d, f.app.ID))
	}
	for _, h := range hs {
		p := f.publishHandoff(t, h)
		require.Len(t, p.Leased, 1)
		d.Take(p.Leased)
	}
	require.LessOrEqual(t, d.held.Load(), int64(1), "the sender holds more than HeldMax rows")
}

// TestLeasedRowEqualsClaimedRow: a row a publish leased decodes to
// the same Row a round's claim reads for it (timestamps to the
// microsecond, settings, names), and its lease covers its plan.
func TestLeasedRowEqualsClaimedRow(t *testing.T) {
	f := setupSender(t, 0, 7*time.Second)
	ctx := context.Background()
	sched := []time.Duration{160 * time.Millisecond, time.Second}
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{RetrySchedule: &sched})
	require.NoError(t, err)
	p := f.publishHandoff(t, outbox.Handoff{Lease: handoffLease})
	require.Len(t, p.Leased, 1)
	l := p.Leased[0]
	_, err = f.st.Pool().Exec(ctx, `UPDATE outbox SET leased_until = NULL`)
	require.NoError(t, err)
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	rows, err := store.ClaimOutbox(ctx, tx, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	r := rows[0]
	require.True(t, r.CreatedAt.Equal(l.CreatedAt), "created %s vs %s", r.CreatedAt, l.CreatedAt)
	r.CreatedAt, l.Row.CreatedAt = time.Time{}, time.Time{}
	require.Equal(t, r, l.Row)
	fl, ok := planFirst(l.Row, time.Now())
	require.True(t, ok)
	require.False(t, fl.leaseUntil(time.Now()).After(l.Until))
}

// TestTakeAfterStopReleasesBeforeReturning: rows a publish leased
// just before the dispatcher stopped reach Take after Run returned (an
// ingest that outlived the HTTP server's shutdown timeout). Take puts
// them back before it returns, so the process may close its pool then
// (Stack.Close runs the closers after the services stopped): they do not
// wait, leased and unsent, for their lease to lapse.
func TestTakeAfterStopReleasesBeforeReturning(t *testing.T) {
	var own *pgxpool.Pool
	f, d, stop := setupHandoff(t, 0, time.Second, func(d *Dispatcher) {
		var err error
		own, err = pgxpool.NewWithConfig(context.Background(), d.Pool.Config().Copy())
		require.NoError(t, err)
		d.Pool = own
	})
	h, _ := d.Handoff(f.app.ID)
	p := f.publishHandoff(t, h)
	require.Len(t, p.Leased, 1)
	stop()
	d.Take(p.Leased)
	own.Close()
	require.Nil(t, f.leasedUntil(t, p.Leased[0].DeliveryID), "a row taken after the stop is still leased after the process closed its pool")
}

// TestHandoffLeavesAQueuingAppToTheRounds: once an app's first attempts
// queue for its share, its ingests get no hand-off (their rows go to the
// rounds, which take every app's rows in turn) while another app's still
// do; when the queue is gone, the app gets it again.
func TestHandoffLeavesAQueuingAppToTheRounds(t *testing.T) {
	f, d, _ := setupHandoff(t, time.Second, 5*time.Second, func(d *Dispatcher) { d.AppShare = 1 })
	for range 2 {
		p := f.publishHandoff(t, handoff(t, d, f.app.ID))
		require.Len(t, p.Leased, 1)
		d.Take(p.Leased)
	}
	require.Eventually(t, func() bool { _, ok := d.Handoff(f.app.ID); return !ok }, 10*time.Second, time.Millisecond,
		"the second first attempt waits for the app's one place: no hand-off")
	_, ok := d.Handoff("app_other")
	require.True(t, ok, "another app's ingest still hands its rows over")
	handoff(t, d, f.app.ID)
	f.waitOutboxEmpty(t)
	require.EqualValues(t, 2, f.hits.Load())
}
