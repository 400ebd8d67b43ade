package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Task statuses.
const (
	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusCompleted  = "completed"
	// StatusDead is a task that failed MaxAttempts times; Retry puts it back.
	StatusDead = "dead"
)

// Worker defaults.
const (
	LeaseDefault       = 30 * time.Second
	PollDefault        = 200 * time.Millisecond
	BatchDefault       = 16
	MaxBackoffDefault  = 5 * time.Minute
	BaseBackoffDefault = time.Second
	// MaxAttemptsDefault is how many times a task may fail before it is
	// dead.
	MaxAttemptsDefault = 10
)

// Worker runs pending tasks with Handle. Each claim takes a new lease
// number, kept alive by a heartbeat from the claim until the task's outcome
// is recorded; a handler starts only on a lease confirmed current. A task
// whose worker crashed is claimed again once its lease ends, and the old
// worker can no longer change it.
type Worker struct {
	Pool *pgxpool.Pool
	// Handle performs the side effect; it must pass task.IdempotencyKey()
	// to the external system. An error schedules a retry with backoff. Its
	// context ends when the lease is lost.
	Handle func(ctx context.Context, task Task) error
	// Lease is how long a claimed task is reserved; the heartbeat extends it
	// every Lease/3. Defaults to LeaseDefault.
	Lease time.Duration
	// Poll is the idle wait between claims. Defaults to PollDefault.
	Poll time.Duration
	// BaseBackoff and MaxBackoff bound retry waits (doubling per attempt).
	// Default to BaseBackoffDefault and MaxBackoffDefault.
	BaseBackoff, MaxBackoff time.Duration
	// MaxAttempts is how many failures make a task dead. Defaults to
	// MaxAttemptsDefault.
	MaxAttempts int
	// Logger receives failures. Defaults to slog.Default().
	Logger *slog.Logger
}

func (w *Worker) lease() time.Duration {
	if w.Lease <= 0 {
		return LeaseDefault
	}
	return w.Lease
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger == nil {
		return slog.Default()
	}
	return w.Logger
}

