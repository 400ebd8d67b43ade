package workflows_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"hookrelay/workflows"
)

// TestReplayRecordedHistories replays histories recorded on a real server
// (integration.TestReplayHistories with HOOKRELAY_RECORD_HISTORIES) with
// today's workflow code; a non-deterministic change fails here.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflow(workflows.DeliveryWorkflow)
		require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f), f)
	}
}
