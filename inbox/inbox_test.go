package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/inbox"
	"hookrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool := pg.Pool(t, "inbox", false)
	require.NoError(t, inbox.Migrate(ctx, pool))
	require.NoError(t, inbox.Migrate(ctx, pool), "idempotent")
	_, err := pool.Exec(ctx, `CREATE TABLE orders (event_id text PRIMARY KEY)`)
	require.NoError(t, err)
	return pool
}

// handle is the seed's transactional handler: dedupe row and business
// change commit together. hold, when set, runs once the event is accepted
// (its dedupe row written, not committed).
func handle(ctx context.Context, pool *pgxpool.Pool, eventID string, fail bool, hold func()) (bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := inbox.Accept(ctx, tx, "acme", eventID); errors.Is(err, inbox.ErrDuplicate) {
		return false, tx.Commit(ctx)
	} else if err != nil {
		return false, err
	}
	if hold != nil {
		hold()
	}
	if fail {
		return false, errors.New("business operation failed")
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1)`, eventID); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

func TestAcceptSeedDemo(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	_, err := handle(ctx, pool, "evt_1", true, nil)
	require.Error(t, err)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM webhook_inbox_seen`), "a rolled-back change leaves no dedupe row")
	done, err := handle(ctx, pool, "evt_1", false, nil)
	require.NoError(t, err)
	require.True(t, done, "the retry is processed")
	done, err = handle(ctx, pool, "evt_1", false, nil)
	require.NoError(t, err)
	require.False(t, done, "the duplicate has no second effect")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders`))
	// Same event ID from another source is another event.
	tx, _ := pool.Begin(ctx)
	require.NoError(t, inbox.Accept(ctx, tx, "other-sender", "evt_1"))
	require.NoError(t, tx.Rollback(ctx))
}

func TestConcurrentDuplicateWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	for _, firstFails := range []bool{false, true} {
		pool := setup(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		var firstDone bool
		var firstErr error
		accepted, release := make(chan struct{}), make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			firstDone, firstErr = handle(ctx, pool, "evt_c", firstFails, func() { close(accepted); <-release })
		}()
		<-accepted // the first holds its row
		var secondDone bool
		var err error
		second := make(chan struct{})
		go func() {
			defer close(second)
			secondDone, err = handle(ctx, pool, "evt_c", false, nil)
		}()
		// The duplicate waits on the first's row lock until it ends.
		require.Eventually(t, func() bool {
			return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
		}, 10*time.Second, 5*time.Millisecond)
		close(release)
		<-second
		wg.Wait()
		require.NoError(t, err)
		if firstFails {
			require.Error(t, firstErr)
			require.True(t, secondDone, "after a rollback the duplicate is processed")
		} else {
			require.NoError(t, firstErr)
			require.True(t, firstDone)
			require.False(t, secondDone, "after a commit the duplicate is absorbed")
		}
		require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders`))
	}
}

func enqueue(t *testing.T, pool *pgxpool.Pool, eventID string) {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, inbox.Enqueue(ctx, tx, inbox.Task{Source: "acme", EventID: eventID, Kind: "email", Payload: []byte("{}")}))
	require.NoError(t, inbox.Enqueue(ctx, tx, inbox.Task{Source: "acme", EventID: eventID, Kind: "email", Payload: []byte("{}")}))
	require.NoError(t, tx.Commit(ctx))
}

func TestWorkerRetriesWithStableKey(t *testing.T) {
	pool := setup(t)
	enqueue(t, pool, "evt_w")
	var keys []string
	w := &inbox.Worker{Pool: pool, BaseBackoff: time.Millisecond, Handle: func(_ context.Context, task inbox.Task) error {
		keys = append(keys, task.IdempotencyKey())
		if len(keys) < 3 {
			return errors.New("smtp 451")
		}
		return nil
	}}
	ctx := context.Background()
	// Each failure backs the task off 1 ms; run until it completes.
	require.Eventually(t, func() bool {
		_, err := w.RunOnce(ctx)
		return err == nil && count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'completed'`) == 1
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"acme:evt_w:email", "acme:evt_w:email", "acme:evt_w:email"}, keys)
	var attempts int
	var lastErr *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempts, last_error FROM webhook_inbox_tasks`).Scan(&attempts, &lastErr))
	require.Equal(t, 3, attempts)
	require.Nil(t, lastErr)
}

