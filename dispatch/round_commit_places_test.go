package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// killingClient is fakeClient that, on the start of delivery killOn,
// terminates (once) the connections of this database idle in a
// transaction: the round in progress, whose leases and deletes go out with
// its COMMIT, then fails to commit (as on any Postgres restart, failover or
// connection reset between a round's claim and its commit).
type killingClient struct {
	*fakeClient
	t      *testing.T
	st     *store.Store
	killOn string
	once   sync.Once
}

func (c *killingClient) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, w any, args ...any) (client.WorkflowRun, error) {
	if o.ID == c.killOn {
		c.once.Do(func() {
			var n int
			err := c.st.Pool().QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`).Scan(&n)
			if err != nil || n == 0 {
				c.t.Errorf("round's connection not terminated: n=%d err=%v", n, err)
			}
		})
	}
	return c.fakeClient.ExecuteWorkflow(ctx, o, w, args...)
}

// TestFailedRoundCommitGivesBackAppPlaces: a round takes one of the app's
// AppHeldMax places (holdApp) for each first attempt it will hold, before
// its commit; a round whose commit fails (a Postgres restart, a reset
// connection) gives them back, so the app's rows are held and started by
// the next round instead of being leased aside for good.
func TestFailedRoundCommitGivesBackAppPlaces(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	ctx := context.Background()
	// A second endpoint of the app whose first wait is past HoldMax: its
	// delivery is a single (started at once, in the round, before the
	// commit).
	late, _, err := f.st.CreateEndpoint(ctx, store.Endpoint{AppID: f.app.ID, URL: "http://127.0.0.1:9/hook", Environment: "live",
		RetrySchedule: []time.Duration{time.Minute}, Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	p, err := outbox.PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Len(t, p.Deliveries, 2)
	var held, single string
	for _, dl := range p.Deliveries {
		if dl.EndpointID == late.ID {
			single = dl.ID
		} else {
			held = dl.ID
		}
	}
	require.NotEmpty(t, held)
	require.NotEmpty(t, single)

	fc := &fakeClient{}
	kc := &killingClient{fakeClient: fc, t: t, st: f.st, killOn: single}
	d := &Dispatcher{Pool: f.st.Pool(), Client: kc, Logger: slog.New(slog.DiscardHandler), Mode: ModeWorkflow,
		AppHeldMax: 1, // the default is HeldMax/AppHeldShare = 512: as many failed commits do the same
		Sender:     &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler), Local: &activities.LocalFirsts{}}}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(rctx) }()
	defer func() { cancel(); <-done }()

	started := func(id string) bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		for _, in := range fc.inputs {
			if in.DeliveryID == id && !in.FirstDue.IsZero() {
				return true
			}
		}
		return false
	}
	// The single is started again by the round after the failed one, which
	// commits.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE delivery_id = $1`, single).Scan(&n))
		return n == 0
	}, 10*time.Second, 10*time.Millisecond, "a later round commits")
	require.Eventually(t, func() bool { return started(held) }, 8*time.Second, 10*time.Millisecond, func() string {
		d.appMu.Lock()
		defer d.appMu.Unlock()
		return fmt.Sprintf("the held delivery's workflow never started (due %s after acceptance); its app holds %d of its places, d.held=%d",
			delivery.Jitter(delivery.DefaultSchedule()[0], held, 1), d.appHeld[f.app.ID], d.held.Load())
	}())
}
