package workflows

import (
	"cmp"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hookrelay/delivery"
)

// Names of the sequencer workflow and its signals
// (docs/contract.md#14-ordered-delivery).
const (
	// SequencerWorkflowName is the registered name of SequencerWorkflow.
	SequencerWorkflowName = "SequencerWorkflow"
	// SignalEnqueue hands a sequencer one ordered delivery (an Input with
	// its Sequence); the dispatcher sends it with signal-with-start.
	SignalEnqueue = "enqueue"
	// SignalEnded tells a sequencer that the delivery it started has ended
	// (Ended): succeeded, dead-lettered, canceled or gone.
	SignalEnded = "ended"
)

// SequencerID is the workflow ID of the sequencer of an endpoint's
// sequence for key ("" is the endpoint's default sequence). Endpoint IDs
// hold no '/', so the ID names one pair.
func SequencerID(endpointID, key string) string {
	return "sequencer/" + endpointID + "/" + key
}

// SequencerInput starts a sequencer run; a run that continues as new
// carries its state in it.
type SequencerInput struct {
	EndpointID  string
	OrderingKey string
	// Queue are the deliveries waiting, in sequence order.
	Queue []Input `json:",omitempty"`
	// Running is the delivery started and not yet ended, "" when none.
	Running string `json:",omitempty"`
	// Last is the highest sequence number started: an enqueue at or below
	// it is a repeat (a row dispatched twice) and is dropped.
	Last int64 `json:",omitempty"`
}

// Ended is the SignalEnded payload.
type Ended struct {
	DeliveryID string
	Status     delivery.Status
}

// sequencer is a SequencerWorkflow run's state.
type sequencer struct {
	SequencerInput
	enqueueCh, endedCh workflow.ReceiveChannel
	// child is the running delivery's workflow when this run started it:
	// its failure (or termination) frees the sequence too, since it sends
	// no SignalEnded.
	child workflow.ChildWorkflowFuture
}

// SequencerWorkflow runs the deliveries of one endpoint and ordering key
// one at a time, in sequence order: it starts the head's DeliveryWorkflow
// (workflow ID = delivery ID, abandoned when the sequencer ends), waits for
// its SignalEnded and starts the next. It continues as new past
// HistoryBound events and ends when its queue is empty.
func SequencerWorkflow(ctx workflow.Context, in SequencerInput) error {
	s := &sequencer{
		SequencerInput: in,
		enqueueCh:      workflow.GetSignalChannel(ctx, SignalEnqueue),
		endedCh:        workflow.GetSignalChannel(ctx, SignalEnded),
	}
	for {
		s.drain()
		if s.Running == "" && len(s.Queue) == 0 {
			// Every buffered signal was taken in this task: none is lost.
			return nil
		}
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > HistoryBound {
			return workflow.NewContinueAsNewError(ctx, SequencerWorkflowName, s.SequencerInput)
		}
		if s.Running == "" {
			s.startHead(ctx)
			continue
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.enqueueCh, func(c workflow.ReceiveChannel, _ bool) {
			var in Input
			c.Receive(ctx, &in)
			s.enqueue(in)
		})
		sel.AddReceive(s.endedCh, func(c workflow.ReceiveChannel, _ bool) {
			var e Ended
			c.Receive(ctx, &e)
			s.ended(e)
		})
		if s.child != nil {
			sel.AddFuture(s.child, func(f workflow.Future) {
				s.child = nil
				// A run that completed has signaled its end, or holds a
				// blocking dead letter past its retention (a release or
				// a replay frees it); one that failed never will.
				if err := f.Get(ctx, nil); err != nil {
					workflow.GetLogger(ctx).Warn("sequencer: delivery workflow failed; the sequence moves on", "delivery", s.Running, "error", err)
					s.ended(Ended{DeliveryID: s.Running})
				}
			})
		}
		sel.Select(ctx)
	}
}

// drain takes every buffered signal.
func (s *sequencer) drain() {
	for {
		var in Input
		var e Ended
		switch {
		case s.enqueueCh.ReceiveAsync(&in):
			s.enqueue(in)
		case s.endedCh.ReceiveAsync(&e):
			s.ended(e)
		default:
			return
		}
	}
}

// enqueue places in by its sequence number; a repeat is dropped.
func (s *sequencer) enqueue(in Input) {
	if in.Sequence <= s.Last {
		return
	}
	i, found := slices.BinarySearchFunc(s.Queue, in.Sequence, func(q Input, n int64) int { return cmp.Compare(q.Sequence, n) })
	if found {
		return
	}
	s.Queue = slices.Insert(s.Queue, i, in)
}

// ended frees the sequence when the running delivery ended.
func (s *sequencer) ended(e Ended) {
	if e.DeliveryID == s.Running {
		s.Running, s.child = "", nil
	}
}

// startHead starts the head's DeliveryWorkflow and waits only for it to
// start. A head whose workflow already exists (a repeat of a delivery that
// ran before this run, so has ended) frees the sequence at once.
func (s *sequencer) startHead(ctx workflow.Context) {
	head := s.Queue[0]
	s.Queue = s.Queue[1:]
	s.Last = head.Sequence
	head.Sequencer = workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            head.DeliveryID,
		TaskQueue:             workflow.GetInfo(ctx).TaskQueueName,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:         DeliverySummary(head),
		StaticDetails:         DeliveryDetails(head),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SAState.ValueSet(string(delivery.StatusPending)), SAEndpoint.ValueSet(head.EndpointID),
			SAEventType.ValueSet(head.EventType), SAApp.ValueSet(head.AppID)),
	})
	child := workflow.ExecuteChildWorkflow(cctx, WorkflowName, head)
	if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		// Already started (a repeat), or not startable at all: either way
		// no SignalEnded will come, and a stuck sequence is worse than
		// one delivery out of its turn.
		workflow.GetLogger(ctx).Warn("sequencer: delivery not started; the sequence moves on",
			"delivery", head.DeliveryID, "sequence", head.Sequence, "error", err)
		return
	}
	s.Running, s.child = head.DeliveryID, child
}
