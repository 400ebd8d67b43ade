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

// TestSequenceHoldIsNotBlockedByAnOpenPublish: a producer's publish of a
// key in a transaction it has not committed locks the key's counter row;
// taking, renewing and checking the sequence's hold do not wait for it.
// Holds end on the database's clock: a second run cannot take a held
// sequence, and takes it once the hold lapsed.
func TestSequenceHoldIsNotBlockedByAnOpenPublish(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	fifo := delivery.OrderingFIFO
	_, _, err := f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Ordering: &fifo})
	require.NoError(t, err)
	_, err = outbox.PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: "k"})
	require.NoError(t, err)
	ok, err := store.LeaseSequence(ctx, f.st.Pool(), f.ep.ID, "k", "run-1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // rolled back on purpose
	_, err = outbox.Publish(ctx, tx, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`), OrderingKey: "k"})
	require.NoError(t, err)

	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ok, err = store.RenewSequence(sctx, f.st.Pool(), f.ep.ID, "k", "run-1", time.Minute)
	require.NoError(t, err, "the renewal does not wait for the open publish")
	require.True(t, ok)
	held, err := store.HoldsSequence(sctx, f.st.Pool(), f.ep.ID, "k", "run-1")
	require.NoError(t, err)
	require.True(t, held)
	k, other := store.SequenceKey{EndpointID: f.ep.ID, OrderingKey: "k"}, store.SequenceKey{EndpointID: f.ep.ID, OrderingKey: "other"}
	heldNow, err := store.SequencesHeld(sctx, f.st.Pool(), []store.SequenceKey{k, other})
	require.NoError(t, err, "the dispatcher's check does not wait for the open publish either")
	require.Equal(t, map[store.SequenceKey]bool{k: true}, heldNow)
	ok, err = store.LeaseSequence(sctx, f.st.Pool(), f.ep.ID, "k", "run-2", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "one run holds a sequence")

	_, err = f.st.Pool().Exec(sctx, `UPDATE sequence_holds SET leased_until = now() - interval '1 millisecond'`)
	require.NoError(t, err)
	held, err = store.HoldsSequence(sctx, f.st.Pool(), f.ep.ID, "k", "run-1")
	require.NoError(t, err)
	require.False(t, held, "a lapsed hold is no hold")
	heldNow, err = store.SequencesHeld(sctx, f.st.Pool(), []store.SequenceKey{k})
	require.NoError(t, err)
	require.Empty(t, heldNow, "a lapsed hold is no hold")
	ok, err = store.RenewSequence(sctx, f.st.Pool(), f.ep.ID, "k", "run-1", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "a lapsed hold is not renewed: another run may hold it")
	ok, err = store.LeaseSequence(sctx, f.st.Pool(), f.ep.ID, "k", "run-2", time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "taken once lapsed")
}
