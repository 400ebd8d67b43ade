package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/internal/testenv"
	"hookrelay/store"
)

// onePool opens a pool of one connection on f's database: whatever a
// round leaves on its connection, the next user of the pool finds.
func onePool(t *testing.T, f fixture) *pgxpool.Pool {
	return testenv.PoolLike(t, f.st.Pool(), func(c *pgxpool.Config) { c.MaxConns = 1 })
}

// idle requires that the pool's next connection is in no transaction.
func idle(t *testing.T, p *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	c, err := p.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	// The server's own word (ReadyForQuery) after a statement on it.
	_, err = c.Exec(ctx, `SELECT 1`)
	require.NoError(t, err)
	require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus(), "the connection is inside a transaction")
}

// holdLock runs lock (a statement that takes locks) in a transaction of
// f's pool, left open: the test rolls it back, or its end does.
func holdLock(t *testing.T, f fixture, lock string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, lock)
	require.NoError(t, err)
	return tx
}

// cancelWhileLocked runs call with a context it cancels once a backend of
// f's database waits for a lock, and requires that call failed with the
// context's error.
func cancelWhileLocked(t *testing.T, f fixture, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	failed := make(chan error, 1)
	go func() { failed <- call(ctx) }()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, f.st.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n > 0
	}, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-failed, context.Canceled, "wraps the context's error")
}

// claimAgain requires that a round on p claims n rows, and that p is in
// no transaction after it.
func claimAgain(t *testing.T, p *pgxpool.Pool, n int, msg string) {
	t.Helper()
	r, _ := beginRound(t, p, n, msg)
	r.Close()
	idle(t, p)
}

// TestRoundCanceledWhileWaitingLeavesNoTransaction: a round whose context
// ends while its CarrierRows waits for another transaction's row lock
// fails with the context's error, writes nothing of what it queued, and
// leaves its pool with no transaction open and its rows claimable.
func TestRoundCanceledWhileWaitingLeavesNoTransaction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publish(t)
	f.publish(t)
	_, err := f.st.Pool().Exec(ctx, `UPDATE outbox SET carrier_id = 'carrier_1'`)
	require.NoError(t, err)
	one := onePool(t, f)

	blocker := holdLock(t, f, `SELECT id FROM outbox ORDER BY id DESC LIMIT 1 FOR UPDATE`)

	r, rows := beginRound(t, one, 1, "the locked row is skipped")
	r.Lease([]int64{rows[0].ID}, []time.Time{time.Now().Add(time.Hour)})
	cancelWhileLocked(t, f, func(ctx context.Context) error {
		_, err := r.CarrierRows(ctx, []string{"carrier_1"})
		return err
	})
	r.Close()
	r.Close() // twice: no panic, nothing more
	require.NoError(t, blocker.Rollback(ctx))

	idle(t, one)
	var leased int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE leased_until IS NOT NULL`).Scan(&leased))
	require.Zero(t, leased, "the queued lease was not written")
	claimAgain(t, one, 2, "no lock of the canceled round is left")
}

// TestRoundCanceledInItsClaim: a round whose context ends while its
// claim waits (the outbox locked whole) fails with the context's error
// and leaves its pool with no transaction open.
func TestRoundCanceledInItsClaim(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publish(t)
	one := onePool(t, f)
	blocker := holdLock(t, f, `LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE`)
	cancelWhileLocked(t, f, func(ctx context.Context) error {
		r, _, err := store.BeginRound(ctx, one, 10)
		if err == nil {
			r.Close()
		}
		return err
	})
	require.NoError(t, blocker.Rollback(ctx))
	idle(t, one)
	claimAgain(t, one, 1, "the canceled claim holds nothing")
}

// TestRoundCommitWithEndedContext: a commit whose context already ended
// sends nothing; Close rolls the round back and gives back a connection
// in no transaction, and a committed round leaves none either.
func TestRoundCommitWithEndedContext(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publish(t)
	one := onePool(t, f)
	r, rows := beginRound(t, one, 1)
	r.Done([]int64{rows[0].ID})
	ended, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, r.Commit(ended), context.Canceled)
	r.Close()
	idle(t, one)
	var n int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n))
	require.Equal(t, 1, n, "the delete was not committed")

	r, rows = beginRound(t, one, 1)
	r.Done([]int64{rows[0].ID})
	require.NoError(t, r.Commit(ctx))
	r.Close()
	r.Close()
	idle(t, one)
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n))
	require.Zero(t, n)
}

// TestRoundOnTheSimpleProtocol: a DATABASE_URL with
// default_query_exec_mode=simple_protocol (as behind PgBouncer) sends a
// batch as one multi-statement query: the round still holds its claim's
// locks until it ends and writes its lease, stamp and delete at COMMIT.
func TestRoundOnTheSimpleProtocol(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	leased, stamped, deleted := f.publish(t), f.publish(t), f.publish(t)
	simple := testenv.PoolLike(t, f.st.Pool(), func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol })
	r, rows := beginRound(t, simple, 3)
	other, _ := beginRound(t, f.st.Pool(), 0, "the simple round's claim holds its locks")
	other.Close()
	idOf := map[string]int64{}
	for _, row := range rows {
		idOf[row.DeliveryID] = row.ID
	}
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	r.Lease([]int64{idOf[leased]}, []time.Time{until})
	r.Stamp([]int64{idOf[stamped]}, []string{"carrier_1"})
	again, err := r.CarrierRows(ctx, []string{"carrier_1"})
	require.NoError(t, err)
	require.Len(t, again, 1, "the round reads its own stamp")
	r.Done([]int64{idOf[deleted]})
	require.NoError(t, r.Commit(ctx))
	r.Close()
	var n int
	var lease *time.Time
	var carrier *string
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*), max(leased_until), max(carrier_id) FROM outbox`).Scan(&n, &lease, &carrier))
	require.Equal(t, 2, n)
	require.NotNil(t, lease)
	require.True(t, until.Equal(*lease), "leased until %s, not %s", *lease, until)
	require.NotNil(t, carrier)
	require.Equal(t, "carrier_1", *carrier)
}

// TestRoundFailedCommitGivesBackAnIdleConnection: a round whose queued
// write fails on the server (the transaction aborted, its COMMIT never
// run) is rolled back by Close; the pool's one connection is in no
// transaction, and the next round on it claims the row again.
func TestRoundFailedCommitGivesBackAnIdleConnection(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publish(t)
	one := onePool(t, f)
	r, rows := beginRound(t, one, 1)
	r.Lease([]int64{rows[0].ID}, []time.Time{time.Now().Add(time.Hour)})
	r.Stamp([]int64{rows[0].ID}, []string{"carrier\x00"})
	r.Done([]int64{rows[0].ID})
	require.Error(t, r.Commit(ctx))
	r.Close()
	idle(t, one)
	claimAgain(t, one, 1, "nothing of the failed round was written")
}
