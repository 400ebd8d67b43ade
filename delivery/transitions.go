package delivery

import "fmt"

// Event is something that happens to a delivery. The transition table
// (Next) says from which statuses it applies and which status it leads to;
// every statement that changes a delivery's status filters on From and
// sets To, and the database refuses any other change (a trigger over the
// same table, migration 016), so no path can move a delivery the table
// does not allow.
type Event string

// Events of a delivery's life.
const (
	// EventAccept: an event fanned out to an endpoint made the delivery.
	EventAccept Event = "accept"
	// EventClaim: a request is about to be written to the network.
	EventClaim Event = "claim"
	// EventStart: a cycle's workflow runs (a replayed cycle, a hand-off).
	EventStart Event = "start"
	// EventRecord: an attempt that did not succeed was recorded; another
	// may follow.
	EventRecord Event = "record"
	// EventSucceed: a 2xx was recorded.
	EventSucceed Event = "succeed"
	// EventDeadLetter: the cycle ended without success (a permanent
	// answer, the schedule or the deadline spent).
	EventDeadLetter Event = "dead_letter"
	// EventCancel: the endpoint was disabled or deleted (or its app) while
	// the delivery was in flight and no request was on the wire.
	EventCancel Event = "cancel"
	// EventReplay: someone asked for a finished delivery again.
	EventReplay Event = "replay"
	// EventPrune: a finished delivery past its retention is deleted.
	EventPrune Event = "prune"
)

// StatusGone is no row: before EventAccept and after EventPrune.
const StatusGone Status = ""

// Events lists every event, in a delivery's order.
func Events() []Event {
	return []Event{EventAccept, EventClaim, EventStart, EventRecord, EventSucceed, EventDeadLetter, EventCancel, EventReplay, EventPrune}
}

// From lists the statuses ev applies to.
func From(ev Event) []Status {
	switch ev {
	case EventAccept:
		return []Status{StatusGone}
	case EventClaim, EventStart, EventRecord, EventSucceed, EventDeadLetter, EventCancel:
		return InFlight()
	case EventReplay, EventPrune:
		return Finished()
	}
	return nil
}

// To is the status ev leads to.
func To(ev Event) Status {
	switch ev {
	case EventAccept, EventReplay:
		return StatusPending
	case EventClaim, EventStart, EventRecord:
		return StatusDelivering
	case EventSucceed:
		return StatusSucceeded
	case EventDeadLetter:
		return StatusDeadLettered
	case EventCancel:
		return StatusCanceled
	}
	return StatusGone
}

// TransitionError is a change of status the table does not allow: ev does
// not apply to From (Event is empty when the database refused a change
// from From to To).
type TransitionError struct {
	DeliveryID string
	From, To   Status
	Event      Event
}

func (e *TransitionError) Error() string {
	if e.Event == "" {
		return fmt.Sprintf("delivery %s: no transition from %q to %q", e.DeliveryID, e.From, e.To)
	}
	return fmt.Sprintf("delivery %s: %s does not apply to a %q delivery", e.DeliveryID, e.Event, e.From)
}

// Transition is the status ev leads to from status from, or a *TransitionError.
func Transition(from Status, ev Event) (Status, error) {
	for _, s := range From(ev) {
		if s == from {
			return To(ev), nil
		}
	}
	return from, &TransitionError{From: from, To: To(ev), Event: ev}
}

// Allowed reports whether a row may change from one status to another:
// some event leads there (or the status stays).
func Allowed(from, to Status) bool {
	if from == to {
		return true
	}
	for _, ev := range Events() {
		if next, err := Transition(from, ev); err == nil && next == to {
			return true
		}
	}
	return false
}
