package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/store"
)

// refusingRecords is the real store whose RecordAttempts Postgres refuses
// (a transient error) the first `refuse` times.
type refusingRecords struct {
	*store.Store
	mu     sync.Mutex
	refuse int
}

func (s *refusingRecords) RecordAttempts(ctx context.Context, as []store.Attempt) ([]error, error) {
	s.mu.Lock()
	if s.refuse > 0 {
		s.refuse--
		s.mu.Unlock()
		return nil, &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}
	}
	s.mu.Unlock()
	return s.Store.RecordAttempts(ctx, as)
}

// runUnrecordedSender runs a sender-mode dispatcher on f's database, with
// fc for Temporal, whose attempts' records Postgres refuses past the
// activity's bounded retries (the first RecordRetries+1 statements).
func runUnrecordedSender(t *testing.T, f senderFixture, fc *fakeClient) {
	t.Helper()
	rs := &refusingRecords{Store: f.st, refuse: activities.RecordRetries + 1}
	d := &Dispatcher{
		Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler),
		Mode: ModeSender, Sender: &activities.Activities{Store: rs, HTTP: activities.NewHTTPClient(false),
			Logger: slog.New(slog.DiscardHandler), Breaker: &activities.Breaker{Misses: activities.BreakerMissesDefault}},
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestUnrecordedFirstAttemptIsNotSentAgain: a sender's first attempt that
// got no answer (timeout) and whose record Postgres refused past the
// activity's bounded retries comes back Unrecorded; its outcome is kept on
// its row before the row is held in the outbox (missHold, heldBack), so the
// round that takes the row again hands it off from that outcome: the
// receiver gets the request once, and its workflow records it.
func TestUnrecordedFirstAttemptIsNotSentAgain(t *testing.T) {
	// The receiver answers after 1 s; the endpoint's timeout is 100 ms; the
	// default schedule retries 5 s later.
	f := setupSender(t, time.Second, 100*time.Millisecond)
	fc := &fakeClient{}
	runUnrecordedSender(t, f, fc)

	id := f.publish(t)
	started := func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return slices.Contains(fc.starts, id)
	}
	// Wait until the delivery went to its workflow (with the unrecorded
	// result to record), or until the receiver was hit a second time.
	require.Eventually(t, func() bool { return started() || f.hits.Load() > 1 }, 25*time.Second, 20*time.Millisecond,
		"the first attempt never went to its workflow")
	require.Never(t, func() bool { return f.hits.Load() > 1 }, 500*time.Millisecond, 20*time.Millisecond,
		"attempt 1 was sent twice: its unrecorded result was held in the outbox with no outcome, then made again")
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, in := range fc.inputs {
		if in.DeliveryID == id {
			require.NotNil(t, in.Resume, "the workflow got no result to record")
			require.True(t, in.Resume.Result.Unrecorded, "the workflow was not told to record the first request")
		}
	}
}

// TestUnrecordedFirstAttemptHandOffRetriedIsNotSentAgain: a sender's first
// attempt that succeeded but whose record Postgres refused is handed off
// from the outcome kept on its row; when Temporal does not take the first
// start, the next round hands it off again from that outcome, without a
// second send.
func TestUnrecordedFirstAttemptHandOffRetriedIsNotSentAgain(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	ctx := context.Background()
	fc := &fakeClient{err: errors.New("temporal: unavailable")}
	runUnrecordedSender(t, f, fc)

	id := f.publish(t)
	require.Eventually(t, func() bool { return f.hits.Load() >= 1 }, 20*time.Second, 10*time.Millisecond)
	// The first hand-off fails (Temporal down), then Temporal is back.
	require.Eventually(t, func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		if fc.refused == 0 {
			return false
		}
		fc.err = nil
		return true
	}, 20*time.Second, 10*time.Millisecond, "the hand-off was tried")
	require.Eventually(t, func() bool {
		fc.mu.Lock()
		started := slices.Contains(fc.starts, id)
		fc.mu.Unlock()
		var rows int
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE delivery_id = $1`, id).Scan(&rows))
		return started || rows == 0 || f.hits.Load() > 1
	}, 30*time.Second, 20*time.Millisecond, "never handed off")
	require.Never(t, func() bool { return f.hits.Load() > 1 }, 300*time.Millisecond, 20*time.Millisecond,
		"attempt 1 was sent again after its hand-off failed: the row had no recorded outcome")
}
