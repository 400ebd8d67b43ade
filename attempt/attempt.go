// Package attempt holds what a delivery's workflow and its activities
// exchange: the request for one attempt, its classified result, the
// outcome of a first attempt made elsewhere, the state marks a workflow
// decides, the error types it sorts on, and the bounds both sides share.
// It is a leaf (delivery and the Temporal SDK only), so the workflows link
// neither pgx nor the receiver kit.
package attempt

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"hookrelay/delivery"
)

// Names of the activities the workflows schedule (registered from
// *activities.Activities by method name).
const (
	ActivitySend      = "SendSigned"
	ActivitySendGroup = "SendGroup"
	ActivityMark      = "MarkDelivery"
	// ActivityRecordLate records an attempt the send activity could not
	// (SendResult.Unrecorded).
	ActivityRecordLate = "RecordLate"
)

// Error types of activity failures the workflow sorts on. Both are
// non-retryable: retrying cannot make them succeed.
const (
	// ErrDeliveryGone: the delivery's row no longer exists (its app was
	// deleted). The workflow ends.
	ErrDeliveryGone = "DeliveryGone"
	// ErrNoSigningKey: the endpoint has no valid signing key, so nothing was
	// sent. The delivery dead-letters with that reason.
	ErrNoSigningKey = "NoSigningKey"
)

// Rate-limit slot waits: an attempt waits for a slot up to
// SlotWaitInActivity away inside the activity, to the millisecond; a later
// one goes back to the workflow, which sleeps until SlotLead before it
// (timers fire late under load) and then lets the activity wait the rest.
const (
	SlotWaitInActivity = time.Second
	SlotLead           = 500 * time.Millisecond
)

// ReasonCanceled is the reason a delivery canceled by its owner records.
const ReasonCanceled = "canceled: endpoint disabled or deleted"

// RecordSlack is the room an attempt has, beyond its request timeout, to
// load its target and record its result.
const RecordSlack = 5 * time.Second

// ShareWaitMax is the longest a workflow's attempt waits in its worker for
// a place in its endpoint's share of requests (woken when one frees, not
// polling) before it gives up with nothing sent (ClassEndpointBusy); the
// activity's time covers it. A sender's first attempt waits at most until
// its start row's queue bound.
const ShareWaitMax = 30 * time.Second

// SendRequest asks for one attempt of a delivery.
type SendRequest struct {
	DeliveryID string
	// EndpointID is the delivery's endpoint, when the caller knows it: an
	// attempt whose endpoint's share has room then is claimed in the
	// statement that loads its target. Empty: the target names it, and the
	// attempt loads and claims in two.
	EndpointID string
	Cycle      int
	Number     int
	// Timeout bounds the whole request: connect, TLS, headers and body.
	Timeout time.Duration
	// Settings and Deadline are the cycle's; with them the attempt record
	// carries when the next attempt is due (delivery.Plan), as the
	// workflow will compute it.
	Settings delivery.Settings
	Deadline time.Time
	// Slot is a rate-limit slot already reserved for this attempt (an
	// earlier try answered ClassRateLimited); zero reserves one.
	Slot time.Time
	// At is when the request is due (zero: now). A sender's first attempt
	// is loaded and claimed up to ClaimLead before it and its request
	// leaves at At, so no database round trip lies between the due time and
	// the request.
	At time.Time `json:",omitzero"`
}

// Bounds of the claim of a sender's first attempt (SendRequest.At).
const (
	// ClaimLead is how long before its due time a sender's first attempt
	// asks to be loaded and claimed: short beside a request's timeout.
	ClaimLead = 100 * time.Millisecond
	// ClaimMargin is how long before its due time that claim's statement
	// runs at the latest (longer than it takes under load). Between the two
	// the claim waits for the claims of attempts due soon after it, and
	// one statement claims them all: at 80 events/s about seven.
	ClaimMargin = 25 * time.Millisecond
	// RecordLinger is how long an unordered attempt's record may wait for
	// the records of other attempts to share its statement and its commit
	// (at 80 events/s about 1.6 more join it). Only the attempt's own end
	// waits for it; an ordered attempt's record, which its key's next
	// message waits for, does not wait.
	RecordLinger = 20 * time.Millisecond
)

// SendResult is the classified outcome of one attempt.
type SendResult struct {
	Number          int
	StartedAt       time.Time
	DurationMS      int64
	StatusCode      int // 0 when no response arrived
	Class           delivery.Class
	Error           string
	ResponseExcerpt string
	// RetryAfter is the parsed Retry-After hint of a 429, when present.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// SlotAt is the rate-limit slot reserved for a ClassRateLimited result.
	SlotAt time.Time
	// NextAttemptAt is when a sender's first attempt that will be retried
	// is next due, as its record says (zero for any other result): the
	// DeliveryWorkflow it is handed to waits for that time instead of
	// planning the wait again from its own start.
	NextAttemptAt time.Time `json:",omitzero"`
	// HeldUntil is when a ClassEndpointBusy result's endpoint, which
	// stopped answering, is next tried (zero for any other result).
	HeldUntil time.Time `json:",omitzero"`
	// Unrecorded marks a request that went out but whose record Postgres
	// did not take within the activity's bounded retries: the workflow
	// records it itself (ActivityRecordLate, retried by Temporal) before it
	// judges it, so the log keeps every request and none is sent twice.
	// KeyIDs are the signing keys the request used, for that record.
	Unrecorded bool     `json:",omitempty"`
	KeyIDs     []string `json:",omitempty"`
}

// MarkRequest records a state the workflow decided.
type MarkRequest struct {
	DeliveryID string
	Status     delivery.Status
	Reason     string
	Cycle      int
	// ReplayID is the replay that started the cycle (0 for the first).
	ReplayID int64
	// NextAttemptAt is when the cycle's next attempt is due, if any.
	NextAttemptAt *time.Time
	// LastClass is the class of the cycle's last attempt when Status is
	// dead_lettered ("" when none was sent); metrics count dead letters by it.
	LastClass delivery.Class `json:",omitempty"`
}

// MarkResult is the status the delivery's row holds after a mark: a cancel
// does not change a delivery that succeeded or dead-lettered.
type MarkResult struct {
	Status delivery.Status
}

// SendOutcome is one attempt's answer as data (one delivery's part of a
// SendGroup, or a carrier's first attempt handed to the delivery's own
// workflow): the result SendSigned returned, or why it did not complete
// (ErrorType is the ApplicationError's type, such as ErrDeliveryGone, or
// empty for any other failure).
type SendOutcome struct {
	Result    SendResult
	Error     string `json:",omitempty"`
	ErrorType string `json:",omitempty"`
}

// Err is the error SendSigned would have returned, nil for none.
func (o SendOutcome) Err() error {
	switch {
	case o.ErrorType != "":
		return temporal.NewNonRetryableApplicationError(o.Error, o.ErrorType, nil)
	case o.Error != "":
		return errors.New(o.Error)
	}
	return nil
}

// Outcome is SendSigned's answer (res, err) as a SendOutcome.
func Outcome(res SendResult, err error) SendOutcome {
	o := SendOutcome{Result: res}
	if err != nil {
		o.Error = err.Error()
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			o.ErrorType, o.Error = appErr.Type(), appErr.Message()
		}
	}
	return o
}
