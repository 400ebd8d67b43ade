package dispatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
)

// TestRestartedFirstKeepsOnePlace: in ModeWorkflow a run's app place
// (wlanes) is recorded by delivery ID (opened). A run that started but
// whose row's delete failed is held for StartRetry and started again by
// the next round (Temporal answers "already started"): the delivery still
// holds one place, given back once its first attempt begins or the place lapses, so
// the app's WorkflowAppShare never shrinks.
func TestRestartedFirstKeepsOnePlace(t *testing.T) {
	f := setupSender(t, 0, time.Second)
	ctx := context.Background()
	id := f.publish(t)
	// The first delete of the row fails once (a sequence is not rolled
	// back with the failed statement).
	_, err := f.st.Pool().Exec(ctx, `
		CREATE SEQUENCE zz_fail_once;
		CREATE FUNCTION zz_fail_delete() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		  IF OLD.delivery_id = '`+id+`' AND nextval('zz_fail_once') = 1 THEN
		    RAISE EXCEPTION 'injected: delete of the start row failed';
		  END IF;
		  RETURN OLD;
		END $$;
		CREATE TRIGGER zz_fail_delete BEFORE DELETE ON outbox FOR EACH ROW EXECUTE FUNCTION zz_fail_delete();`)
	require.NoError(t, err)
	fc := &fakeClient{}
	d := &Dispatcher{Pool: f.st.Pool(), Client: fc, Logger: slog.New(slog.DiscardHandler), Mode: ModeWorkflow,
		Sender: &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)}}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(rctx) }()
	defer func() { cancel(); <-done }()
	f.waitOutboxEmpty(t)
	fc.mu.Lock()
	starts := len(fc.inputs)
	fc.mu.Unlock()
	require.Equal(t, 2, starts, "started, its delete failed, started again from the held row")
	// Attempt 1 of the run ends (SendSigned's FirstBegun hook).
	d.FirstBegun(id)
	// One run, one place: given back by its attempt, none left to lapse.
	d.openMu.Lock()
	entries := len(d.open)
	d.openMu.Unlock()
	require.Zero(t, entries)
	require.Zero(t, d.wlanes.Open(f.app.ID), "the app's places in use with no run of it in progress (leaked)")
}
