package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// Search attributes the workflow keeps current, so the Temporal UI can list
// deliveries by state, endpoint, event type and app.
var (
	SAState     = temporal.NewSearchAttributeKeyKeyword("HookrelayState")
	SAEndpoint  = temporal.NewSearchAttributeKeyKeyword("HookrelayEndpoint")
	SAEventType = temporal.NewSearchAttributeKeyKeyword("HookrelayEventType")
	SAApp       = temporal.NewSearchAttributeKeyKeyword("HookrelayApp")
)

// SearchAttributes lists the custom search attributes to register, with
// their types.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SAState.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD, SAEndpoint.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAEventType.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD, SAApp.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SADeliveries.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	}
}

// Input starts a DeliveryWorkflow run: one cycle of a delivery. The
// workflow ID is DeliveryID.
type Input struct {
	DeliveryID string
	AppID      string
	EventID    string
	EventType  string
	EndpointID string
	// EndpointHost and AppName name the endpoint (its URL's host) and the
	// app in the Temporal UI's summaries; empty in inputs recorded before
	// them, whose summaries show IDs.
	EndpointHost string `json:",omitempty"`
	AppName      string `json:",omitempty"`
	Settings     delivery.Settings
	// Cycle is 1 for a new delivery; each replay runs the next cycle.
	Cycle int
	// AcceptedAt is when the cycle was asked for: the event's acceptance,
	// or the replay's request. The deadline counts from it, so time spent
	// in the outbox counts. Zero means the run's start.
	AcceptedAt time.Time
	// ReplayID is the replay (its outbox row ID) this cycle runs; a replay
	// signal with an ID at or below it has already been run.
	ReplayID int64
	// LocalActivity is set only in runs older dispatchers started (and the
	// runs those continue as): with it set, a run asks versionAsyncSend
	// whether to make its attempts local activities (histories recorded
	// before async completion). Dispatchers leave it false, so a new run
	// makes every attempt a regular activity without that version's marker
	// and its TemporalChangeVersion upsert.
	LocalActivity bool
	// FirstDue is when the first attempt of the run's cycle is due, for a
	// run the dispatcher started at that time (the first wait spent before
	// the start, as its row waited in the outbox): the run makes attempt 1
	// at once, with no timer, and starts as delivering. Zero: the run
	// waits its first wait itself.
	FirstDue time.Time `json:",omitempty"`
	// FirstLocal makes attempt 1 of the run's cycle a local activity in
	// the run's first workflow task: no activity task, no second workflow
	// task for a delivery that succeeds at once. The starter sets it only
	// while its endpoint answers fast and holds few such attempts (see
	// activities.LocalFirsts), as a local activity holds a workflow task
	// slot for the length of its request.
	FirstLocal bool `json:",omitempty"`
	// Resume carries the first attempt a sender or a carrier made: the run
	// judges it and goes on from attempt 2. Nil for a run that makes its own
	// first attempt.
	Resume *Resume `json:",omitempty"`
	// Progress carries a cycle on into a new run (see HistoryBound); nil
	// for a run that starts its cycle.
	Progress *Progress `json:",omitempty"`
	// Sequence is an ordered delivery's place in its sequence; 0 for an
	// unordered delivery.
	Sequence int64 `json:",omitempty"`
	// Sequencer is the workflow ID of the SequencerWorkflow that handed the
	// delivery's cycle to this run: the run signals it (SignalEnded) when
	// the cycle ends. "" for an unordered delivery.
	Sequencer string `json:",omitempty"`
}

// Progress is where a cycle stood when its run continued as new: the
// attempt it was waiting to make and what it had recorded.
type Progress struct {
	Attempt     int
	Slot        time.Time
	Attempts    []attempt.SendResult
	LastFailure string
}

// Resume is a first attempt made elsewhere (by a carrier): its result, or
// why its activity did not complete.
type Resume = attempt.SendOutcome

// ReplaySignal asks for a new cycle.
type ReplaySignal struct {
	By string
	// ReplayID identifies the replay (its outbox row ID); 0 in signals sent
	// before replays had IDs, which are always run.
	ReplayID int64
	// Settings are the endpoint's at the replay's request; nil keeps the
	// run's own.
	Settings *delivery.Settings
	// RequestedAt starts the new cycle's deadline; zero means on receipt.
	RequestedAt time.Time
	// Sequencer is the sequencer that sends an ordered delivery's replay
	// (see Input.Sequencer); "" for an unordered delivery.
	Sequencer string `json:",omitempty"`
}

// State is the answer of the state query: the current cycle only.
type State struct {
	Status           delivery.Status      `json:"status"`
	Cycle            int                  `json:"cycle"`
	AttemptCount     int                  `json:"attempt_count"`
	NextAttemptAt    *time.Time           `json:"next_attempt_at"`
	LastAttempt      *attempt.SendResult  `json:"last_attempt"`
	DeadLetterReason string               `json:"dead_letter_reason,omitempty"`
	Attempts         []attempt.SendResult `json:"attempts"`
}
