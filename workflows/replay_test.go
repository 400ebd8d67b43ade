package workflows_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"hookrelay/workflows"
)

// TestReplayRecordedHistories replays histories recorded on a real server
// with today's workflow code; a change of the command sequence that is not
// behind workflow.GetVersion fails here. v1-* were recorded with the code
// before replay cycles continued as new and before a 2xx won over a cancel;
// v2-* by integration.TestHistoriesOfEveryPath with HOOKRELAY_RECORD_HISTORIES,
// which never overwrites a file. v11-busy-held-until-edited is
// v11-busy-then-success with a HeldUntil 2 min on set by hand on its first
// busy result (a breaker's hold, which that test cannot reach in its time):
// today's code sleeps longer there, on a timer of the same ID, and replays.
// v12-busy-held-near-last-start-edited is the same run cut to the path
// delivery.HeldEnd added: a deadline of 11.857 s (last start 06:28:26.300),
// a hold until 06:28:26.000 seen at 25.479, where the ~0.96 s recheck
// would end past the last start, so the timer (same ID) waits 0.521 s for
// the probe and attempt 2 succeeds at 26.009; code from before that
// change waited the recheck on the same timer and replays it too.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 15)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.DeliveryWorkflow)
			r.RegisterWorkflow(workflows.CarrierWorkflow)
			r.RegisterWorkflow(workflows.SequencerWorkflow)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}
