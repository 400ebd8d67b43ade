package inbox

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Backlog guard defaults.
const (
	// BacklogSampleDefault is how often a BacklogGuard reads the backlog.
	BacklogSampleDefault = 250 * time.Millisecond
	// BacklogRetryAfterDefault is the Retry-After a shed request is told.
	BacklogRetryAfterDefault = 5 * time.Second
)

// Backlog returns the task inbox's load: tasks not yet done (pending or
// processing) and how long the oldest of them has waited.
func Backlog(ctx context.Context, pool *pgxpool.Pool) (waiting int, oldest time.Duration, err error) {
	var ageMS float64
	err = pool.QueryRow(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)) * 1000, 0)
		FROM webhook_inbox_tasks WHERE status IN ($1, $2)`, StatusPending, StatusProcessing).Scan(&waiting, &ageMS)
	if err != nil {
		return 0, 0, fmt.Errorf("inbox backlog: %w", err)
	}
	return waiting, time.Duration(ageMS * float64(time.Millisecond)), nil
}

// BacklogGuard sheds webhooks while the task inbox is behind, so the
// sender's retry schedule holds the queue instead of the receiver's
// database: pass its Busy to webhook.Options.
type BacklogGuard struct {
	Pool *pgxpool.Pool
	// MaxWaiting sheds while more tasks than this wait; 0 ignores the count.
	MaxWaiting int
	// MaxAge sheds while the oldest waiting task is older; 0 ignores it.
	MaxAge time.Duration
	// Sample is how often the backlog is read. Defaults to
	// BacklogSampleDefault.
	Sample time.Duration
	// RetryAfter is what a shed request is told. Defaults to
	// BacklogRetryAfterDefault.
	RetryAfter time.Duration

	mu      sync.Mutex
	readAt  time.Time
	behind  bool
	readErr error
}

// Busy reports whether to shed now and the Retry-After to answer.
func (g *BacklogGuard) Busy(r *http.Request) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sample := g.Sample
	if sample <= 0 {
		sample = BacklogSampleDefault
	}
	if time.Since(g.readAt) >= sample {
		waiting, oldest, err := Backlog(r.Context(), g.Pool)
		g.readAt, g.readErr = time.Now(), err
		g.behind = err == nil && ((g.MaxWaiting > 0 && waiting > g.MaxWaiting) || (g.MaxAge > 0 && oldest > g.MaxAge))
	}
	retry := g.RetryAfter
	if retry <= 0 {
		retry = BacklogRetryAfterDefault
	}
	return retry, g.behind
}