func TestWorkerRecoversStuckTasks(t *testing.T) {
	pool := setup(t)
	enqueue(t, pool, "evt_s")
	ctx := context.Background()
	// A worker claims the task and "crashes" (never finishes).
	cctx, cancel := context.WithCancel(ctx)
	crashed := &inbox.Worker{Pool: pool, Lease: 50 * time.Millisecond, Handle: func(ctx context.Context, _ inbox.Task) error {
		cancel() // the worker dies while it handles the task
		<-ctx.Done()
		return ctx.Err()
	}}
	_, _ = crashed.RunOnce(cctx)
	// Simulate the crash: the row stays in processing.
	_, err := pool.Exec(ctx, `UPDATE webhook_inbox_tasks SET status = 'processing', locked_until = now() + interval '1 second'`)
	require.NoError(t, err)
	var ran int
	w := &inbox.Worker{Pool: pool, Handle: func(context.Context, inbox.Task) error { ran++; return nil }}
	n, err := w.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a live lease is respected")
	require.Eventually(t, func() bool {
		n, err = w.RunOnce(ctx)
		require.NoError(t, err)
		return n == 1
	}, 5*time.Second, 10*time.Millisecond, "an expired lease is recovered")
	require.Equal(t, 1, ran)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'completed'`))
}

// TestStaleWorkerCannotUndoAnotherWorkersCompletion: worker A's lease runs
// out while its handler is stuck; B takes the task over and completes it;
// A's late failure changes nothing.
func TestStaleWorkerCannotUndoAnotherWorkersCompletion(t *testing.T) {
	pool := setup(t)
	enqueue(t, pool, "evt_f")
	ctx := context.Background()
	stuck, release := make(chan struct{}), make(chan struct{})
	a := &inbox.Worker{Pool: pool, Lease: time.Hour, Handle: func(context.Context, inbox.Task) error {
		close(stuck)
		<-release
		return errors.New("timed out talking to the mail server")
	}}
	done := make(chan error, 1)
	go func() { _, err := a.RunOnce(ctx); done <- err }()
	<-stuck
	// A's lease runs out (a long pause, a partition): expire it.
	_, err := pool.Exec(ctx, `UPDATE webhook_inbox_tasks SET locked_until = now() - interval '1 second'`)
	require.NoError(t, err)
	var bRan int
	b := &inbox.Worker{Pool: pool, Handle: func(context.Context, inbox.Task) error { bRan++; return nil }}
	n, err := b.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, bRan)
	close(release)
	require.NoError(t, <-done)
	var status string
	var lastErr *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status, last_error FROM webhook_inbox_tasks`).Scan(&status, &lastErr))
	require.Equal(t, inbox.StatusCompleted, status, "the stale worker's failure did not flip it back")
	require.Nil(t, lastErr)
}

// TestHeartbeatKeepsALongHandlerSingle: a handler that runs longer than
// its lease keeps it by heartbeat; another worker polling meanwhile never
// runs the task. The handler runs until the task has stayed locked past
// three of its original leases, observed in Postgres.
func TestHeartbeatKeepsALongHandlerSingle(t *testing.T) {
	pool := setup(t)
	enqueue(t, pool, "evt_h")
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	var running, maxRunning, runs atomic.Int64
	release := make(chan struct{})
	handle := func(context.Context, inbox.Task) error {
		runs.Add(1)
		if n := running.Add(1); n > maxRunning.Load() {
			maxRunning.Store(n)
		}
		defer running.Add(-1)
		<-release
		return nil
	}
	a := &inbox.Worker{Pool: pool, Lease: lease, Handle: handle}
	b := &inbox.Worker{Pool: pool, Lease: lease, Handle: handle}
	go func() { _, _ = a.RunOnce(ctx) }()
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	claimed := time.Now()
	require.Eventually(t, func() bool {
		_, err := b.RunOnce(ctx)
		require.NoError(t, err)
		var held bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT locked_until > now() FROM webhook_inbox_tasks`).Scan(&held))
		require.True(t, held, "the lease lapsed while its handler ran")
		return time.Since(claimed) > 3*lease
	}, 10*time.Second, 50*time.Millisecond)
	close(release)
	require.Eventually(t, func() bool {
		return count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'completed'`) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(1), runs.Load(), "run once")
	require.Equal(t, int64(1), maxRunning.Load(), "never twice at a time")
}

