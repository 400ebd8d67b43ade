package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/inbox"
)

// TestHandlerStopsWhenItsHeartbeatKeepsFailing: worker A's heartbeat
// statement fails at every tick (here a trigger refuses it; in production a
// saturated pool, a failover, a statement timeout). A cannot know its lease
// is still current once two thirds of it passed without a successful
// extension, so it stops its handler before the lease lapses; B then claims
// the task and runs it, never beside A.
func TestHandlerStopsWhenItsHeartbeatKeepsFailing(t *testing.T) {
	pool := setup(t)
	ctx := context.Background()
	enqueue(t, pool, "evt_hb")
	// Refuse every lease extension of the lease number in hb_fail (A's
	// claim), once the flag is set; B's claim takes a new number.
	_, err := pool.Exec(ctx, `
		CREATE TABLE hb_fail (lease bigint);
		CREATE FUNCTION hb_fail() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		  IF OLD.status = 'processing' AND NEW.status = 'processing' AND NEW.lease = OLD.lease
		     AND EXISTS (SELECT 1 FROM hb_fail WHERE lease = NEW.lease) THEN
		    RAISE EXCEPTION 'heartbeat refused (test)';
		  END IF;
		  RETURN NEW;
		END $$;
		CREATE TRIGGER hb_fail BEFORE UPDATE ON webhook_inbox_tasks FOR EACH ROW EXECUTE FUNCTION hb_fail();`)
	require.NoError(t, err)

	const lease = 300 * time.Millisecond
	var running atomic.Int64
	var overlap atomic.Bool
	aStarted, aDone := make(chan struct{}), make(chan struct{})
	a := &inbox.Worker{Pool: pool, Lease: lease, Handle: func(hctx context.Context, task inbox.Task) error {
		running.Add(1)
		defer running.Add(-1)
		_, err := pool.Exec(ctx, `INSERT INTO hb_fail VALUES ($1)`, task.Lease)
		if err != nil {
			return err
		}
		close(aStarted)
		select { // a handler that honours its context
		case <-hctx.Done():
		case <-time.After(10 * lease):
		}
		return nil
	}}
	b := &inbox.Worker{Pool: pool, Lease: lease, Handle: func(context.Context, inbox.Task) error {
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		defer running.Add(-1)
		return nil
	}}
	go func() { defer close(aDone); _, _ = a.RunOnce(ctx) }()
	<-aStarted
	require.Eventually(t, func() bool {
		n, err := b.RunOnce(ctx)
		require.NoError(t, err)
		return n == 1
	}, 10*lease, 20*time.Millisecond, "B takes the task over once A's lease lapsed")
	<-aDone
	require.False(t, overlap.Load(), "B's handler ran while A's handler still ran on a lease it had lost")
}

// TestOneStuckHandlerDoesNotStrandItsBatch: worker A's handler hangs
// (a call without a timeout, ignoring its context); the next task is not
// held behind it: A claims a task only when it runs it, so an idle worker B
// runs the next one.
func TestOneStuckHandlerDoesNotStrandItsBatch(t *testing.T) {
	pool := setup(t)
	ctx := context.Background()
	for i := range 2 {
		enqueue(t, pool, fmt.Sprintf("evt_%d", i))
	}
	const lease = 150 * time.Millisecond
	release := make(chan struct{})
	var mu sync.Mutex
	handled := map[string]string{}
	handler := func(name string) func(context.Context, inbox.Task) error {
		return func(_ context.Context, task inbox.Task) error {
			mu.Lock()
			handled[task.EventID] = name
			mu.Unlock()
			if task.EventID == "evt_0" {
				<-release // hangs, ignoring its context
			}
			return nil
		}
	}
	a := &inbox.Worker{Pool: pool, Lease: lease, Handle: handler("A")}
	b := &inbox.Worker{Pool: pool, Lease: lease, Handle: handler("B")}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = a.RunOnce(ctx) }()
	defer func() { close(release); <-done }()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return handled["evt_0"] == "A" }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := b.RunOnce(ctx)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		return handled["evt_1"] == "B"
	}, 20*lease, 20*time.Millisecond, "evt_1 runs on idle worker B while A's handler hangs")
}
