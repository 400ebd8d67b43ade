package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// TestPruneEndsIdleSequencesNotBlockedOnes: past the retention, a key's
// sequence whose deliveries were all pruned goes with them (its key starts
// again at 1), and a lapsed hold goes too; one with a delivery left (a dead
// letter that could be replayed into it) stays; a sequence blocked by a dead
// letter keeps the dead letter and its counter row until the dead letter is
// released, whatever its age.
func TestPruneEndsIdleSequencesNotBlockedOnes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	fifo, block := delivery.OrderingFIFO, delivery.DeadLetterBlock
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Ordering: &fifo, FIFOOnDeadLetter: &block})
	require.NoError(t, err)
	publish := func(key string) (string, int64) {
		t.Helper()
		p, err := outbox.PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: key})
		require.NoError(t, err)
		var seq int64
		require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT sequence FROM deliveries WHERE id = $1`, p.Deliveries[0].ID).Scan(&seq))
		return p.Deliveries[0].ID, seq
	}
	idle, _ := publish("idle")
	publish("idle")
	blocking, _ := publish("blocked")
	// A dead letter changed long after its key's last publish (its own
	// retention runs from then): its sequence, which a replay would join,
	// stays as long as it does.
	kept, _ := publish("kept")
	_, err = f.st.Pool().Exec(ctx, `UPDATE deliveries SET status = 'dead_lettered', fifo_block = false WHERE id = $1`, kept)
	require.NoError(t, err)
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`) // their starts went out
	require.NoError(t, err)
	f.attempt(t, idle, 1, 1, 200, delivery.ClassSuccess)
	_, err = f.st.Pool().Exec(ctx, `UPDATE deliveries SET status = 'succeeded' WHERE ordering_key = 'idle'`)
	require.NoError(t, err)
	f.attempt(t, blocking, 1, 1, 404, delivery.ClassPermanent)
	_, err = f.st.MarkDelivery(ctx, store.Mark{DeliveryID: blocking, Status: delivery.StatusDeadLettered, Reason: "404", Cycle: 1})
	require.NoError(t, err)
	ok, err := store.LeaseSequence(ctx, f.st.Pool(), f.ep.ID, "idle", "run-1", time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)

	p, err := f.st.Prune(ctx, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Zero(t, p.Sequences, "nothing is idle past the retention yet")

	_, err = f.st.Pool().Exec(ctx, `UPDATE deliveries SET updated_at = now() + interval '365 days' WHERE id = $1`, kept)
	require.NoError(t, err)

	// A year later: the idle key's deliveries and sequence go; the blocking
	// dead letter and its sequence stay, and so does the late dead letter's.
	p, err = f.st.Prune(ctx, time.Now().Add(365*24*time.Hour), 24*time.Hour)
	require.NoError(t, err)
	exists, err := store.SequenceExists(ctx, f.st.Pool(), f.ep.ID, "kept")
	require.NoError(t, err)
	require.True(t, exists, "a sequence with a delivery left is kept")
	require.Equal(t, 2, p.Deliveries, "the idle key's two deliveries")
	require.Equal(t, 1, p.Sequences, "the idle key's sequence")
	_, err = f.st.GetDelivery(ctx, f.app.ID, blocking)
	require.NoError(t, err, "a blocking dead letter is kept")
	exists, err = store.SequenceExists(ctx, f.st.Pool(), f.ep.ID, "blocked")
	require.NoError(t, err)
	require.True(t, exists)
	var holds int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM sequence_holds`).Scan(&holds))
	require.Zero(t, holds, "the lapsed hold went")
	_, seq := publish("idle")
	require.Equal(t, int64(1), seq, "a pruned key starts again at 1")

	// Released, the dead letter is pruned as any other, then its sequence.
	released, err := store.ReleaseDelivery(ctx, f.st.Pool(), f.app.ID, blocking, "key_1")
	require.NoError(t, err)
	require.True(t, released)
	_, err = f.st.Pool().Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	p, err = f.st.Prune(ctx, time.Now().Add(365*24*time.Hour), 24*time.Hour)
	require.NoError(t, err)
	_, err = f.st.GetDelivery(ctx, f.app.ID, blocking)
	require.ErrorIs(t, err, store.ErrNotFound, "released, it is pruned")
	exists, err = store.SequenceExists(ctx, f.st.Pool(), f.ep.ID, "blocked")
	require.NoError(t, err)
	require.False(t, exists, "then its idle sequence")
}
