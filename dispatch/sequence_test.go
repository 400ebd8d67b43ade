package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
	"hookrelay/workflows"
)

// TestRunSequenceOfAGoneSequenceIsEmpty: a sequence whose counter row is
// gone (its app was deleted: the row cascades with the endpoint, and the
// deliveries with the app) is empty. Its sequencer must end, not look
// again every sequenceHold for a lease it can never take.
func TestRunSequenceOfAGoneSequenceIsEmpty(t *testing.T) {
	st := pg.Store(t, "seqgone")
	d := &Dispatcher{Pool: st.Pool(), Sequencer: &activities.Activities{}, Logger: slog.New(slog.DiscardHandler)}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(d.RunSequence, activity.RegisterOptions{Name: workflows.RunSequenceName})
	v, err := env.ExecuteActivity(workflows.RunSequenceName, workflows.SequenceRun{EndpointID: "ep_gone", OrderingKey: "k"})
	require.NoError(t, err)
	var step workflows.SequenceStep
	require.NoError(t, v.Get(&step))
	require.True(t, step.Empty, "no sequence: nothing left to send (got %+v)", step)
	require.True(t, step.NextAt.IsZero(), "no look again at %v", step.NextAt)
}

// TestDeletedEndpointsBlockingDeadLetterEndsItsSequence: deleting a fifo
// endpoint cancels its sequences (contract section 14); a dead letter that
// blocked one can no longer be replayed (its endpoint is gone), so it must
// not keep the sequence open, and its sequencer running, forever.
func TestDeletedEndpointsBlockingDeadLetterEndsItsSequence(t *testing.T) {
	ctx := context.Background()
	st := pg.Store(t, "seqdel")
	app, err := st.CreateApp(ctx, store.App{Name: "acme"})
	require.NoError(t, err)
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: "https://example.com/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: time.Second, Headers: map[string]string{},
		Ordering: delivery.OrderingFIFO, FIFOOnDeadLetter: delivery.DeadLetterBlock})
	require.NoError(t, err)
	tx, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	p, err := outbox.Publish(ctx, tx, app.ID, outbox.Event{Type: "ledger.entry", Data: json.RawMessage(`{}`), OrderingKey: "k"})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	id := p.Deliveries[0].ID
	_, err = st.Pool().Exec(ctx, `UPDATE deliveries SET status = 'dead_lettered' WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `DELETE FROM outbox WHERE delivery_id = $1`, id)
	require.NoError(t, err)
	h, ok, err := store.SequenceHead(ctx, st.Pool(), ep.ID, "k")
	require.NoError(t, err)
	require.True(t, ok, "the dead letter blocks")
	require.Equal(t, id, h.DeliveryID)

	require.NoError(t, st.DeleteEndpoint(ctx, app.ID, ep.ID))
	_, ok, err = store.SequenceHead(ctx, st.Pool(), ep.ID, "k")
	require.NoError(t, err)
	require.False(t, ok, "a deleted endpoint's sequence has nothing open")
}

// fifoHead makes f's endpoint fifo, publishes one event of key and
// returns its delivery, the head of its sequence with its start row.
func (f senderFixture) fifoHead(t *testing.T, key string) (string, store.Head) {
	t.Helper()
	ctx := context.Background()
	fifo := delivery.OrderingFIFO
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Ordering: &fifo})
	require.NoError(t, err)
	p, err := outbox.PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: key})
	require.NoError(t, err)
	h, ok, err := store.SequenceHead(ctx, f.st.Pool(), f.ep.ID, key)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotNil(t, h.Row, "the head's start row waits")
	return p.Deliveries[0].ID, h
}

// TestReplayedHeadIsNotSentFromItsStaleStartRow: a sequencer run read the
// head's start row (it waits for the head's due time, or is about to send
// it); meanwhile the endpoint is disabled (the head is canceled), enabled
// again and the canceled head replayed, which deletes its start row and
// queues a replay (cycle 2). The run must not then make the first attempt
// of cycle 1 from the row it holds in memory: the replay sends the event,
// and the receiver would get it twice.
func TestReplayedHeadIsNotSentFromItsStaleStartRow(t *testing.T) {
	ctx := context.Background()
	f := setupSender(t, 0, time.Second)
	id, h := f.fifoHead(t, "k")

	yes, no := true, false
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &yes})
	require.NoError(t, err)
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &no})
	require.NoError(t, err)
	queued, err := store.ReplayDeliveries(ctx, f.st.Pool(), f.app.ID, []string{id}, "test", "test")
	require.NoError(t, err)
	require.Equal(t, []string{id}, queued, "the canceled head is replayed")

	d := &Dispatcher{Pool: f.st.Pool(), Client: &fakeClient{}, Logger: slog.New(slog.DiscardHandler),
		Sequencer: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)}}
	_, _ = d.sendHead(ctx, *h.Row, time.Now().Add(workflows.SequenceRunBudget), func() (bool, error) { return true, nil })
	require.Zero(t, f.hits.Load(), "the stale start row of a replayed head sends nothing")
	var cycle int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM attempts WHERE delivery_id = $1 AND cycle = 1`, id).Scan(&cycle))
	require.Zero(t, cycle, "no attempt of cycle 1 after its replay")
}

