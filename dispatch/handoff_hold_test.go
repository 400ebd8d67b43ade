package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
	"hookrelay/store"
)

// TestHeldAtPublishIsSentOnceItsLeaseLapses: a row the publish held
// until a (near) probe is not sent by Take, and a round sends it once its
// lease lapses (the dispatcher's breaker closed meanwhile), once.
func TestHeldAtPublishIsSentOnceItsLeaseLapses(t *testing.T) {
	f, d, _ := setupHandoff(t, 0, time.Second, func(d *Dispatcher) { d.PollInterval = 50 * time.Millisecond })
	h, ok := d.Handoff(f.app.ID)
	require.True(t, ok)
	h.Skip, h.Until = []string{f.ep.ID}, []time.Time{time.Now().Add(500 * time.Millisecond)}
	p := f.publishHandoff(t, h)
	require.Len(t, p.Leased, 1)
	require.True(t, p.Leased[0].Held)
	d.Take(p.Leased)
	require.EqualValues(t, 1, d.Held())
	require.Zero(t, d.Taken(), "Take sent a held row")
	require.Zero(t, f.hits.Load(), "a held row was sent before its probe")
	require.NotNil(t, f.leasedUntil(t, p.Leased[0].DeliveryID), "Take released a held row")
	f.waitSucceeded(t, p.Leased[0].DeliveryID, "the held row was never sent")
	f.waitOutboxEmpty(t)
	require.EqualValues(t, 1, f.hits.Load())
	require.EqualValues(t, 1, d.Held(), "counted twice")
}

// TestHeldPastLastStartIsHandedOffUnsent: a row whose hold is cut at
// its last start (deadline 2 s, timeout 1 s, probe a minute away) is taken
// by a round after that and handed to its workflow (which dead-letters
// it), with nothing sent.
func TestHeldPastLastStartIsHandedOffUnsent(t *testing.T) {
	f, d, _ := setupHandoff(t, 0, time.Second, func(d *Dispatcher) { d.PollInterval = 50 * time.Millisecond })
	dl := 2 * time.Second
	_, _, err := f.st.PatchEndpoint(context.Background(), f.app.ID, f.ep.ID, store.EndpointPatch{Deadline: &dl})
	require.NoError(t, err)
	h, ok := d.Handoff(f.app.ID)
	require.True(t, ok)
	h.Skip, h.Until = []string{f.ep.ID}, []time.Time{time.Now().Add(time.Minute)}
	p := f.publishHandoff(t, h)
	require.Len(t, p.Leased, 1)
	require.True(t, p.Leased[0].Held)
	require.Equal(t, time.Second, p.Leased[0].Until.Sub(p.Leased[0].CreatedAt), "held past its last start")
	d.Take(p.Leased)
	f.waitOutboxEmpty(t)
	require.Zero(t, f.hits.Load(), "sent past its last start")
	_, _, direct := d.Counts()
	require.EqualValues(t, 1, direct, "handed to its workflow")
	fc := d.Client.(*fakeClient)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	require.Len(t, append(append([]string{}, fc.starts...), fc.signals...), 1)
}

// TestTakeAfterStopKeepsHeldRowsLeased: Take after the dispatcher
// stopped gives back the sender's rows, never the held ones: they keep
// their lease until the probe.
func TestTakeAfterStopKeepsHeldRowsLeased(t *testing.T) {
	f, d, stop := setupHandoff(t, 0, time.Second, nil)
	h, ok := d.Handoff(f.app.ID)
	require.True(t, ok)
	pSend := f.publishHandoff(t, h)
	require.Len(t, pSend.Leased, 1)
	require.False(t, pSend.Leased[0].Held)
	h.Skip, h.Until = []string{f.ep.ID}, []time.Time{time.Now().Add(time.Minute)}
	pHeld := f.publishHandoff(t, h)
	require.Len(t, pHeld.Leased, 1)
	require.True(t, pHeld.Leased[0].Held)
	heldUntil := f.leasedUntil(t, pHeld.Leased[0].DeliveryID)
	stop()
	d.Take(append(append([]outbox.Leased{}, pHeld.Leased...), pSend.Leased...))
	require.Nil(t, f.leasedUntil(t, pSend.Leased[0].DeliveryID), "the sender's row went back to the rounds")
	require.Equal(t, heldUntil, f.leasedUntil(t, pHeld.Leased[0].DeliveryID), "a held row's lease changed after the stop")
	require.Zero(t, f.hits.Load())
}

// TestTakeMixedSendsOnlyTheSendersRows: one Take with a held row
// and a sender's row sends the latter only.
func TestTakeMixedSendsOnlyTheSendersRows(t *testing.T) {
	f, d, _ := setupHandoff(t, 0, time.Second, nil)
	h, ok := d.Handoff(f.app.ID)
	require.True(t, ok)
	pSend := f.publishHandoff(t, h)
	h.Skip, h.Until = []string{f.ep.ID}, []time.Time{time.Now().Add(time.Minute)}
	pHeld := f.publishHandoff(t, h)
	rows := []outbox.Leased{pHeld.Leased[0], pSend.Leased[0], pHeld.Leased[0]}
	d.Take(rows)
	require.True(t, rows[0].Held && !rows[1].Held, "Take changed its caller's slice")
	require.EqualValues(t, 1, d.Taken(), "Take sent on more than the sender's row")
	f.waitSucceeded(t, pSend.Leased[0].DeliveryID, "the sender's row was not sent")
	require.EqualValues(t, 1, f.hits.Load(), "a held row was sent")
	require.NotNil(t, f.leasedUntil(t, pHeld.Leased[0].DeliveryID))
	require.EqualValues(t, 1, d.Taken())
}
