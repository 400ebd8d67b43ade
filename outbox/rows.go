package outbox

import (
	"time"

	"hookrelay/delivery"
)

// Channel is the LISTEN/NOTIFY channel that wakes the dispatcher. A
// payload is the time (Unix milliseconds) by which the new rows must be
// claimed; an empty one means now.
const Channel = "hookrelay_outbox"

// Bounds of a start row's claim_by (see Publish).
const (
	// ClaimGuard is how much earlier than its first attempt's earliest due
	// time a start row is claimed: room for the round, the lease and a late
	// timer.
	ClaimGuard = 150 * time.Millisecond
	// ClaimAheadMax is the longest a start row waits in the outbox before
	// its claim, whatever its first wait.
	ClaimAheadMax = 5 * time.Second
)

// Kind is what an outbox row asks of a delivery's workflow.
type Kind string

// Outbox row kinds.
const (
	// KindStart starts a delivery's first cycle.
	KindStart Kind = "start"
	// KindReplay starts a new cycle of a finished delivery.
	KindReplay Kind = "replay"
	// KindCancel ends a delivery's workflow (its endpoint was disabled or
	// deleted, or its app deleted).
	KindCancel Kind = "cancel"
	// KindRelease frees the fifo sequence a dead letter blocks.
	KindRelease Kind = "release"
)

// Row is a claimed outbox row with what its dispatch needs.
type Row struct {
	ID          int64
	Kind        Kind
	RequestedBy string
	// CreatedAt is when the row was written: the event's acceptance for a
	// start, the request for a replay.
	CreatedAt  time.Time
	DeliveryID string
	// Exists is false when the delivery's row is gone (app deleted).
	Exists bool
	Status delivery.Status
	// ReplayID is the latest replay the delivery's workflow has run.
	ReplayID   int64
	AppID      string
	EventID    string
	EventType  string
	EndpointID string
	// EndpointURL and AppName are for the Temporal UI's summaries.
	EndpointURL string
	AppName     string
	Cycle       int
	// Settings are the endpoint's now.
	Settings delivery.Settings
	// CarrierID names the carrier workflow a start row was given to, once
	// stamped (see store.Round.Stamp); empty otherwise.
	CarrierID string
	// Outcome is the recorded first attempt of a start row (JSON of the
	// sender's result), nil until it is recorded: a row with an outcome is
	// handed to its DeliveryWorkflow, never sent again.
	Outcome []byte
	// OrderingKey and Sequence place an ordered delivery in its endpoint's
	// sequence of that key; Sequence is 0 for an unordered delivery.
	OrderingKey string
	Sequence    int64
	// Block is set for an ordered delivery whose dead letter holds its
	// sequence (fifo_on_dead_letter block, its endpoint's at acceptance).
	Block bool
	// Traceparent and Tracestate are the W3C trace context the event was
	// published in (see TraceContext), "" when it was published untraced.
	Traceparent, Tracestate string
}

// Ordered reports whether the row starts or replays an ordered delivery:
// its sequence's sequencer sends it (in sequence order), never the
// dispatcher.
func (r Row) Ordered() bool { return r.Sequence > 0 && (r.Kind == KindStart || r.Kind == KindReplay) }

// Stale reports whether a claimed row has nothing left to do: its delivery
// is gone, a start whose delivery already finished (canceled before it
// began, or its first attempt succeeded before its row was deleted), a
// replay the workflow has already run, or an ordered delivery's replay
// canceled before it ran. Such rows are only marked done.
func (r Row) Stale() bool {
	switch r.Kind {
	case KindStart:
		return !r.Exists || !r.Status.InFlight()
	case KindReplay:
		// An ordered delivery's replay canceled before its sequencer sent
		// it is never sent: its sequencer reads only open deliveries.
		return !r.Exists || r.ID <= r.ReplayID || (r.Sequence > 0 && !r.Status.InFlight())
	case KindRelease:
		return !r.Exists
	}
	return false
}
