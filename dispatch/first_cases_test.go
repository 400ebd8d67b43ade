package dispatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
)

// TestSenderDeathAfterA2xxSendsNothingMore: a sender records its
// first attempt's 2xx and dies at once (kill -9, before anything else of
// sendFirst runs). The record alone ended the start row, so once the lease
// would have lapsed no dispatcher round hands the delivery to a workflow or
// sends it again.
func TestSenderDeathAfterA2xxSendsNothingMore(t *testing.T) {
	f := setupSender(t, 0, 5*time.Second)
	id := f.publish(t)
	ctx := context.Background()
	var row int64
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT id FROM outbox WHERE delivery_id = $1`, id).Scan(&row))
	// The dying sender's lease, already lapsed.
	_, err := f.st.Pool().Exec(ctx, `UPDATE outbox SET leased_until = now() - interval '1 second' WHERE id = $1`, row)
	require.NoError(t, err)

	acts := &activities.Activities{Store: f.st, HTTP: activities.NewHTTPClient(false), Logger: slog.New(slog.DiscardHandler)}
	set := delivery.Settings{Schedule: f.ep.RetrySchedule, Deadline: f.ep.Deadline, RequestTimeout: f.ep.RequestTimeout}.WithDefaults()
	res, err := activities.SendFirst(ctx, acts, activities.SendRequest{DeliveryID: id, Cycle: 1, Number: 1,
		Timeout: set.RequestTimeout, Settings: set, Deadline: time.Now().Add(time.Hour)}, row, time.Time{})
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class)

	var n int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n))
	require.Zero(t, n, "the 2xx's record ended the start row")

	fc := &fakeClient{}
	_, cancel, done := f.run(t, fc)
	// A later event is sent by the same dispatcher: its rounds have run
	// past the ended row.
	later := f.publish(t)
	require.Eventually(t, func() bool {
		d, err := f.st.GetDelivery(ctx, f.app.ID, later)
		require.NoError(t, err)
		return d.Status == delivery.StatusSucceeded
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	<-done
	require.EqualValues(t, 2, f.hits.Load(), "the ended row was not sent again; the later one once")
	require.Empty(t, fc.starts)
	d, err := f.st.GetDelivery(ctx, f.app.ID, id)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusSucceeded, d.Status)
}
