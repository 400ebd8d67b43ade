package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// TestWorkflowModeStartsEachDeliveryAtItsDueTime: in the default mode the
// dispatcher sends nothing itself. It holds each new delivery's row for its
// first wait and starts the delivery's DeliveryWorkflow, eagerly, at the
// due time (Input.FirstDue, counted from acceptance), then deletes the row;
// attempt 1 is local while its endpoint has a place (LocalFirsts).
func TestWorkflowModeStartsEachDeliveryAtItsDueTime(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	const n = 6
	ids := map[string]bool{}
	for range n {
		ids[f.publish(t)] = true
	}
	fc := &fakeClient{}
	d := &Dispatcher{Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler),
		Sender: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler), Local: &activities.LocalFirsts{}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	f.waitOutboxEmpty(t)
	cancel()
	<-done
	require.Zero(t, f.hits.Load(), "the dispatcher made no request itself")
	fc.mu.Lock()
	defer fc.mu.Unlock()
	require.Len(t, fc.inputs, n, "one DeliveryWorkflow per delivery")
	local := 0
	for i, in := range fc.inputs {
		require.True(t, ids[in.DeliveryID])
		require.True(t, fc.eager[i], "started eagerly")
		del, err := f.st.GetDelivery(context.Background(), f.app.ID, in.DeliveryID)
		require.NoError(t, err)
		due := del.CreatedAt.Add(delivery.Jitter(delivery.DefaultSchedule()[0], in.DeliveryID, 1))
		require.WithinDuration(t, due, in.FirstDue, 5*time.Millisecond, "due counted from acceptance")
		require.False(t, fc.startedAt[i].Before(in.FirstDue), "started %s before its due time", in.FirstDue.Sub(fc.startedAt[i]))
		require.Less(t, fc.startedAt[i].Sub(in.FirstDue), time.Second, "started at its due time")
		if in.FirstLocal {
			local++
		}
	}
	require.Equal(t, activities.LocalFirstsPerEndpoint, local, "one endpoint: as many local first attempts as its places")
	require.EqualValues(t, n, d.Local()+int64(n-local))
}

// TestWorkflowModeTakesIngestRows: rows an ingest in this process leased to
// the dispatcher (Handoff, Take) start their workflows with no round.
func TestWorkflowModeTakesIngestRows(t *testing.T) {
	fc := &fakeClient{}
	f, d, stop := setupHandoff(t, 0, time.Second, func(d *Dispatcher) { d.Mode, d.Client = ModeWorkflow, fc })
	h, ok := d.Handoff(f.app.ID)
	require.True(t, ok)
	p := f.publishHandoff(t, h)
	require.Len(t, p.Leased, 1)
	d.Take(p.Leased)
	f.waitOutboxEmpty(t)
	stop()
	require.Zero(t, f.hits.Load(), "the workflow makes the attempt, not the dispatcher")
	fc.mu.Lock()
	defer fc.mu.Unlock()
	require.Len(t, fc.inputs, 1)
	require.Equal(t, p.Leased[0].DeliveryID, fc.inputs[0].DeliveryID)
	require.False(t, fc.inputs[0].FirstDue.IsZero())
	require.EqualValues(t, 1, d.Taken())
}

// TestPauseHoldsClaimedFirstAttempts: an endpoint paused after its rows
// were claimed (held for their first wait) holds them in the outbox in
// every mode: nothing is started or sent at the due time, and the resume
// lets them go at once with the rows accepted during the pause (no
// workflow waits out a paused endpoint's recheck).
func TestPauseHoldsClaimedFirstAttempts(t *testing.T) {
	for _, mode := range []Mode{ModeWorkflow, ModeSender} {
		t.Run(string(mode), func(t *testing.T) {
			f := setupSender(t, 0, time.Second)
			ctx := context.Background()
			before := f.publish(t)
			fc := &fakeClient{}
			d := &Dispatcher{Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler), Mode: mode,
				Sender: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)}}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = d.Run(rctx) }()
			defer func() { cancel(); <-done }()
			require.Eventually(t, func() bool { return f.leasedUntil(t, before) != nil }, 5*time.Second, 5*time.Millisecond, "claimed")
			yes, no := true, false
			_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Paused: &yes})
			require.NoError(t, err)
			during := f.publish(t)
			// Past the first wait (1 s ± 10 %), nothing starts or is sent.
			require.Never(t, func() bool {
				fc.mu.Lock()
				defer fc.mu.Unlock()
				return len(fc.inputs) > 0 || f.hits.Load() > 0
			}, 1500*time.Millisecond, 10*time.Millisecond, "a workflow started, or a request sent, for a paused endpoint")
			require.Eventually(t, func() bool { return f.leasedUntil(t, before) == nil }, 5*time.Second, 5*time.Millisecond,
				"the claimed row waits in the outbox, unleased")
			resumed := time.Now()
			_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Paused: &no})
			require.NoError(t, err)
			f.waitOutboxEmpty(t)
			require.Less(t, time.Since(resumed), 5*time.Second, "the resume lets them go at once")
			if mode == ModeWorkflow {
				fc.mu.Lock()
				defer fc.mu.Unlock()
				require.Len(t, fc.inputs, 2)
				return
			}
			f.waitSucceeded(t, before)
			f.waitSucceeded(t, during)
			require.EqualValues(t, 2, f.hits.Load())
		})
	}
}

// TestOneAppCannotFillTheHeldRows: an app whose rows are not yet due holds
// at most its share of the dispatcher's held rows (AppHeldMax); its other
// rows wait in the outbox, so another app's first attempt is started on
// time and a cancel is dispatched meanwhile.
func TestOneAppCannotFillTheHeldRows(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	ctx := context.Background()
	later := []time.Duration{5 * time.Second}
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{RetrySchedule: &later})
	require.NoError(t, err)
	for range 20 { // more than HeldMax
		f.publish(t)
	}
	other, err := f.st.CreateApp(ctx, store.App{Name: "quiet"})
	require.NoError(t, err)
	_, _, err = f.st.CreateEndpoint(ctx, store.Endpoint{AppID: other.ID, URL: "http://127.0.0.1:9/hook", Environment: "live",
		RetrySchedule: []time.Duration{0}, Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	fc := &fakeClient{}
	d := &Dispatcher{Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler), HeldMax: 16, Batch: 4,
		Sender: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)}}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(rctx) }()
	defer func() { cancel(); <-done }()
	// The rows the busy app holds (a round's reservation in held comes and
	// goes with each round).
	busy := func() int {
		d.appMu.Lock()
		defer d.appMu.Unlock()
		return d.appHeld[f.app.ID]
	}
	require.Eventually(t, func() bool { return busy() == 16/AppHeldShare }, 5*time.Second, 5*time.Millisecond,
		"the busy app holds its share")
	require.Never(t, func() bool { return busy() > 16/AppHeldShare }, 300*time.Millisecond, 5*time.Millisecond, "and no more")
	accepted := time.Now()
	quiet, err := outbox.PublishNow(ctx, f.st.Pool(), other.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		for _, in := range fc.inputs {
			if in.DeliveryID == quiet.Deliveries[0].ID {
				return true
			}
		}
		return false
	}, 3*time.Second, 5*time.Millisecond, "the quiet app's delivery starts beside the busy app's backlog")
	require.Less(t, time.Since(accepted), 2*time.Second)
}
