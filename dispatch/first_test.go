package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/internal/testenv"
	"hookrelay/outbox"
	"hookrelay/store"
	"hookrelay/workflows"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

// fakeClient stands in for Temporal (the database is real): it records
// workflow starts and signals, failing them with err when set; every other
// call panics.
type fakeClient struct {
	client.Client
	mu  sync.Mutex
	err error
	// refused counts the starts err refused.
	refused int
	starts  []string
	signals []string
	// inputs and startedAt are each DeliveryWorkflow start's input and
	// time; eager, each start's EnableEagerStart.
	inputs    []workflows.Input
	startedAt []time.Time
	eager     []bool
	// replays holds each replay signal sent with a start.
	replays []workflows.ReplaySignal
	// lastQueue is the task queue of the last signal-with-start.
	lastQueue string
	// status answers DescribeWorkflowExecution by workflow ID; none is
	// NotFound.
	status map[string]enumspb.WorkflowExecutionStatus
}

func (c *fakeClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.status[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: st}}, nil
}

func (c *fakeClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		c.refused++
		return nil, c.err
	}
	c.starts = append(c.starts, o.ID)
	if len(args) == 1 {
		if in, ok := args[0].(workflows.Input); ok {
			c.inputs, c.startedAt, c.eager = append(c.inputs, in), append(c.startedAt, time.Now()), append(c.eager, o.EnableEagerStart)
		}
	}
	return nil, nil
}

func (c *fakeClient) SignalWorkflow(_ context.Context, id, _ string, name string, _ any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.signals = append(c.signals, id+":"+name)
	return nil
}

func (c *fakeClient) SignalWithStartWorkflow(_ context.Context, id, name string, arg any, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	c.lastQueue = opts.TaskQueue
	c.signals = append(c.signals, id+":"+name)
	if sig, ok := arg.(workflows.ReplaySignal); ok {
		c.replays = append(c.replays, sig)
	}
	return nil, nil
}

type senderFixture struct {
	st   *store.Store
	app  store.App
	ep   store.Endpoint
	hits *atomic.Int64
}

func setupSender(t *testing.T, answer time.Duration, timeout time.Duration) senderFixture {
	t.Helper()
	ctx := context.Background()
	st := pg.Store(t, "dispatch")
	hits := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		time.Sleep(answer)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	app, err := st.CreateApp(ctx, store.App{Name: "acme"})
	require.NoError(t, err)
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: app.ID, URL: srv.URL + "/hook", Environment: "live",
		RetrySchedule: delivery.DefaultSchedule(), Deadline: time.Hour, RequestTimeout: timeout})
	require.NoError(t, err)
	return senderFixture{st: st, app: app, ep: ep, hits: hits}
}

func (f senderFixture) publish(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	p, err := outbox.Publish(ctx, tx, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, p.Deliveries, 1)
	return p.Deliveries[0].ID
}

// waitSucceeded waits until delivery id succeeded.
func (f senderFixture) waitSucceeded(t *testing.T, id string, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := f.st.GetDelivery(context.Background(), f.app.ID, id)
		return err == nil && d.Status == delivery.StatusSucceeded
	}, 20*time.Second, 5*time.Millisecond, msgAndArgs...)
}

// waitOutboxEmpty waits until every outbox row has ended.
func (f senderFixture) waitOutboxEmpty(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, f.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n))
		return n == 0
	}, 20*time.Second, 20*time.Millisecond, "outbox drained")
}

func (f senderFixture) run(t *testing.T, fc *fakeClient) (*Dispatcher, context.CancelFunc, chan struct{}) {
	t.Helper()
	d := &Dispatcher{
		Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler),
		Mode: ModeSender, Sender: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	return d, cancel, done
}

// TestLateStartRowIsSentOnce: a start row claimed long after its
// acceptance (its worker died and its lease lapsed, a paused endpoint
// resumed, a backlog) is leased from its claim, not from its acceptance, so
// no later round claims it again while its request is open; and a claim
// never succeeds while another request of the delivery is on the wire.
func TestLateStartRowIsSentOnce(t *testing.T) {
	f := setupSender(t, 2*time.Second, 5*time.Second)
	id := f.publish(t)
	// The row was accepted a minute ago (e.g. its first worker died
	// holding it and its lease lapsed).
	_, err := f.st.Pool().Exec(context.Background(), `UPDATE outbox SET created_at = now() - interval '60 seconds', claim_by = now() - interval '59 seconds'`)
	require.NoError(t, err)
	fc := &fakeClient{}
	_, cancel, done := f.run(t, fc)
	f.waitSucceeded(t, id)
	f.waitOutboxEmpty(t)
	// Run returns once every first attempt it started has ended, so the
	// count is final.
	cancel()
	<-done
	require.EqualValues(t, 1, f.hits.Load(), "first attempt of %s sent more than once", id)
}

// TestCrashedOpenRequestThenDisableEndsCanceled: a sender dies with its
// first attempt on the wire (ClaimAttempt done, nothing recorded) and the
// endpoint is disabled meanwhile: the cancel leaves the delivery
// delivering (its request was open) and its cancel finds no workflow. Once
// the row's lease lapses, the next sender finds the endpoint disabled and
// records the cancel itself.
func TestCrashedOpenRequestThenDisableEndsCanceled(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	ctx := context.Background()
	id := f.publish(t)
	// The dead sender's lease and its claim (its request on the wire).
	_, err := f.st.Pool().Exec(ctx, `UPDATE outbox SET leased_until = now() + interval '1 second'`)
	require.NoError(t, err)
	claim, err := f.st.ClaimAttempt(ctx, id, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, claim)
	disabled := true
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &disabled})
	require.NoError(t, err)
	// The dead sender's lease and its claim lapse.
	_, err = f.st.Pool().Exec(ctx, `UPDATE outbox SET leased_until = now() - interval '1 millisecond'`)
	require.NoError(t, err)
	_, err = f.st.Pool().Exec(ctx, `UPDATE deliveries SET inflight_until = now() - interval '1 millisecond'`)
	require.NoError(t, err)
	fc := &fakeClient{}
	_, cancel, done := f.run(t, fc)
	f.waitOutboxEmpty(t)
	cancel()
	<-done
	d, err := f.st.GetDelivery(ctx, f.app.ID, id)
	require.NoError(t, err)
	t.Logf("starts=%v signals=%v hits=%d", fc.starts, fc.signals, f.hits.Load())
	require.Equal(t, delivery.StatusCanceled, d.Status, "delivery of a disabled endpoint left %s forever", d.Status)
}

// TestFirstAttemptLeavesNoEarlierThanItsDueTime: the sender wakes
// ClaimLead before a first attempt's due time to claim it, and its request
// still leaves at that time or after, never before.
func TestFirstAttemptLeavesNoEarlierThanItsDueTime(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = f.publish(t)
	}
	_, cancel, done := f.run(t, &fakeClient{})
	f.waitOutboxEmpty(t)
	cancel()
	<-done
	late, err := f.st.FirstRequestLateness(context.Background(), f.app.ID, nil)
	require.NoError(t, err)
	require.Len(t, late, len(ids))
	for _, l := range late {
		require.GreaterOrEqual(t, l, time.Duration(0), "a first attempt left %s before its due time", -l)
	}
}
