// Package delivery holds the vocabulary every stage of a delivery shares:
// its statuses, the classes of an attempt, the retry settings with their
// defaults, and Plan, the one function that decides when the next attempt
// of a cycle is due (or that there is none). It imports nothing of
// hookrelay's, so the API, the outbox, the workflow, the activities and the
// store can all use it.
package delivery

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"
)

// Errors every stage sorts on with errors.Is.
var (
	// ErrNotFound: no such object (or it belongs to another app).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request contradicts stored state (an event ID
	// published before with other content).
	ErrConflict = errors.New("conflict")
)

// FieldError is invalid input in one field (HTTP 422 naming the field).
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// TooLargeError is input over its size limit (HTTP 413 naming the field).
type TooLargeError struct {
	Field string
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: payload exceeds %d bytes", e.Field, e.Limit)
}

// Status is a delivery's state (docs/contract.md#5-statuses-and-their-transitions).
type Status string

// Delivery statuses.
const (
	StatusPending      Status = "pending"
	StatusDelivering   Status = "delivering"
	StatusSucceeded    Status = "succeeded"
	StatusDeadLettered Status = "dead_lettered"
	StatusCanceled     Status = "canceled"
)

// InFlight reports whether a delivery in status s may still make an
// attempt: the statuses a cancel ends (docs/contract.md#5-statuses-and-their-transitions).
func (s Status) InFlight() bool { return s == StatusPending || s == StatusDelivering }

// Statuses lists every delivery status.
func Statuses() []Status {
	return []Status{StatusPending, StatusDelivering, StatusSucceeded, StatusDeadLettered, StatusCanceled}
}

// InFlight lists the statuses a cancel ends.
func InFlight() []Status { return []Status{StatusPending, StatusDelivering} }

// Finished lists the statuses a replay may start from.
func Finished() []Status { return []Status{StatusSucceeded, StatusDeadLettered, StatusCanceled} }

