package dispatch

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"hookrelay/activities"
	"hookrelay/workflows"
)

// TestRunSequenceOfAGoneSequenceIsEmpty: a sequence whose counter row is
// gone (its app was deleted: the row cascades with the endpoint, and the
// deliveries with the app) is empty. Its sequencer must end, not look
// again every sequenceHold for a lease it can never take.
func TestRunSequenceOfAGoneSequenceIsEmpty(t *testing.T) {
	st := pg.Store(t, "seqgone")
	d := &Dispatcher{Pool: st.Pool(), Sequencer: &activities.Activities{}, Logger: slog.New(slog.DiscardHandler)}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(d.RunSequence, activity.RegisterOptions{Name: workflows.RunSequenceName})
	start := time.Now()
	v, err := env.ExecuteActivity(workflows.RunSequenceName, workflows.SequenceRun{EndpointID: "ep_gone", OrderingKey: "k"})
	require.NoError(t, err)
	var step workflows.SequenceStep
	require.NoError(t, v.Get(&step))
	require.True(t, step.Empty, "no sequence: nothing left to send (got %+v)", step)
	require.True(t, step.NextAt.IsZero(), "no look again at %v", step.NextAt)
	require.Less(t, time.Since(start), 5*time.Second)
}
