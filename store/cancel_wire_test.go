package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/store"
)

// TestCancelWinsOverALaterDeadLetter: an endpoint disabled while a
// delivery's request is on the wire leaves the delivery delivering; the
// answer (a 400) is recorded as an attempt, and the dead letter its
// workflow then decides is recorded as the cancel: no
// delivery.dead_lettered event, no failing streak for the endpoint. A
// replay's cycle forgets it.
func TestCancelWinsOverALaterDeadLetter(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dlv := f.publish(t)
	claim, err := f.st.ClaimAttempt(ctx, dlv, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, store.Claimed, claim)
	yes := true
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, f.ep.ID, store.EndpointPatch{Disabled: &yes})
	require.NoError(t, err)
	d, err := f.st.GetDelivery(ctx, f.app.ID, dlv)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusDelivering, d.Status, "its request is open")
	f.attempt(t, dlv, 1, 1, 400, delivery.ClassPermanent)
	m, err := f.st.MarkDelivery(ctx, store.Mark{DeliveryID: dlv, Status: delivery.StatusDeadLettered, Reason: "permanent failure on attempt 1 (HTTP 400)", Cycle: 1})
	require.NoError(t, err)
	require.Equal(t, delivery.StatusCanceled, m.Status, "the cancel came first")
	d, err = f.st.GetDelivery(ctx, f.app.ID, dlv)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusCanceled, d.Status)
	require.Equal(t, 1, d.AttemptCount, "the answer is in the log")
	require.NotNil(t, d.DeadLetterReason)
	require.Equal(t, store.ReasonEndpointDisabled, *d.DeadLetterReason)
	var failures, deadLetterEvents int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT consecutive_failures FROM endpoints WHERE id = $1`, f.ep.ID).Scan(&failures))
	require.Zero(t, failures, "no failing streak for an endpoint the user disabled")
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE app_id = $1 AND type = $2`, store.OperationsApp, store.OpDeadLettered).Scan(&deadLetterEvents))
	require.Zero(t, deadLetterEvents, "no delivery.dead_lettered event")
}
