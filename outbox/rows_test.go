package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// TestStaleRows: rows with nothing left to do are only marked done: a start
// of a gone or already canceled delivery, and a replay the workflow has run
// (its row dispatched twice).
func TestStaleRows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		row   outbox.Row
		stale bool
	}{
		{outbox.Row{Kind: outbox.KindStart, Exists: true, Status: delivery.StatusPending}, false},
		{outbox.Row{Kind: outbox.KindStart, Exists: true, Status: delivery.StatusCanceled}, true},
		{outbox.Row{Kind: outbox.KindStart}, true},
		{outbox.Row{ID: 9, Kind: outbox.KindReplay, Exists: true, ReplayID: 8}, false},
		{outbox.Row{ID: 9, Kind: outbox.KindReplay, Exists: true, ReplayID: 9}, true},
		{outbox.Row{ID: 9, Kind: outbox.KindReplay}, true},
		{outbox.Row{ID: 9, Kind: outbox.KindReplay, Exists: true, ReplayID: 8, Sequence: 3, Status: delivery.StatusPending}, false},
		{outbox.Row{ID: 9, Kind: outbox.KindReplay, Exists: true, ReplayID: 8, Sequence: 3, Status: delivery.StatusCanceled}, true},
		{outbox.Row{Kind: outbox.KindCancel}, false},
	} {
		require.Equal(t, tc.stale, tc.row.Stale(), "%+v", tc.row)
	}
}

// TestClaimTakesOneRowPerDelivery: a delivery's rows go out in order, so a
// cancel queued after its start waits for the start to be done.
func TestClaimTakesOneRowPerDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Len(t, p.Deliveries, 2)
	first := p.Deliveries[0].ID
	require.NoError(t, store.CancelWorkflows(ctx, b.st.Pool(), []string{first}, "test"))

	claim := func() []outbox.Row {
		tx, err := b.st.Pool().Begin(ctx)
		require.NoError(t, err)
		rows, err := store.ClaimOutbox(ctx, tx, 10)
		require.NoError(t, err)
		var done []int64
		for _, r := range rows {
			done = append(done, r.ID)
		}
		require.NoError(t, store.OutboxDone(ctx, tx, done))
		require.NoError(t, tx.Commit(ctx))
		return rows
	}
	rows := claim()
	require.Len(t, rows, 2, "one start per delivery; the cancel waits")
	for _, r := range rows {
		require.Equal(t, outbox.KindStart, r.Kind)
		require.True(t, r.Exists)
		require.Equal(t, b.app.ID, r.AppID)
		// What the Temporal UI's summaries name.
		require.Equal(t, "acme", r.AppName)
		require.Equal(t, "https://example.com/hook", r.EndpointURL)
	}
	rows = claim()
	require.Len(t, rows, 1)
	require.Equal(t, outbox.KindCancel, rows[0].Kind)
	require.Equal(t, first, rows[0].DeliveryID)
	require.Equal(t, "test", rows[0].RequestedBy)
	require.Empty(t, claim())
	n, err := store.OutboxBacklog(ctx, b.st.Pool(), 100)
	require.NoError(t, err)
	require.Zero(t, n)
}
