package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const ceilingQueue = "hookrelay-bench-ceiling"

// ceilingWorkflow is the least a workflow can do: one local activity.
func ceilingWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{ScheduleToCloseTimeout: 10 * time.Second})
	return workflow.ExecuteLocalActivity(ctx, ceilingActivityName).Get(ctx, nil)
}

// ceilingActivityName is the local activity the ceiling counts.
const ceilingActivityName = "BenchCeilingActivity"

// ceiling starts n trivial workflows (eager start, one local activity, no
// HTTP, no Postgres writes) on the same server and returns completions/s.
func ceiling(ctx context.Context, c client.Client, n, concurrency int) (float64, error) {
	var done atomic.Int64
	w := sdkworker.New(c, ceilingQueue, sdkworker.Options{MaxConcurrentWorkflowTaskExecutionSize: 64, MaxConcurrentWorkflowTaskPollers: 4})
	w.RegisterWorkflow(ceilingWorkflow)
	w.RegisterActivityWithOptions(func(context.Context) error { done.Add(1); return nil }, activity.RegisterOptions{Name: ceilingActivityName})
	if err := w.Start(); err != nil {
		return 0, fmt.Errorf("ceiling worker: %w", err)
	}
	defer w.Stop()
	var failed atomic.Int64
	start := time.Now()
	fanOut(concurrency, n, 0, func(i int) {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("ceiling-%d-%d", start.UnixNano(), i), TaskQueue: ceilingQueue, EnableEagerStart: true,
		}, ceilingWorkflow)
		if err != nil {
			failed.Add(1)
		}
	})
	want := int64(n) - failed.Load()
	deadline := time.Now().Add(2 * time.Minute)
	for done.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}
