package delivery_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	s := delivery.Settings{}.WithDefaults()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	deadline := now.Add(delivery.DeadlineDefault)
	const id = "dlv_plan"

	next := delivery.Plan(s, id, 2, nil, now, deadline)
	require.Empty(t, next.DeadLetter)
	require.Equal(t, delivery.Jitter(5*time.Second, id, 2), next.Wait)
	require.True(t, now.Add(next.Wait).Equal(next.At))

	exhausted := delivery.Plan(s, id, 7, nil, now, deadline)
	require.Equal(t, "all 6 attempts failed", exhausted.DeadLetter)

	hint := 2 * time.Minute
	throttled := delivery.Plan(s, id, 2, &hint, now, deadline)
	require.Equal(t, hint, throttled.Wait, "a Retry-After replaces the schedule, without jitter")
	zero := time.Duration(0)
	require.Equal(t, delivery.MinThrottleWait, delivery.Plan(s, id, 2, &zero, now, deadline).Wait)
	far := 2 * time.Hour
	require.Contains(t, delivery.Plan(s, id, 2, &far, now, deadline).DeadLetter, "beyond the deadline")

	// 10 min left: the 10 min wait before attempt 5 cannot finish in time.
	late := delivery.Plan(s, id, 5, nil, deadline.Add(-10*time.Minute), deadline)
	require.Contains(t, late.DeadLetter, "could not finish in time")
	// Jitter never moves an attempt past the latest start.
	tight := delivery.Settings{Schedule: []time.Duration{time.Minute}, Deadline: time.Hour, RequestTimeout: 10 * time.Second}
	at := deadline.Add(-70 * time.Second)
	require.LessOrEqual(t, delivery.Plan(tight, id, 1, nil, at, deadline).Wait, time.Minute)
}

func TestTooLate(t *testing.T) {
	t.Parallel()
	s := delivery.Settings{}.WithDefaults()
	deadline := time.Date(2026, 12, 1, 13, 15, 0, 0, time.UTC)
	require.False(t, s.TooLate(deadline.Add(-11*time.Second), deadline))
	require.True(t, s.TooLate(deadline.Add(-9*time.Second), deadline))
}

func TestInFlight(t *testing.T) {
	t.Parallel()
	for st, want := range map[delivery.Status]bool{
		delivery.StatusPending: true, delivery.StatusDelivering: true,
		delivery.StatusSucceeded: false, delivery.StatusDeadLettered: false, delivery.StatusCanceled: false,
	} {
		require.Equal(t, want, st.InFlight(), st)
	}
}

func TestJitterBounds(t *testing.T) {
	t.Parallel()
	for _, base := range delivery.DefaultSchedule() {
		for i := 0; i < 2000; i++ {
			id := "dlv_" + string(rune('a'+i%26)) + time.Duration(i).String()
			got := delivery.Jitter(base, id, i%6+1)
			require.GreaterOrEqual(t, got, time.Duration(float64(base)*0.9)-time.Millisecond)
			require.LessOrEqual(t, got, time.Duration(float64(base)*1.1)+time.Millisecond)
			require.Equal(t, got, delivery.Jitter(base, id, i%6+1), "deterministic")
		}
	}
	require.Zero(t, delivery.Jitter(0, "x", 1), "a zero wait stays zero")
}

// TestHeldWaitNeverEndsBeforeItsHold: an attempt a breaker holds until
// until comes back no earlier (before, the breaker lets nothing out and it
// would only be held again: one more round and hold statement per row
// and cycle) and at most two tenths of the time left later, spread over
// that window.
func TestHeldWaitNeverEndsBeforeItsHold(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, left := range []time.Duration{time.Millisecond, 10 * time.Second, 5 * time.Minute} {
		until := now.Add(left)
		var early, late int
		for i := range 2000 {
			got := delivery.HeldWait(until, now, "dlv_"+strconv.Itoa(i), 1)
			require.GreaterOrEqual(t, got, left)
			require.LessOrEqual(t, got, left+left/5+time.Millisecond)
			if got < left+left/10 {
				early++
			} else {
				late++
			}
		}
		if left >= time.Second {
			require.Greater(t, early, 800, "spread over the window")
			require.Greater(t, late, 800, "spread over the window")
		}
	}
	require.Zero(t, delivery.HeldWait(time.Time{}, now, "dlv", 1), "nothing held")
	require.Zero(t, delivery.HeldWait(now.Add(-time.Second), now, "dlv", 1), "a hold that ended")
}

