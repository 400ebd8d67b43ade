package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Worker defaults.
const (
	LeaseDefault       = 30 * time.Second
	PollDefault        = 200 * time.Millisecond
	BatchDefault       = 16
	MaxBackoffDefault  = 5 * time.Minute
	BaseBackoffDefault = time.Second
)

// Worker runs pending tasks with Handle. A task whose worker crashed is
// claimed again once its lease ends.
type Worker struct {
	Pool *pgxpool.Pool
	// Handle performs the side effect; it must pass task.IdempotencyKey()
	// to the external system. An error schedules a retry with backoff.
	Handle func(ctx context.Context, task Task) error
	// Lease is how long a claimed task is reserved. Defaults to LeaseDefault.
	Lease time.Duration
	// Poll is the idle wait between claims. Defaults to PollDefault.
	Poll time.Duration
	// BaseBackoff and MaxBackoff bound retry waits (doubling per attempt).
	BaseBackoff, MaxBackoff time.Duration
	Logger                  *slog.Logger
}

// Run works until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	poll := w.Poll
	if poll <= 0 {
		poll = PollDefault
	}
	for {
		n, err := w.RunOnce(ctx)
		if err != nil && ctx.Err() == nil && w.Logger != nil {
			w.Logger.Warn("inbox worker", "err", err)
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
// an expired lease), runs them and records each outcome. It returns how
// many it claimed.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	lease := w.Lease
	if lease <= 0 {
		lease = LeaseDefault
	}
	rows, err := w.Pool.Query(ctx, `
		UPDATE webhook_inbox_tasks t SET status = 'processing', attempts = attempts + 1,
		       locked_until = now() + $1 * interval '1 millisecond'
		WHERE id IN (
		  SELECT id FROM webhook_inbox_tasks
		  WHERE (status = 'pending' AND run_after <= now()) OR (status = 'processing' AND locked_until < now())
		  ORDER BY run_after, id LIMIT $2
		  FOR UPDATE SKIP LOCKED)
		RETURNING id, source, event_id, kind, payload, attempts`, lease.Milliseconds(), BatchDefault)
	if err != nil {
		return 0, fmt.Errorf("claim inbox tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Task])
	if err != nil {
		return 0, fmt.Errorf("claim inbox tasks: %w", err)
	}
	for _, t := range tasks {
		if err := w.run(ctx, t); err != nil {
			return len(tasks), err
		}
	}
	return len(tasks), nil
}

func (w *Worker) run(ctx context.Context, t Task) error {
	herr := w.Handle(ctx, t)
	if herr == nil {
		_, err := w.Pool.Exec(ctx, `UPDATE webhook_inbox_tasks SET status = 'completed', completed_at = now(), last_error = NULL, locked_until = NULL WHERE id = $1`, t.ID)
		if err != nil {
			return fmt.Errorf("complete inbox task %d: %w", t.ID, err)
		}
		return nil
	}
	base, maxB := w.BaseBackoff, w.MaxBackoff
	if base <= 0 {
		base = BaseBackoffDefault
	}
	if maxB <= 0 {
		maxB = MaxBackoffDefault
	}
	wait := base << min(t.Attempts-1, 20)
	wait = min(wait, maxB)
	_, err := w.Pool.Exec(ctx, `UPDATE webhook_inbox_tasks SET status = 'pending', last_error = $2, locked_until = NULL,
		run_after = now() + $3 * interval '1 millisecond' WHERE id = $1`, t.ID, herr.Error(), wait.Milliseconds())
	if err != nil {
		return fmt.Errorf("reschedule inbox task %d: %w", t.ID, err)
	}
	return nil
}
