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