// TestHeldEndKeepsAnAttemptThatFits: a hold's spread never takes an
// attempt the probe would let out in time past its last start less
// HeldLead (a round or workflow task must still start it); a probe inside
// that lead is waited for exactly, one past the last start ends at it, and
// a hold far from the last start is HeldWait's.
func TestHeldEndKeepsAnAttemptThatFits(t *testing.T) {
	t.Parallel()
	now := time.Now()
	last := now.Add(50 * time.Second)
	var capped int
	for i := range 2000 {
		id := "dlv_" + strconv.Itoa(i)
		until := now.Add(47 * time.Second)
		got := delivery.HeldEnd(until, now, last, id, 1)
		require.False(t, got.Before(until), "ended before the probe")
		require.False(t, got.After(last.Add(-delivery.HeldLead)), "spread past the last start less the lead")
		if got.Equal(last.Add(-delivery.HeldLead)) {
			capped++
		}
		inLead := last.Add(-delivery.HeldLead / 2)
		require.Equal(t, inLead, delivery.HeldEnd(inLead, now, last, id, 1), "a probe inside the lead is waited for, no more")
		require.Equal(t, last, delivery.HeldEnd(last.Add(time.Minute), now, last, id, 1), "a hold past the last start ends at it")
		far := now.Add(10 * time.Second)
		require.Equal(t, now.Add(delivery.HeldWait(far, now, id, 1)), delivery.HeldEnd(far, now, last, id, 1), "far from the last start: HeldWait")
	}
	require.Greater(t, capped, 1000, "most of a 47 s hold's spread (up to 56.4 s) lies past 49 s")
	require.Equal(t, now, delivery.HeldEnd(time.Time{}, now, last, "dlv", 1), "nothing held")
	require.Equal(t, now, delivery.HeldEnd(now.Add(-time.Second), now, last, "dlv", 1), "a hold that ended")
}

func TestSettingsValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, delivery.Settings{}.Validate(), "zero values take the defaults")
	require.NoError(t, delivery.Settings{Schedule: []time.Duration{0, delivery.MaxWait}, Deadline: delivery.MaxDeadline, RequestTimeout: delivery.MaxRequestTimeout}.Validate())
	for field, s := range map[string]delivery.Settings{
		"retry_schedule":  {Schedule: []time.Duration{}},
		"deadline":        {Deadline: delivery.MaxDeadline + time.Second},
		"request_timeout": {RequestTimeout: delivery.MinRequestTimeout - 1},
	} {
		var fe *delivery.FieldError
		require.ErrorAs(t, s.Validate(), &fe)
		require.Equal(t, field, fe.Field)
	}
	var fe *delivery.FieldError
	require.ErrorAs(t, delivery.Settings{Schedule: make([]time.Duration, delivery.MaxScheduleLength+1)}.Validate(), &fe)
	require.ErrorAs(t, delivery.Settings{Schedule: []time.Duration{delivery.MaxWait + 1}}.Validate(), &fe)
	require.ErrorAs(t, delivery.Settings{Deadline: 5 * time.Second, RequestTimeout: 5 * time.Second}.Validate(), &fe)
	require.Equal(t, "request_timeout", fe.Field)
}

func TestReservedHeader(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"webhook-id", "Webhook-Signature", "X-Webhook-Signature", "Content-Type", "user-agent", "Host", "Content-Length", "traceparent", "Tracestate"} {
		require.True(t, delivery.ReservedHeader(h), h)
	}
	for _, h := range []string{"X-Tenant", "Authorization", "webhookid"} {
		require.False(t, delivery.ReservedHeader(h), h)
	}
}
