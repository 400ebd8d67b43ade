package outbox_test

// SCRATCH (review): delete before finishing.

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
	"hookrelay/store"
)

// A publish to one paused and one unpaused endpoint still NOTIFYs.
func TestScratchMixedPausedStillNotifies(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	_, err := b.st.Pool().Exec(ctx, `UPDATE endpoints SET paused = true WHERE id = $1`, b.pay.ID)
	require.NoError(t, err)
	notified := listen(t, b)
	p, err := publish(t, b, outbox.Event{Type: "payment.succeeded", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Len(t, p.Deliveries, 2)
	require.True(t, p.Notified, "mixed publish did not notify")
	require.False(t, p.ClaimBy.IsZero())
	n, err := notified(2 * time.Second)
	require.NoError(t, err)
	t.Logf("payload %s", n.Payload)
}

// Breaker-held (leased) rows only, and breaker-held + paused: no NOTIFY,
// no claim time.
func TestScratchBreakerHeldAndPausedNoNotify(t *testing.T) {
	f := newHoldFixture(t)
	p := outbox.NewPublisher()
	held := f.endpoint(t, outbox_storeEndpoint(false, 0))
	f.endpoint(t, outbox_storeEndpoint(true, 0))
	probe := time.Now().Add(time.Minute)
	pub := f.publish(t, p, "", outbox.Handoff{Lease: 10 * time.Second, Skip: []string{held.ID}, Until: []time.Time{probe}})
	require.Len(t, pub.Deliveries, 2)
	require.Len(t, pub.Leased, 1)
	require.True(t, pub.Leased[0].Held)
	require.False(t, pub.Notified, "breaker-held + paused rows woke the dispatchers")
	require.True(t, pub.ClaimBy.IsZero(), "claim time %s", pub.ClaimBy)
	_, wake := pub.WakeAt()
	require.False(t, wake)
}

func outbox_storeEndpoint(paused bool, first time.Duration) store.Endpoint {
	return store.Endpoint{Paused: paused, RetrySchedule: []time.Duration{first, 5 * time.Second}}
}

// The claim time (Published.ClaimBy and the NOTIFY payload) of a publish
// to an unpaused endpoint with a 30 s first wait, alone and beside a
// paused endpoint whose first wait is 0: the paused row, which no round
// claims, should not pull it earlier (as TestClaimByIgnoresHeldRows for
// the breaker's).
func TestScratchPausedRowPullsClaimTime(t *testing.T) {
	ctx := context.Background()
	claim := func(withPaused bool) (time.Duration, time.Duration, bool) {
		f := newHoldFixture(t)
		f.endpoint(t, outbox_storeEndpoint(false, 30*time.Second))
		if withPaused {
			f.endpoint(t, outbox_storeEndpoint(true, 0))
		}
		conn, err := f.st.Pool().Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, "LISTEN "+outbox.Channel)
		require.NoError(t, err)
		now := time.Now()
		pub, err := outbox.NewPublisher().PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(wctx)
		require.NoError(t, err)
		ms, err := strconv.ParseInt(n.Payload, 10, 64)
		require.NoError(t, err)
		return pub.ClaimBy.Sub(now).Round(100 * time.Millisecond), time.UnixMilli(ms).Sub(now).Round(100 * time.Millisecond), pub.Notified
	}
	aloneBy, alonePayload, aloneN := claim(false)
	bothBy, bothPayload, bothN := claim(true)
	t.Logf("alone: ClaimBy now+%s, payload now+%s, notified %v", aloneBy, alonePayload, aloneN)
	t.Logf("beside a paused endpoint: ClaimBy now+%s, payload now+%s, notified %v", bothBy, bothPayload, bothN)
	require.InDelta(t, float64(aloneBy), float64(bothBy), float64(time.Second),
		"a paused row pulled the claim time from now+%s to now+%s", aloneBy, bothBy)
}

// An ingest that overlapped a resume (its snapshot saw the endpoint
// paused) writes a held row with no NOTIFY now; ReleaseHeld lets it go
// and a round can claim it: nothing relied on the publish's NOTIFY.
func TestScratchResumeRaceReleasedBySweep(t *testing.T) {
	ctx := context.Background()
	f := newHoldFixture(t)
	ep := f.endpoint(t, outbox_storeEndpoint(true, time.Second))
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	// The ingest's statement runs while the endpoint is paused; the resume
	// commits before the ingest does (HoldRows cannot see its row).
	pub, err := outbox.Publish(ctx, tx, f.app.ID, outbox.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	no := false
	_, _, err = f.st.PatchEndpoint(ctx, f.app.ID, ep.ID, store.EndpointPatch{Paused: &no})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, pub.Deliveries, 1)
	require.False(t, pub.Notified)
	require.True(t, pub.ClaimBy.IsZero())
	var held bool
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT held FROM outbox`).Scan(&held))
	require.True(t, held, "the overlapping ingest wrote its row held")
	c, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, ok, err := store.NextOutboxClaim(ctx, c)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, c.Rollback(ctx))
	n, err := store.ReleaseHeld(ctx, f.st.Pool())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	c, err = f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, ok, err = store.NextOutboxClaim(ctx, c)
	require.NoError(t, err)
	require.True(t, ok, "released row claimable")
	require.NoError(t, c.Rollback(ctx))
}