// TestCanceledQueuedReplayOfOrderedDeliveryReplaysAgain: an ordered
// delivery's replay queued behind its sequence's head is canceled with the
// rest of the sequence by a disable. Its replay row is never sent (the
// sequencer reads only open deliveries) and never stale (its replay never
// ran): once the endpoint is enabled again, the delivery must replay
// (contract 14: a canceled ordered delivery replays once enabled), and the
// dead row must not be woken for every SequenceLease forever.
func TestCanceledQueuedReplayOfOrderedDeliveryReplaysAgain(t *testing.T) {
	for _, dropped := range []bool{false, true} {
		t.Run(map[bool]string{false: "replayed", true: "dropped"}[dropped], func(t *testing.T) { canceledQueuedReplay(t, dropped) })
	}
}

func canceledQueuedReplay(t *testing.T, dropped bool) {
	ctx := context.Background()
	f := setupSender(t, 0, time.Second)
	fifo := delivery.OrderingFIFO
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Ordering: &fifo})
	require.NoError(t, err)
	var ids []string
	for range 2 {
		p, err := outbox.PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: "k"})
		require.NoError(t, err)
		ids = append(ids, p.Deliveries[0].ID)
	}
	// The first went out; the second is the head, in its own workflow.
	_, err = f.st.Pool().Exec(ctx, `UPDATE deliveries SET status = 'succeeded' WHERE id = $1`, ids[0])
	require.NoError(t, err)
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	queued, err := store.ReplayDeliveries(ctx, f.st.Pool(), f.app.ID, []string{ids[0]}, "test", "test")
	require.NoError(t, err)
	require.Equal(t, []string{ids[0]}, queued)

	yes, no := true, false
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &yes})
	require.NoError(t, err)
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &no})
	require.NoError(t, err)
	var status delivery.Status
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT status FROM deliveries WHERE id = $1`, ids[0]).Scan(&status))
	require.Equal(t, delivery.StatusCanceled, status)
	if dropped {
		// A dispatcher round drops the dead replay row instead of waking
		// the sequence for it (again every SequenceLease).
		fc := &fakeClient{}
		d := &Dispatcher{Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler)}
		d.SetCarrierSize(1)
		_, err := d.dispatch(ctx, 100)
		require.NoError(t, err)
		var rows int
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE delivery_id = $1 AND kind <> $2`, ids[0], outbox.KindCancel).Scan(&rows))
		require.Zero(t, rows, "the canceled replay's row is dropped")
		for _, sig := range fc.signals {
			require.NotContains(t, sig, "sequencer/", "no wake for it")
		}
	}
	queued, err = store.ReplayDeliveries(ctx, f.st.Pool(), f.app.ID, []string{ids[0]}, "test", "test")
	require.NoError(t, err)
	require.Equal(t, []string{ids[0]}, queued, "the canceled delivery replays once enabled")
	var rows int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE delivery_id = $1 AND kind <> $2`, ids[0], outbox.KindCancel).Scan(&rows))
	require.Equal(t, 1, rows, "one replay row queued")
}

// TestHeadNotSentWithoutTheHold: a run that lost its hold while it waited
// for its head's due time (a frozen worker, its hold taken by another
// run) sends nothing: the hold is asked again just before the request.
func TestHeadNotSentWithoutTheHold(t *testing.T) {
	ctx := context.Background()
	f := setupSender(t, 0, time.Second)
	_, h := f.fifoHead(t, "k")
	d := &Dispatcher{Pool: f.st.Pool(), Client: &fakeClient{}, Logger: slog.New(slog.DiscardHandler),
		Sequencer: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)}}
	// Due within the run's own wait (SequenceWaitInRun).
	row := *h.Row
	row.Settings.Schedule = []time.Duration{workflows.SequenceWaitInRun / 2, time.Second}
	_, err := d.sendHead(ctx, row, time.Now().Add(workflows.SequenceRunBudget), func() (bool, error) { return false, nil })
	require.Error(t, err)
	require.Zero(t, f.hits.Load(), "a run without its hold sends nothing")
}

// TestOnlyAnEndedWorkflowAbandonsItsHead: a sequence's head whose workflow
// is running or paused by hand stays the head; one whose workflow ended
// without recording an outcome (terminated, failed, gone) becomes a dead
// letter, replayable, so a block sequence holds as for any dead letter
// instead of moving on.
func TestOnlyAnEndedWorkflowAbandonsItsHead(t *testing.T) {
	ctx := context.Background()
	f := setupSender(t, 0, time.Second)
	fifo, block := delivery.OrderingFIFO, delivery.DeadLetterBlock
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Ordering: &fifo, FIFOOnDeadLetter: &block})
	require.NoError(t, err)
	fc := &fakeClient{status: map[string]enumspb.WorkflowExecutionStatus{}}
	d := &Dispatcher{Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler),
		Sequencer: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)}}
	for _, c := range []struct {
		status enumspb.WorkflowExecutionStatus
		found  bool
		ended  bool
	}{
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, true, false},
		{enumspb.WORKFLOW_EXECUTION_STATUS_PAUSED, true, false},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, true, true},
		{enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, true, true},
		{enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, false, true},
	} {
		p, err := outbox.PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: c.status.String()})
		require.NoError(t, err)
		id := p.Deliveries[0].ID
		// In its own workflow: its start row is gone, the delivery is
		// delivering.
		_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox WHERE delivery_id = $1`, id)
		require.NoError(t, err)
		_, err = f.st.Pool().Exec(ctx, `UPDATE deliveries SET status = 'delivering' WHERE id = $1`, id)
		require.NoError(t, err)
		if c.found {
			fc.status[id] = c.status
		}
		moved, err := d.releaseIfAbandoned(ctx, id, 1)
		require.NoError(t, err, c.status.String())
		require.Equal(t, c.ended, moved, c.status.String())
		del, err := f.st.GetDelivery(ctx, f.app.ID, id)
		require.NoError(t, err)
		h, ok, err := store.SequenceHead(ctx, f.st.Pool(), f.ep.ID, c.status.String())
		require.NoError(t, err)
		require.True(t, ok, "%s: the head stays in its block sequence", c.status)
		require.Equal(t, id, h.DeliveryID)
		if !c.ended {
			require.Equal(t, delivery.StatusDelivering, del.Status, c.status.String())
			continue
		}
		require.Equal(t, delivery.StatusDeadLettered, del.Status, c.status.String())
		require.NotNil(t, del.DeadLetterReason)
		require.Contains(t, *del.DeadLetterReason, "replay it", c.status.String())
	}
}
