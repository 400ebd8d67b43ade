package dispatch

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
)

// TestFirstAttemptOfASilentEndpointWaitsInTheOutbox: once its endpoint
// stopped answering (its breaker open), a first attempt sends nothing,
// records nothing and starts no workflow: its row waits in the outbox,
// leased until the probe, and its delivery stays pending. Past the
// cool-down the row's attempt probes the endpoint; with no answer it goes
// to its DeliveryWorkflow like any failed first attempt.
func TestFirstAttemptOfASilentEndpointWaitsInTheOutbox(t *testing.T) {
	// Every request times out: the receiver answers after 1 s, the
	// endpoint's timeout is 100 ms.
	f := setupSender(t, time.Second, 100*time.Millisecond)
	ctx := context.Background()
	fc := &fakeClient{}
	d := &Dispatcher{
		Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler),
		Sender: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler),
			Breaker: &activities.Breaker{Misses: 1, Cooldown: 3 * time.Second}},
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	started := func(id string) func() bool {
		return func() bool {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return slices.Contains(fc.starts, id)
		}
	}
	first := f.publish(t)
	require.Eventually(t, started(first), 20*time.Second, 20*time.Millisecond, "the first delivery's failed attempt was not handed off")
	second := f.publish(t)
	require.Eventually(t, func() bool { return d.Held() > 0 }, 20*time.Second, 20*time.Millisecond, "the second delivery's first attempt was not held")
	var leased bool
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT leased_until > now() FROM outbox WHERE delivery_id = $1`, second).Scan(&leased))
	require.True(t, leased, "the held row is not leased until the probe")
	var attempts int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM attempts WHERE delivery_id = $1`, second).Scan(&attempts))
	require.Zero(t, attempts, "a held first attempt was recorded")
	dl, err := f.st.GetDelivery(ctx, f.app.ID, second)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusPending, dl.Status)
	require.EqualValues(t, 1, f.hits.Load(), "a held first attempt was sent")
	require.False(t, started(second)(), "a held first attempt started a workflow")
	// Past the cool-down the held row's attempt is the probe.
	require.Eventually(t, started(second), 20*time.Second, 20*time.Millisecond, "the held first attempt was never made")
	require.EqualValues(t, 2, f.hits.Load())
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM attempts WHERE delivery_id = $1`, second).Scan(&attempts))
	require.Equal(t, 1, attempts)
}