// TestPoisonTaskBecomesDead: a task that fails MaxAttempts times is dead
// with its last error, listed, and runs again once retried by hand.
func TestPoisonTaskBecomesDead(t *testing.T) {
	pool := setup(t)
	enqueue(t, pool, "evt_p")
	ctx := context.Background()
	fail := true
	w := &inbox.Worker{Pool: pool, MaxAttempts: 3, BaseBackoff: time.Millisecond, Handle: func(context.Context, inbox.Task) error {
		if fail {
			return errors.New("422 from the CRM")
		}
		return nil
	}}
	runUntilOneDead(t, w, pool)
	dead, err := inbox.ListDead(ctx, pool)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, 3, dead[0].Attempts)
	require.Equal(t, "422 from the CRM", dead[0].LastError)
	n, err := w.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a dead task is not run")

	fail = false
	require.NoError(t, inbox.Retry(ctx, pool, dead[0].ID))
	require.ErrorIs(t, inbox.Retry(ctx, pool, dead[0].ID), inbox.ErrNotDead)
	n, err = w.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'completed'`))
}

func envelope(id, typ, created, data string) []byte {
	return []byte(`{"id":"` + id + `","type":"` + typ + `","created":"` + created + `","api_version":"2026-11-01","data":` + data + `}`)
}

// TestApplyIfNewer: a subscription canceled at 10:05 stays canceled when
// the payment of 10:00 arrives after it; the same time with another body is
// a conflict; a version field in data orders changes too.
func TestApplyIfNewer(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE subscriptions (id text PRIMARY KEY, status text NOT NULL)`)
	require.NoError(t, err)
	deliver := func(c inbox.Change, status string) inbox.Outcome {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck
		o, err := inbox.ApplyIfNewer(ctx, tx, c, func() error {
			_, err := tx.Exec(ctx, `INSERT INTO subscriptions VALUES ('sub_42', $1) ON CONFLICT (id) DO UPDATE SET status = $1`, status)
			return err
		})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return o
	}
	status := func() string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM subscriptions WHERE id = 'sub_42'`).Scan(&s))
		return s
	}
	change := func(id, typ, created, data string) inbox.Change {
		return inbox.Change{Source: "billing", Resource: "subscription:sub_42", EventID: id, Body: envelope(id, typ, created, data)}
	}
	canceled := change("evt_2", "subscription.canceled", "2026-12-01T10:05:00Z", `{"subscription":"sub_42"}`)
	require.Equal(t, inbox.OutcomeApplied, deliver(canceled, "canceled"))
	require.Equal(t, inbox.OutcomeStale, deliver(change("evt_1", "payment.succeeded", "2026-12-01T10:00:00Z", `{"subscription":"sub_42"}`), "active"))
	require.Equal(t, "canceled", status(), "the older payment did not undo the cancel")
	require.Equal(t, inbox.OutcomeDuplicate, deliver(canceled, "canceled"))
	require.Equal(t, inbox.OutcomeConflict, deliver(change("evt_3", "subscription.updated", "2026-12-01T10:05:00Z", `{"plan":"pro"}`), "active"))
	require.Equal(t, "canceled", status(), "a conflict is not applied")
	require.Equal(t, inbox.OutcomeConflict, deliver(inbox.Change{Source: "billing", Resource: "subscription:sub_42", EventID: "evt_4",
		Body: []byte(`{"id":"evt_4","data":{}}`)}, "active"), "no version")

	// Ordered by a version field in data.
	v := func(id string, n int) inbox.Change {
		c := change(id, "subscription.updated", "2026-12-01T11:00:00Z", fmt.Sprintf(`{"version":%d}`, n))
		c.Resource, c.VersionField = "subscription:sub_7", "version"
		return c
	}
	require.Equal(t, inbox.OutcomeApplied, deliver(v("evt_v2", 2), "v2"))
	require.Equal(t, inbox.OutcomeStale, deliver(v("evt_v1", 1), "v1"))
	require.Equal(t, inbox.OutcomeApplied, deliver(v("evt_v3", 3), "v3"))

	rows, err := pool.Query(ctx, `SELECT event_id, outcome FROM webhook_inbox_outcomes WHERE resource = 'subscription:sub_42' ORDER BY id`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var id, o string
		require.NoError(t, rows.Scan(&id, &o))
		got = append(got, id+":"+o)
	}
	require.Equal(t, []string{"evt_2:applied", "evt_1:stale", "evt_2:duplicate", "evt_3:conflict", "evt_4:conflict"}, got)
}

// TestPruneCompletedTasks: completed tasks past the retention go; a dead
// one and the dedupe rows stay.
func TestPruneCompletedTasks(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	enqueue(t, pool, "evt_old")
	enqueue(t, pool, "evt_dead")
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, inbox.Accept(ctx, tx, "acme", "evt_old"))
	require.NoError(t, tx.Commit(ctx))
	_, err = pool.Exec(ctx, `UPDATE webhook_inbox_tasks SET status = CASE WHEN event_id = 'evt_old' THEN 'completed' ELSE 'dead' END,
		completed_at = now() - interval '40 days'`)
	require.NoError(t, err)
	n, err := inbox.Prune(ctx, pool, time.Now(), 30*24*time.Hour, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'dead'`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox_seen`), "dedupe rows stay")
}

// TestEveryClaimedTaskKeepsItsLease: worker A claims a batch and runs its
// tasks one after another, each longer than a lease, while worker B claims
// whatever lapses. A holds the lease of every task it claimed from the
// claim on and never starts a handler on a lease that is not current, so
// each task's handler runs once, by one worker.
func TestEveryClaimedTaskKeepsItsLease(t *testing.T) {
	pool := setup(t)
	ctx := context.Background()
	const n = 6
	for i := range n {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, inbox.Enqueue(ctx, tx, inbox.Task{Source: "acme", EventID: fmt.Sprintf("evt_%d", i), Kind: "email", Payload: []byte("{}")}))
		require.NoError(t, tx.Commit(ctx))
	}
	const lease = 150 * time.Millisecond
	var mu sync.Mutex
	runs := map[string][]string{}
	handler := func(name string) func(context.Context, inbox.Task) error {
		return func(ctx context.Context, task inbox.Task) error {
			mu.Lock()
			runs[task.EventID] = append(runs[task.EventID], name)
			mu.Unlock()
			select { // longer than a lease: the batch's later tasks would lapse
			case <-time.After(2 * lease):
			case <-ctx.Done():
			}
			return nil
		}
	}
	a := &inbox.Worker{Pool: pool, Lease: lease, Handle: handler("A")}
	b := &inbox.Worker{Pool: pool, Lease: lease, Handle: handler("B")}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = a.RunOnce(ctx) }()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) > 0 }, 5*time.Second, 5*time.Millisecond)
	// B takes whatever it can while A's handler runs, until every task is
	// completed.
	require.Eventually(t, func() bool {
		_, err := b.RunOnce(ctx)
		require.NoError(t, err)
		return count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'completed'`) == n
	}, 10*time.Second, 20*time.Millisecond)
	<-done
	mu.Lock()
	defer mu.Unlock()
	for id, by := range runs {
		require.Len(t, by, 1, "%s handled by %v", id, by)
	}
	require.Len(t, runs, n)
}

