package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/outbox"
)

// TestStartDelayIsTheRetrysWait: a failed first attempt's workflow starts
// when its retry is due, if that is at most StartDelayMax away; otherwise,
// or with nothing planned (a success, a held or busy outcome, a dead
// letter), or for an ordered delivery, it starts at once.
func TestStartDelayIsTheRetrysWait(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	planned := func(d time.Duration) *activities.SendOutcome {
		return &activities.SendOutcome{Result: activities.SendResult{Class: activities.ClassRetryable, NextAttemptAt: now.Add(d)}}
	}
	for _, tc := range []struct {
		name   string
		resume *activities.SendOutcome
		want   time.Duration
	}{
		{"no outcome", nil, 0},
		{"nothing planned", &activities.SendOutcome{Result: activities.SendResult{Class: activities.ClassEndpointBusy}}, 0},
		{"retry in 5 s", planned(5 * time.Second), 5 * time.Second},
		{"retry at the bound", planned(StartDelayMax), StartDelayMax},
		{"retry past the bound: a timer waits", planned(StartDelayMax + time.Millisecond), 0},
		{"retry already due", planned(-time.Second), 0},
	} {
		require.Equal(t, tc.want, startDelay(outbox.Row{Kind: outbox.KindStart}, tc.resume, now), tc.name)
	}
	ordered := outbox.Row{Kind: outbox.KindStart, Sequence: 3}
	require.Zero(t, startDelay(ordered, planned(5*time.Second), now), "an ordered delivery's run starts at once")
}