// Durations converts stored milliseconds (a retry schedule) to durations.
func Durations(ms []int64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, v := range ms {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

// StoredSettings are the settings an endpoint's row stores in
// milliseconds: its retry schedule, deadline and request timeout.
func StoredSettings(scheduleMS []int64, deadlineMS, timeoutMS int64) Settings {
	return Settings{Schedule: Durations(scheduleMS), Deadline: time.Duration(deadlineMS) * time.Millisecond,
		RequestTimeout: time.Duration(timeoutMS) * time.Millisecond}
}

// Class is the classification of one attempt (docs/contract.md#4-retries-and-classes).
type Class string

// Attempt classes.
const (
	// ClassSuccess: 2xx, delivered.
	ClassSuccess Class = "success"
	// ClassRetryable: 5xx, timeout, connection refused/reset, DNS or TLS
	// failure; the scheduled wait applies.
	ClassRetryable Class = "retryable"
	// ClassThrottled: 429; the Retry-After hint applies when present.
	ClassThrottled Class = "throttled"
	// ClassPermanent: 410, other 4xx, any 3xx, a refused target; dead-letter
	// now (a 410 also disables the endpoint).
	ClassPermanent Class = "permanent"
	// ClassProxy: the egress proxy could not be reached, refused the
	// tunnel (a 407, a 5xx to CONNECT) or timed out before opening it
	// (a 502, 503, 504 or timeout from a proxy that opened a tunnel in the
	// last minute is the target's: retryable). The
	// request did not reach the endpoint as far as hookrelay can tell: it
	// is an operator fault, recorded as an attempt so the operator sees
	// it, retried on the schedule like a retryable failure, and a dead
	// letter that ends with it counts neither toward nor against the
	// endpoint's failing streak.
	ClassProxy Class = "proxy_error"
	// ClassGone is how histories recorded before 410 became permanent name a
	// 410. Nothing records it any more; the workflow still reads it.
	ClassGone Class = "gone"
	// ClassEndpointDisabled: the endpoint was disabled or deleted before the
	// request; nothing was sent, so it is not an attempt, and the delivery is
	// canceled.
	ClassEndpointDisabled Class = "endpoint_disabled"
	// ClassEndpointPaused: the endpoint is paused; nothing was sent, so it is
	// not an attempt, and the same attempt is tried again after
	// PausedRecheck.
	ClassEndpointPaused Class = "endpoint_paused"
	// ClassRateLimited: the endpoint's rate limit gave this attempt a later
	// slot; nothing was sent, so it is not an attempt, and the same attempt
	// is made at that slot.
	ClassRateLimited Class = "rate_limited"
	// ClassEndpointBusy: the endpoint's max_in_flight requests are all
	// taken; nothing was sent, so it is not an attempt, and the same attempt
	// is tried again after BusyRecheck.
	ClassEndpointBusy Class = "endpoint_busy"
)

// Held reports whether a result of class c sent nothing and asks for the
// same attempt again later: the endpoint was paused or busy, or its rate
// limit gave a later slot. A held attempt is not an attempt and uses no
// slot of the schedule.
func (c Class) Held() bool {
	return c == ClassEndpointPaused || c == ClassRateLimited || c == ClassEndpointBusy
}

// BusyRecheck is how long a delivery whose endpoint has no free request
// slot waits before trying the same attempt again (jittered per delivery).
const BusyRecheck = time.Second

// PausedRecheck is how long a delivery whose endpoint is paused waits
// before trying the same attempt again (the deadline still counts).
const PausedRecheck = 30 * time.Second

// Classes lists the classes an attempt's record may hold.
func Classes() []Class {
	return []Class{ClassSuccess, ClassRetryable, ClassThrottled, ClassPermanent, ClassProxy}
}

// Retried reports whether an attempt of class c is followed by the next
// attempt of its schedule (a 429 may move it).
func (c Class) Retried() bool { return c == ClassRetryable || c == ClassThrottled || c == ClassProxy }

// OperatorFault reports whether an attempt of class c failed for a reason
// of the deployment's, not the endpoint's: a dead letter whose last
// attempt was one says nothing about the endpoint.
func (c Class) OperatorFault() bool { return c == ClassProxy }

// Retry settings defaults (docs/contract.md#4-retries-and-classes).
const (
	// DeadlineDefault bounds a delivery cycle from the event's acceptance.
	DeadlineDefault = 75 * time.Minute
	// RequestTimeoutDefault bounds one attempt.
	RequestTimeoutDefault = 10 * time.Second
	// DeadLetterWindowDefault is how long a dead letter waits for a replay.
	DeadLetterWindowDefault = 7 * 24 * time.Hour
	// JitterFraction is the largest jitter, as a fraction of a wait.
	JitterFraction = 0.10
	// MinThrottleWait is the shortest wait a 429's Retry-After can ask for.
	MinThrottleWait = time.Second
)

var defaultSchedule = [...]time.Duration{
	1 * time.Second, 5 * time.Second, 30 * time.Second,
	2 * time.Minute, 10 * time.Minute, 60 * time.Minute,
}

// DefaultSchedule returns the default waits before attempts 1..6.
func DefaultSchedule() []time.Duration { return append([]time.Duration(nil), defaultSchedule[:]...) }

// Settings are a delivery cycle's retry settings, read from the endpoint
// when the cycle starts.
type Settings struct {
	// Schedule holds the waits before each attempt; its length is the
	// number of attempts per cycle. Defaults to DefaultSchedule.
	Schedule []time.Duration
	// Deadline bounds a cycle from its acceptance. Defaults to DeadlineDefault.
	Deadline time.Duration
	// RequestTimeout bounds one attempt. Defaults to RequestTimeoutDefault.
	RequestTimeout time.Duration
	// Retention is how long a dead letter waits for a replay. Defaults to
	// DeadLetterWindowDefault.
	Retention time.Duration
}

// WithDefaults fills unset fields with the defaults.
func (s Settings) WithDefaults() Settings {
	if len(s.Schedule) == 0 {
		s.Schedule = DefaultSchedule()
	}
	if s.Deadline <= 0 {
		s.Deadline = DeadlineDefault
	}
	if s.RequestTimeout <= 0 {
		s.RequestTimeout = RequestTimeoutDefault
	}
	if s.Retention <= 0 {
		s.Retention = DeadLetterWindowDefault
	}
	return s
}

// Jitter returns wait moved by a deterministic amount within
// ±JitterFraction, derived from the delivery ID and attempt number, so every
// replay of the workflow computes the same value.
func Jitter(wait time.Duration, deliveryID string, attempt int) time.Duration {
	if wait <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(deliveryID))
	h.Write([]byte{'/'})
	h.Write([]byte(strconv.Itoa(attempt)))
	// u in [-1, 1)
	u := float64(h.Sum64()>>11)/float64(1<<53)*2 - 1
	return (wait + time.Duration(float64(wait)*JitterFraction*u)).Round(time.Millisecond)
}

// Later is the later of a and b.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// HeldWait is how long an attempt that an endpoint's breaker holds until
// until (the end of its cool-down, or of its probe) waits from now: the
// time left, never less (before until the breaker lets nothing out, so an
// attempt back earlier is only held again), and up to two tenths of it
// more (Jitter's spread, moved to the late side), so the attempts held
// together come back spread, not all at once. It is 0 when until is zero
// or past.
func HeldWait(until, now time.Time, deliveryID string, attempt int) time.Duration {
	if until.IsZero() || !until.After(now) {
		return 0
	}
	left := until.Sub(now)
	return max(left, Jitter(left, deliveryID, attempt)+time.Duration(float64(left)*JitterFraction))
}

// HeldLead is how long before an attempt's last start (Settings.LastStart)
// the spread of a hold (HeldWait) ends at the latest: time for the round or
// the workflow task that takes the attempt again to start it.
const HeldLead = time.Second

// HeldEnd is when an attempt that an endpoint's breaker holds until until
// is taken again, at now, when the last moment it may start is last: now
// plus HeldWait, but the spread never moves it past last less HeldLead (an
// attempt the probe lets out in time is made, not dead-lettered because
// the spread took it past its last start), and nothing past last: a hold
// seen after last ends at last, in the past. It is now when nothing is
// held.
func HeldEnd(until, now, last time.Time, deliveryID string, attempt int) time.Time {
	wait := HeldWait(until, now, deliveryID, attempt)
	if wait == 0 {
		return now
	}
	at := now.Add(wait)
	if cap := Later(until, last.Add(-HeldLead)); at.After(cap) {
		at = cap
	}
	if at.After(last) {
		return last
	}
	return at
}

// Next is Plan's answer: wait Wait (due at At), or, when DeadLetter is
// set, make no further attempt in this cycle for that reason.
type Next struct {
	Wait       time.Duration
	At         time.Time
	DeadLetter string
}

// Plan decides when attempt number `attempt` (1-based) of a cycle may start,
// at now, for a cycle that must end by deadline. throttle is a 429's
// Retry-After hint from the attempt before (nil when there was none); it
// replaces the scheduled wait. An attempt whose scheduled start lies past
// the latest moment it could still finish is never started; jitter alone
// never moves an attempt past that moment. The workflow and the attempt
// record both call Plan, so the time Postgres shows is the time the
// workflow waits for.
func Plan(s Settings, deliveryID string, attempt int, throttle *time.Duration, now, deadline time.Time) Next {
	s = s.WithDefaults()
	n := len(s.Schedule)
	if attempt > n {
		return Next{DeadLetter: fmt.Sprintf("all %d attempts failed", n)}
	}
	latest := deadline.Add(-s.RequestTimeout).Sub(now)
	scheduled := s.Schedule[attempt-1]
	wait := Jitter(scheduled, deliveryID, attempt)
	if throttle != nil {
		scheduled = max(*throttle, MinThrottleWait)
		wait = scheduled
		if scheduled > latest {
			return Next{DeadLetter: fmt.Sprintf("429 Retry-After %s is beyond the deadline (%s left)", *throttle, max(latest, 0).Round(time.Second))}
		}
	}
	if scheduled > latest {
		return Next{DeadLetter: fmt.Sprintf("deadline of %s: attempt %d could not finish in time (%d attempts made)", s.Deadline, attempt, attempt-1)}
	}
	wait = max(min(wait, latest), 0)
	return Next{Wait: wait, At: now.Add(wait)}
}

// TooLate reports whether an attempt starting at now could no longer finish
// before deadline: checked again right before each attempt, since a timer
// can fire late when workers were down.
func (s Settings) TooLate(now, deadline time.Time) bool {
	return now.After(s.LastStart(deadline))
}

// LastStart is the last moment an attempt may start and still finish
// before deadline (its request timeout earlier).
func (s Settings) LastStart(deadline time.Time) time.Time {
	return deadline.Add(-s.WithDefaults().RequestTimeout)
}