// TestVersionsCompareExactly: numbers compare as the exact decimals they
// were sent as (no rounding to 9 places), created times to the
// millisecond hookrelay sends, other strings as strings, and a number after
// a string is a conflict.
func TestVersionsCompareExactly(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	deliver := func(resource, field, id, created, data string) inbox.Outcome {
		return deliverVersion(t, pool, resource, field, id, created, data)
	}
	const at = "2026-12-01T10:00:00.000Z"
	require.Equal(t, inbox.OutcomeApplied, deliver("ledger:1", "version", "evt_a", at, `{"version":1.0000000004}`))
	require.Equal(t, inbox.OutcomeStale, deliver("ledger:1", "version", "evt_b", at, `{"version":1.0000000003}`), "rounded to 9 places they were equal")
	require.Equal(t, inbox.OutcomeApplied, deliver("ledger:1", "version", "evt_c", at, `{"version":1.00000000040000000001}`))
	require.Equal(t, inbox.OutcomeApplied, deliver("ledger:1", "version", "evt_d", at, `{"version":2e0}`))
	require.Equal(t, inbox.OutcomeConflict, deliver("ledger:1", "version", "evt_e", at, `{"version":1e-1000}`), "a hostile scale is no version")
	require.Equal(t, inbox.OutcomeConflict, deliver("ledger:1", "version", "evt_f", at, `{"version":"v3"}`), "a string after a number")

	require.Equal(t, inbox.OutcomeApplied, deliver("doc:1", "etag", "evt_g", at, `{"etag":"b"}`))
	require.Equal(t, inbox.OutcomeStale, deliver("doc:1", "etag", "evt_h", at, `{"etag":"a"}`), "strings compare as strings")
	require.Equal(t, inbox.OutcomeApplied, deliver("doc:1", "etag", "evt_i", at, `{"etag":"c"}`))

	require.Equal(t, inbox.OutcomeApplied, deliver("sub:1", "", "evt_j", "2026-12-01T10:00:00.870Z", `{}`))
	require.Equal(t, inbox.OutcomeStale, deliver("sub:1", "", "evt_k", "2026-12-01T10:00:00.120Z", `{}`), "the earlier change of the same second")
	require.Equal(t, inbox.OutcomeApplied, deliver("sub:1", "", "evt_l", "2026-12-01T10:00:00.871Z", `{}`))

	var stored string
	require.NoError(t, pool.QueryRow(ctx, `SELECT version::text FROM webhook_inbox_versions WHERE resource = 'ledger:1'`).Scan(&stored))
	require.Equal(t, "2", stored)
}