// Run works until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	poll := w.Poll
	if poll <= 0 {
		poll = PollDefault
	}
	for {
		n, err := w.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			w.logger().Warn("inbox worker", "err", err)
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// RunOnce claims a batch of due tasks (pending and due, or processing with
// an expired lease), each under a new lease number, runs them one after
// another and records each outcome. It returns how many it claimed.
//
// The lease of every claimed task is held from the claim on, by one
// heartbeat for the whole batch, and a handler starts only after its task's
// lease is confirmed current: a task waiting its turn in the batch is never
// taken by another worker meanwhile, and one that was (its lease lost) is
// skipped, so no handler runs on a lease that is not current.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	rows, err := w.Pool.Query(ctx, `
		UPDATE webhook_inbox_tasks t SET status = $3, attempts = attempts + 1, lease = lease + 1,
		       locked_until = now() + $1 * interval '1 millisecond'
		WHERE id IN (
		  SELECT id FROM webhook_inbox_tasks
		  WHERE (status = $4 AND run_after <= now()) OR (status = $3 AND locked_until < now())
		  ORDER BY run_after, id LIMIT $2
		  FOR UPDATE SKIP LOCKED)
		RETURNING id, source, event_id, kind, payload, attempts, lease`, w.lease().Milliseconds(), BatchDefault, StatusProcessing, StatusPending)
	if err != nil {
		return 0, fmt.Errorf("claim inbox tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Task])
	if err != nil {
		return 0, fmt.Errorf("claim inbox tasks: %w", err)
	}
	if len(tasks) == 0 {
		return 0, nil
	}
	h := newHeld(tasks)
	bctx, stop := context.WithCancel(ctx)
	beat := make(chan struct{})
	go func() { defer close(beat); w.heartbeat(bctx, h) }()
	defer func() { stop(); <-beat }()
	for _, t := range tasks {
		hctx, cancel := context.WithCancel(ctx)
		if !h.start(t.ID, cancel) {
			cancel()
			w.logger().Warn("inbox task lease lost before its turn; another worker owns it", "task", t.ID)
			continue
		}
		// The start is fenced too: the heartbeat may not have seen a loss.
		ok, err := w.fenced(ctx, t, `locked_until = now() + $4 * interval '1 millisecond'`, w.lease().Milliseconds())
		if err != nil || !ok {
			cancel()
			h.finish(t.ID)
			if err != nil {
				return len(tasks), fmt.Errorf("start inbox task %d: %w", t.ID, err)
			}
			w.logger().Warn("inbox task lease lost before its turn; another worker owns it", "task", t.ID)
			continue
		}
		err = w.run(ctx, hctx, t)
		cancel()
		h.finish(t.ID)
		if err != nil {
			return len(tasks), err
		}
	}
	return len(tasks), nil
}

// heartbeat extends the lease of every task h holds every Lease/3, in one
// statement, until ctx ends; a task whose lease is no longer current is
// lost: its handler is stopped, or never started.
func (w *Worker) heartbeat(ctx context.Context, h *held) {
	tick := time.NewTicker(w.lease() / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ids, leases := h.snapshot()
		if len(ids) == 0 {
			continue
		}
		rows, err := w.Pool.Query(ctx, `
			UPDATE webhook_inbox_tasks t SET locked_until = now() + $3 * interval '1 millisecond'
			FROM unnest($1::bigint[], $2::bigint[]) AS h(id, lease)
			WHERE t.id = h.id AND t.lease = h.lease AND t.status = $4
			RETURNING t.id`, ids, leases, w.lease().Milliseconds(), StatusProcessing)
		if err != nil {
			continue // tried again at the next tick, well within the lease
		}
		kept, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			continue
		}
		for _, id := range h.lose(ids, kept) {
			w.logger().Warn("inbox task lease lost; its handler is stopped", "task", id)
		}
	}
}

// held is the tasks a RunOnce holds leases on: claimed and not finished.
type held struct {
	mu     sync.Mutex
	leases map[int64]int64
	// cancel stops the running task's handler.
	cancel map[int64]context.CancelFunc
}

func newHeld(tasks []Task) *held {
	h := &held{leases: make(map[int64]int64, len(tasks)), cancel: map[int64]context.CancelFunc{}}
	for _, t := range tasks {
		h.leases[t.ID] = t.Lease
	}
	return h
}

// start marks task id running with its handler's cancel; false if its
// lease was lost.
func (h *held) start(id int64, cancel context.CancelFunc) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.leases[id]; !ok {
		return false
	}
	h.cancel[id] = cancel
	return true
}

// finish stops holding task id.
func (h *held) finish(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.leases, id)
	delete(h.cancel, id)
}

func (h *held) snapshot() (ids, leases []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, l := range h.leases {
		ids, leases = append(ids, id), append(leases, l)
	}
	return ids, leases
}

// lose drops the tasks of asked not in kept, stopping a running handler,
// and returns them.
func (h *held) lose(asked, kept []int64) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var lost []int64
	for _, id := range asked {
		if slices.Contains(kept, id) {
			continue
		}
		if _, ok := h.leases[id]; !ok {
			continue // finished meanwhile
		}
		lost = append(lost, id)
		delete(h.leases, id)
		if c := h.cancel[id]; c != nil {
			c()
		}
	}
	return lost
}

// run runs t's handler under hctx (ended by the heartbeat when the lease is
// lost) and records its outcome, fenced by t's lease.
func (w *Worker) run(ctx, hctx context.Context, t Task) error {
	herr := w.Handle(hctx, t)
	if herr == nil {
		ok, err := w.fenced(ctx, t, `status = $4, completed_at = now(), last_error = NULL, locked_until = NULL`, StatusCompleted)
		if err != nil {
			return fmt.Errorf("complete inbox task %d: %w", t.ID, err)
		}
		if !ok {
			w.logger().Warn("inbox task lease lost before completion; another worker owns it", "task", t.ID)
		}
		return nil
	}
	maxAttempts := w.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = MaxAttemptsDefault
	}
	var ok bool
	var err error
	if t.Attempts >= maxAttempts {
		ok, err = w.fenced(ctx, t, `status = $4, last_error = $5, locked_until = NULL`, StatusDead, herr.Error())
	} else {
		base, maxB := w.BaseBackoff, w.MaxBackoff
		if base <= 0 {
			base = BaseBackoffDefault
		}
		if maxB <= 0 {
			maxB = MaxBackoffDefault
		}
		wait := min(base<<min(t.Attempts-1, 20), maxB)
		ok, err = w.fenced(ctx, t, `status = $4, last_error = $5, locked_until = NULL, run_after = now() + $6 * interval '1 millisecond'`,
			StatusPending, herr.Error(), wait.Milliseconds())
	}
	if err != nil {
		return fmt.Errorf("reschedule inbox task %d: %w", t.ID, err)
	}
	if !ok {
		w.logger().Warn("inbox task lease lost before reschedule; another worker owns it", "task", t.ID)
	}
	return nil
}

// fenced updates task t only while t's lease is the current one; it
// reports whether it did.
func (w *Worker) fenced(ctx context.Context, t Task, set string, args ...any) (bool, error) {
	tag, err := w.Pool.Exec(ctx, `UPDATE webhook_inbox_tasks SET `+set+` WHERE id = $1 AND lease = $2 AND status = $3`,
		append([]any{t.ID, t.Lease, StatusProcessing}, args...)...)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// ErrNotDead: Retry found no dead task with that ID.
var ErrNotDead = errors.New("inbox: no such dead task")

// DeadTask is a task that failed MaxAttempts times.
type DeadTask struct {
	Task
	LastError string
}

// ListDead lists dead tasks, oldest first.
func ListDead(ctx context.Context, pool *pgxpool.Pool) ([]DeadTask, error) {
	rows, err := pool.Query(ctx, `SELECT id, source, event_id, kind, payload, attempts, lease, COALESCE(last_error, '')
		FROM webhook_inbox_tasks WHERE status = $1 ORDER BY id`, StatusDead)
	if err != nil {
		return nil, fmt.Errorf("list dead inbox tasks: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadTask, error) {
		var d DeadTask
		err := r.Scan(&d.ID, &d.Source, &d.EventID, &d.Kind, &d.Payload, &d.Attempts, &d.Lease, &d.LastError)
		return d, err
	})
}

// Retry puts a dead task back, due now, with its attempts reset.
func Retry(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	tag, err := pool.Exec(ctx, `UPDATE webhook_inbox_tasks SET status = $2, attempts = 0, run_after = now() WHERE id = $1 AND status = $3`,
		id, StatusPending, StatusDead)
	if err != nil {
		return fmt.Errorf("retry inbox task %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("retry inbox task %d: %w", id, ErrNotDead)
	}
	return nil
}

// Prune deletes completed tasks finished before now − keep, at most batch
// rows per statement, and returns how many it deleted. Pending, processing
// and dead tasks stay, and so do the dedupe rows: a replay long after must
// still be recognised.
func Prune(ctx context.Context, pool *pgxpool.Pool, now time.Time, keep time.Duration, batch int) (int, error) {
	total := 0
	for {
		tag, err := pool.Exec(ctx, `DELETE FROM webhook_inbox_tasks WHERE id IN (
			SELECT id FROM webhook_inbox_tasks WHERE status = $1 AND completed_at < $2 LIMIT $3)`, StatusCompleted, now.Add(-keep), batch)
		if err != nil {
			return total, fmt.Errorf("prune inbox tasks: %w", err)
		}
		total += int(tag.RowsAffected())
		if int(tag.RowsAffected()) < batch {
			return total, nil
		}
	}
}
