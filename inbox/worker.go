package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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
	MaxBackoffDefault  = 5 * time.Minute
	BaseBackoffDefault = time.Second
	// MaxAttemptsDefault is how many times a task may fail before it is
	// dead.
	MaxAttemptsDefault = 10
)

// Worker runs pending tasks with Handle, one at a time: each is claimed
// when it runs, under a new lease number kept alive by a heartbeat until
// its outcome is recorded. A task whose worker crashed is claimed again
// once its lease ends, and the old worker can no longer change it; a
// handler whose lease is lost, or cannot be confirmed, is stopped.
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

// RunOnce claims the next due task (pending and due, or processing with an
// expired lease) under a new lease number, runs it and records its outcome.
// It returns how many it claimed (0 or 1). A task is claimed only when it
// runs, so none waits on a lease behind another task's handler.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	claimed := time.Now() // no later than the lease's start
	rows, err := w.Pool.Query(ctx, `
		UPDATE webhook_inbox_tasks t SET status = $2, attempts = attempts + 1, lease = lease + 1,
		       locked_until = now() + $1 * interval '1 millisecond'
		WHERE id IN (
		  SELECT id FROM webhook_inbox_tasks
		  WHERE (status = $3 AND run_after <= now()) OR (status = $2 AND locked_until < now())
		  ORDER BY run_after, id LIMIT 1
		  FOR UPDATE SKIP LOCKED)
		RETURNING id, source, event_id, kind, payload, attempts, lease`, w.lease().Milliseconds(), StatusProcessing, StatusPending)
	if err != nil {
		return 0, fmt.Errorf("claim inbox task: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Task])
	if err != nil {
		return 0, fmt.Errorf("claim inbox task: %w", err)
	}
	if len(tasks) == 0 {
		return 0, nil
	}
	return 1, w.run(ctx, tasks[0], claimed)
}

// Why a handler's context ended early (context.Cause).
var (
	errLeaseLost = errors.New("inbox: the task's lease was taken by another worker")
	// errLeaseUnconfirmed: no heartbeat succeeded for two thirds of a
	// lease (the database unreachable, the pool exhausted), so the lease
	// may lapse at any moment and another worker take the task.
	errLeaseUnconfirmed = errors.New("inbox: the task's lease could not be extended in time")
)

// run runs t's handler while a heartbeat extends its lease every Lease/3
// (claimed at claimed), and records the outcome, fenced by the lease. The
// handler's context ends when the lease is lost, or when no extension
// succeeded for two thirds of a lease; then nothing is recorded and the
// task runs again once its lease lapses (its IdempotencyKey makes that
// safe).
func (w *Worker) run(ctx context.Context, t Task, claimed time.Time) error {
	hctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	stop, beat := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(beat)
		lease := w.lease()
		tick := time.NewTicker(lease / 3)
		defer tick.Stop()
		confirmed := claimed
		for {
			select {
			case <-stop:
				return
			case <-hctx.Done():
				return
			case <-tick.C:
			}
			at := time.Now()
			ok, err := w.fenced(hctx, t, `locked_until = now() + $4 * interval '1 millisecond'`, lease.Milliseconds())
			switch {
			case err == nil && ok:
				confirmed = at
			case err == nil:
				w.logger().Warn("inbox task lease lost; its handler is stopped", "task", t.ID)
				lose(errLeaseLost)
				return
			case time.Since(confirmed) >= 2*lease/3:
				w.logger().Warn("inbox task lease could not be extended; its handler is stopped", "task", t.ID, "err", err)
				lose(errLeaseUnconfirmed)
				return
			}
		}
	}()
	herr := w.handle(hctx, t)
	close(stop)
	<-beat
	if cause := context.Cause(hctx); errors.Is(cause, errLeaseLost) || errors.Is(cause, errLeaseUnconfirmed) {
		return nil // another worker's, or soon; nothing of this run is recorded
	}
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

// PanicStackMax bounds the stack a PanicError keeps (and its task's
// last_error shows).
const PanicStackMax = 4 << 10

// PanicError is a handler's panic, recovered: the task's attempt failed
// (it counts toward MaxAttempts, and its last_error shows the value and
// the stack), instead of the task staying processing and running again for
// ever. A panic in a goroutine the handler started is not recoverable here
// and still ends the process.
type PanicError struct {
	// Value is what the handler panicked with.
	Value string
	// Stack is the panicking goroutine's stack, at most PanicStackMax
	// bytes.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("inbox: handler panicked: %s\n%s", e.Value, e.Stack)
}

// handle runs Handle, turning its panic into a *PanicError.
func (w *Worker) handle(ctx context.Context, t Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			perr := &PanicError{Value: fmt.Sprint(r), Stack: stack[:min(len(stack), PanicStackMax)]}
			w.logger().Error("inbox handler panicked; the attempt failed", "task", t.ID, "panic", perr.Value)
			err = perr
		}
	}()
	return w.Handle(ctx, t)
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