// TestPanickingHandlerFailsItsAttempt: a handler that panics fails its
// attempt like an error: the task is retried, then dead after MaxAttempts,
// its last error the panic's value with the stack, and the worker goes on
// to the next task.
func TestPanickingHandlerFailsItsAttempt(t *testing.T) {
	pool := setup(t)
	enqueue(t, pool, "evt_panic")
	ctx := context.Background()
	var runs atomic.Int32
	w := &inbox.Worker{Pool: pool, MaxAttempts: 2, BaseBackoff: time.Millisecond, Handle: func(_ context.Context, task inbox.Task) error {
		if task.EventID == "evt_panic" {
			runs.Add(1)
			var m map[string]int
			m["boom"]++ // a nil map: the handler panics
		}
		return nil
	}}
	runUntilOneDead(t, w, pool)
	require.Equal(t, int32(2), runs.Load(), "MaxAttempts runs, no more")
	dead, err := inbox.ListDead(ctx, pool)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, 2, dead[0].Attempts)
	require.Contains(t, dead[0].LastError, "inbox: handler panicked: assignment to entry in nil map")
	require.Contains(t, dead[0].LastError, "goroutine", "with the stack")
	require.LessOrEqual(t, len(dead[0].LastError), inbox.PanicStackMax+200)

	enqueue(t, pool, "evt_next")
	n, err := w.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'completed'`), "the next task runs")
}

// runUntilOneDead runs w until one task of pool is dead.
func runUntilOneDead(t *testing.T, w *inbox.Worker, pool *pgxpool.Pool) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := w.RunOnce(context.Background())
		require.NoError(t, err)
		return count(t, pool, `SELECT count(*) FROM webhook_inbox_tasks WHERE status = 'dead'`) == 1
	}, 10*time.Second, 5*time.Millisecond)
}
