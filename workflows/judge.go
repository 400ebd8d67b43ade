package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// verdict is what one attempt means for its cycle.
type verdict struct {
	// final is set when the cycle ends with out.
	final bool
	out   outcome
	// reason is a dead letter's.
	reason string
	// throttle is a 429's Retry-After for the next wait.
	throttle *time.Duration
	// failure is why an attempt that does not end the cycle failed.
	failure string
}

// judge classifies one attempt: its result, or err when its activity did
// not complete. DeliveryWorkflow and CarrierWorkflow both judge with it.
func judge(res attempt.SendResult, err error) verdict {
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			switch appErr.Type() {
			case attempt.ErrDeliveryGone:
				return verdict{final: true, out: outGone}
			case attempt.ErrNoSigningKey:
				return verdict{final: true, out: outDeadLettered, reason: appErr.Message()}
			}
		}
		// The worker died or Postgres was unreachable: the schedule goes
		// on, but nothing recorded was sent, so it is no attempt.
		return verdict{failure: "attempt did not complete: " + err.Error()}
	}
	switch res.Class {
	case delivery.ClassEndpointDisabled:
		return verdict{final: true, out: outCanceled}
	case delivery.ClassSuccess:
		return verdict{final: true, out: outSucceeded}
	case delivery.ClassPermanent, delivery.ClassGone:
		if res.StatusCode == 410 {
			return verdict{final: true, out: outDeadLettered, reason: "receiver answered 410 Gone; the endpoint was disabled"}
		}
		return verdict{final: true, out: outDeadLettered,
			reason: fmt.Sprintf("permanent failure on attempt %d (%s)", res.Number, res.Error)}
	case delivery.ClassThrottled:
		if res.HasRetryAfter {
			h := res.RetryAfter
			return verdict{throttle: &h, failure: res.Error}
		}
	}
	return verdict{failure: res.Error}
}

// apply folds one attempt into the run: done reports that the cycle ended
// with out; otherwise throttle is the next wait's Retry-After hint.
func (r *run) apply(ctx workflow.Context, res attempt.SendResult, err error) (out outcome, done bool, throttle *time.Duration) {
	v := judge(res, err)
	if err != nil {
		if v.final {
			return r.end(v), true, nil
		}
		r.lastFailure = v.failure
		return outCanceled, r.drainCancel(), nil
	}
	if res.Class == delivery.ClassEndpointDisabled {
		// Nothing was sent: not an attempt.
		r.canceled = true
		return outCanceled, true, nil
	}
	r.state.Attempts = append(r.state.Attempts, res)
	r.state.AttemptCount = len(r.state.Attempts)
	r.state.LastAttempt = &r.state.Attempts[len(r.state.Attempts)-1]
	r.lastFailure = res.Error
	if r.drainCancel() {
		// A 2xx received during a cancel wins.
		if v.out == outSucceeded && v.final &&
			workflow.GetVersion(ctx, versionSuccessWins, workflow.DefaultVersion, 1) == 1 {
			return outSucceeded, true, nil
		}
		return outCanceled, true, nil
	}
	if v.final {
		return r.end(v), true, nil
	}
	return 0, false, v.throttle
}

// end is the outcome of a final verdict.
func (r *run) end(v verdict) outcome {
	if v.out == outDeadLettered {
		return r.deadLetter(v.reason)
	}
	return v.out
}

func (r *run) deadLetter(reason string) outcome {
	r.state.DeadLetterReason = reason
	r.state.NextAttemptAt = nil
	return outDeadLettered
}
