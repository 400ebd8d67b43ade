package workflows_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/workflows"
)

// lateRecords counts RecordLate calls, failing the first fails of them.
type lateRecords struct {
	fails int
	calls []activities.SendResult
	reqs  []activities.SendRequest
}

func (l *lateRecords) record(_ context.Context, req activities.SendRequest, res activities.SendResult) error {
	l.calls, l.reqs = append(l.calls, res), append(l.reqs, req)
	if len(l.calls) <= l.fails {
		return errors.New("connection refused")
	}
	return nil
}

func unrecorded(r activities.SendResult) activities.SendResult {
	r.Unrecorded, r.KeyIDs = true, []string{"key_1"}
	return r
}

// An attempt sent but not recorded by its activity is recorded by the run
// (retried while Postgres refuses it), then judged once: a 2xx ends the
// delivery with no second request, a 502 goes on to attempt 2 on its
// schedule, a 400 dead-letters.
func TestUnrecordedAttemptIsRecordedThenJudged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		first    activities.SendResult
		status   delivery.Status
		attempts int
	}{
		{"success", ok(), delivery.StatusSucceeded, 1},
		{"retryable", fail(502), delivery.StatusSucceeded, 2},
		{"permanent", fail(400), delivery.StatusDeadLettered, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, s, in := setup(t, false, unrecorded(tc.first), ok())
			late := &lateRecords{fails: 3}
			var a *activities.Activities
			env.OnActivity(a.RecordLate, mock.Anything, mock.Anything, mock.Anything).Return(late.record)
			env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
			st := result(t, env)
			require.Equal(t, tc.status, st.Status)
			require.Len(t, s.calls, tc.attempts, "each request sent once")
			require.Len(t, late.calls, 4, "recorded once Postgres takes it (3 refusals retried)")
			require.Equal(t, 1, late.reqs[0].Number)
			require.Equal(t, 1, late.reqs[0].Cycle)
			require.False(t, late.reqs[0].Deadline.IsZero(), "the record plans the next attempt from the cycle's deadline")
			require.True(t, late.calls[0].Unrecorded)
			for _, att := range st.Attempts {
				require.False(t, att.Unrecorded, "the state shows what the log holds")
				require.Empty(t, att.KeyIDs)
			}
		})
	}
}

// A first attempt a sender or carrier handed off unrecorded (Input.Resume)
// is recorded by the run before it goes on.
func TestHandedOffUnrecordedAttemptIsRecorded(t *testing.T) {
	t.Parallel()
	env, s, in := setup(t, false)
	late := &lateRecords{}
	var a *activities.Activities
	env.OnActivity(a.RecordLate, mock.Anything, mock.Anything, mock.Anything).Return(late.record)
	res := unrecorded(ok())
	res.Number = 1
	in.Resume = &workflows.Resume{Result: res}
	env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	st := result(t, env)
	require.Equal(t, delivery.StatusSucceeded, st.Status)
	require.Empty(t, s.calls, "not sent again")
	require.Len(t, late.calls, 1)
	require.Equal(t, []string{"key_1"}, late.calls[0].KeyIDs)
}
