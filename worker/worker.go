// Package worker wires the delivery workflow and its activities onto a
// Temporal worker. `hookrelay dev` and `hookrelay worker` both use it.
package worker

import (
	"cmp"
	"context"
	"fmt"
	"sync"
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
	// SequenceSlots bounds the RunSequence activities the sequencers'
	// worker runs at once (ordered keys sending or waiting for their
	// heads); more wait in their task queue. Defaults to
	// SequenceSlotsDefault.
	SequenceSlots int
}

// Defaults of Options.
const (
	MaxConcurrentActivitiesDefault    = 256
	MaxConcurrentWorkflowTasksDefault = 64
	PollersDefault                    = 4
	SequenceSlotsDefault              = 16
	// sequenceWorkflowTasks bounds the sequencers' concurrent workflow
	// tasks.
	sequenceWorkflowTasks = 16
	// sequencePollers is the number of the sequencers' workflow and
	// activity task pollers each.
	sequencePollers = 2
)

// Workers are a process's Temporal workers: the deliveries' and, when it
// runs RunSequence, the sequencers' (workflows.SequencerQueue).
type Workers []sdkworker.Worker

// Start starts each worker; when one fails, those started stop.
func (ws Workers) Start() error {
	for i, w := range ws {
		if err := w.Start(); err != nil {
			Workers(ws[:i]).Stop()
			return err
		}
	}
	return nil
}

// Stop stops every worker at once, each letting its in-flight tasks
// finish up to Options.StopTimeout.
func (ws Workers) Stop() {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.Stop)
	}
	wg.Wait()
}

// New returns a worker on workflows.TaskQueue (or opts.TaskQueue) with the
// delivery workflow and activities registered and, with opts.RunSequence,
// the sequencers' worker on its SequencerQueue. The caller starts and
// stops them.
func New(c client.Client, acts *activities.Activities, opts Options) (Workers, error) {
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
	queue := cmp.Or(opts.TaskQueue, workflows.TaskQueue)
	w := sdkworker.New(c, queue, options(conc, wft, pollers, opts.StopTimeout))
	w.RegisterWorkflowWithOptions(workflows.DeliveryWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	w.RegisterWorkflowWithOptions(workflows.CarrierWorkflow, workflow.RegisterOptions{Name: workflows.CarrierWorkflowName})
	w.RegisterActivity(acts)
	if opts.RunSequence == nil {
		w.RegisterWorkflowWithOptions(workflows.SequencerWorkflow, workflow.RegisterOptions{Name: workflows.SequencerWorkflowName})
		return Workers{w}, nil
	}
	// Sequencers started on the deliveries' queue by an earlier version
	// finish there.
	registerSequencer(w, opts.RunSequence)
	slots := opts.SequenceSlots
	if slots <= 0 {
		slots = SequenceSlotsDefault
	}
	sw := sdkworker.New(c, workflows.SequencerQueue(queue), options(slots, sequenceWorkflowTasks, sequencePollers, opts.StopTimeout))
	registerSequencer(sw, opts.RunSequence)
	return Workers{w, sw}, nil
}

// options are a worker's: activities (regular and local) and workflow
// tasks at once, pollers of each kind, and how long Stop lets tasks finish.
func options(activities, workflowTasks, pollers int, stop time.Duration) sdkworker.Options {
	return sdkworker.Options{
		MaxConcurrentActivityExecutionSize:      activities,
		MaxConcurrentLocalActivityExecutionSize: activities,
		MaxConcurrentWorkflowTaskExecutionSize:  workflowTasks,
		MaxConcurrentWorkflowTaskPollers:        pollers,
		MaxConcurrentActivityTaskPollers:        pollers,
		WorkerStopTimeout:                       stop,
	}
}

// registerSequencer registers the sequencer's workflow and its RunSequence
// activity on w.
func registerSequencer(w sdkworker.Worker, run func(context.Context, workflows.SequenceRun) (workflows.SequenceStep, error)) {
	w.RegisterWorkflowWithOptions(workflows.SequencerWorkflow, workflow.RegisterOptions{Name: workflows.SequencerWorkflowName})
	w.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: workflows.RunSequenceName})
}
