package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"hookrelay/outbox"
)

// Round is one dispatcher round's transaction on one connection, with its
// statements pipelined: BEGIN goes out with the claim, and the round's
// writes (Lease, Stamp, Done) wait to go out with COMMIT. A round that
// claims and leases costs two round trips, where a transaction of one
// statement each cost four (a round that reads a restarted carrier's rows
// costs one more). Its claim is ClaimOutbox's, whose locks it
// holds until it ends.
type Round struct {
	conn *pgxpool.Conn
	// writes are queued until CarrierRows or Commit sends them.
	writes pgx.Batch
	// ended: committed or rolled back, its connection given back.
	ended bool
}

// BeginRound begins a round on a connection of pool and claims up to limit
// rows (ClaimOutbox), in one round trip. Close ends the round, rolled back
// unless committed.
func BeginRound(ctx context.Context, pool *pgxpool.Pool, limit int) (*Round, []outbox.Row, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("begin round: %w", err)
	}
	r := &Round{conn: conn}
	var rows []outbox.Row
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(ClaimSQL, ClaimArgs(limit)...).Query(func(res pgx.Rows) error {
		rows, err = collectRows(res)
		return err
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("begin the round and claim outbox rows: %w", err)
	}
	return r, rows, nil
}

// Lease leases start rows (ids) to a sender, each until its until: no
// dispatcher claims them before their lease lapses. Written with Commit.
func (r *Round) Lease(ids []int64, until []time.Time) {
	if len(ids) > 0 {
		r.writes.Queue(leaseSQL, ids, until)
	}
}

// Stamp gives start rows (ids) to carriers (carrierIDs, one per row):
// once the round commits, each batch is named, and a dispatcher that
// restarts it (CarrierRows) starts the same carrier with the same rows.
// Written with Commit.
func (r *Round) Stamp(ids []int64, carrierIDs []string) {
	if len(ids) > 0 {
		r.writes.Queue(`UPDATE outbox o SET carrier_id = v.carrier FROM unnest($1::bigint[], $2::text[]) AS v(id, carrier) WHERE o.id = v.id`,
			ids, carrierIDs)
	}
}

// Done deletes rows (OutboxDone). Written with Commit.
func (r *Round) Done(ids []int64) {
	if len(ids) > 0 {
		r.writes.Queue(doneSQL, ids)
	}
}

// CarrierRows sends the writes queued so far and reads every row of the
// given carriers, locking them (waiting for another dispatcher's lock, so
// a batch is never read in part).
func (r *Round) CarrierRows(ctx context.Context, carrierIDs []string) ([]outbox.Row, error) {
	var rows []outbox.Row
	r.writes.Queue(rowSelect+` WHERE o.carrier_id = ANY ($1) ORDER BY o.id FOR UPDATE OF o`, carrierIDs).Query(func(res pgx.Rows) error {
		var err error
		rows, err = collectRows(res)
		return err
	})
	if err := r.send(ctx); err != nil {
		return nil, fmt.Errorf("carrier rows: %w", err)
	}
	return rows, nil
}

// Commit sends the queued writes and COMMIT in one round trip and gives
// the connection back to the pool, as a pgx.Tx's Commit does: what the
// round does next (workflow starts, carriers, sequencers' wakes) takes
// connections of its own.
func (r *Round) Commit(ctx context.Context) error {
	r.writes.Queue("COMMIT")
	if err := r.send(ctx); err != nil {
		return fmt.Errorf("write the round's leases, stamps and deletes and commit: %w", err)
	}
	r.ended = true
	r.conn.Release()
	return nil
}

func (r *Round) send(ctx context.Context) error {
	b := r.writes
	r.writes = pgx.Batch{}
	return r.conn.SendBatch(ctx, &b).Close()
}

// Close rolls the round back unless it ended, and gives its connection
// back (a connection that cannot roll back is closed instead).
func (r *Round) Close() {
	if r.ended {
		return
	}
	r.ended = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = r.conn.Conn().Close(ctx)
	}
	r.conn.Release()
}
