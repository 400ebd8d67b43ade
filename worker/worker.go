// Package worker wires the delivery workflow and its activities onto a
// Temporal worker. `hookrelay dev` and `hookrelay worker` both use it.
package worker

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"hookrelay/activities"
	"hookrelay/workflows"
)

// Options tunes the worker. Zero values take the defaults below.
type Options struct {
	// RunSequence is the sequencers' activity (dispatch's
	// Dispatcher.RunSequence). Defaults to nil: the worker runs no
	// sequencer's activity.
	RunSequence func(context.Context, workflows.SequenceRun) (workflows.SequenceStep, error)
	// MaxConcurrentActivities bounds concurrent SendSigned attempts
	// (regular and local). Defaults to MaxConcurrentActivitiesDefault.
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks bounds concurrent workflow tasks.
	// Defaults to MaxConcurrentWorkflowTasksDefault.
	MaxConcurrentWorkflowTasks int
	// Pollers is the number of workflow and activity task pollers each.
	// Defaults to PollersDefault.
	Pollers int
	// TaskQueue defaults to workflows.TaskQueue.
	TaskQueue string
	// StopTimeout is how long Stop lets in-flight attempts finish; an
	// attempt cut short is retried (it surfaces as a timeout).
	StopTimeout time.Duration
}

// Defaults of Options.
const (
	MaxConcurrentActivitiesDefault    = 256
	MaxConcurrentWorkflowTasksDefault = 64
	PollersDefault                    = 4
)

// New returns a worker on workflows.TaskQueue with the delivery workflow and
// activities registered. The caller starts and stops it.
func New(c client.Client, acts *activities.Activities, opts Options) (sdkworker.Worker, error) {
	if acts == nil || acts.Store == nil || acts.HTTP == nil {
		return nil, fmt.Errorf("worker: activities need a store and an HTTP client")
	}
	conc := max(opts.MaxConcurrentActivities, 0)
	if conc == 0 {
		conc = MaxConcurrentActivitiesDefault
	}
	wft := opts.MaxConcurrentWorkflowTasks
	if wft == 0 {
		wft = MaxConcurrentWorkflowTasksDefault
	}
	pollers := opts.Pollers
	if pollers == 0 {
		pollers = PollersDefault
	}
	w := sdkworker.New(c, cmp.Or(opts.TaskQueue, workflows.TaskQueue), sdkworker.Options{
		MaxConcurrentActivityExecutionSize:      conc,
		MaxConcurrentLocalActivityExecutionSize: conc,
		MaxConcurrentWorkflowTaskExecutionSize:  wft,
		MaxConcurrentWorkflowTaskPollers:        pollers,
		MaxConcurrentActivityTaskPollers:        pollers,
		WorkerStopTimeout:                       opts.StopTimeout,
	})
	w.RegisterWorkflowWithOptions(workflows.DeliveryWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	w.RegisterWorkflowWithOptions(workflows.CarrierWorkflow, workflow.RegisterOptions{Name: workflows.CarrierWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.SequencerWorkflow, workflow.RegisterOptions{Name: workflows.SequencerWorkflowName})
	w.RegisterActivity(acts)
	if opts.RunSequence != nil {
		w.RegisterActivityWithOptions(opts.RunSequence, activity.RegisterOptions{Name: workflows.RunSequenceName})
	}
	return w, nil
}
