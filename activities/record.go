package activities

// An attempt's record: what is stored of a request that went out, its
// bounded retries while Postgres refuses it, and the late record its
// workflow makes when they ran out.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"hookrelay/delivery"
	"hookrelay/store"
)

// attemptRecord is the record of req's attempt that answered res, signed
// with keyIDs and ended at end.
func attemptRecord(req SendRequest, res SendResult, keyIDs []string, end time.Time) *store.Attempt {
	rec := &store.Attempt{
		DeliveryID: req.DeliveryID, Cycle: req.Cycle, Number: req.Number,
		StartedAt: res.StartedAt, DurationMS: res.DurationMS, Class: string(res.Class),
		Error: res.Error, ResponseExcerpt: res.ResponseExcerpt, KeyIDs: keyIDs,
	}
	if res.StatusCode != 0 {
		code := res.StatusCode
		rec.StatusCode = &code
	}
	rec.NextAttemptAt = nextAttempt(req, res, end)
	return rec
}

// unrecorded is res of a request to t that went out with rec's keys but
// whose record failed with err: counted and logged as made, for the
// workflow to record (RecordLate), unless its delivery is gone.
func (a *Activities) unrecorded(ctx context.Context, req SendRequest, t store.Target, res SendResult, rec *store.Attempt, err error) (SendResult, error) {
	if errors.Is(err, store.ErrNotFound) {
		return SendResult{}, gone(fmt.Errorf("send %s: %w", req.DeliveryID, err))
	}
	a.recorded(ctx, req, t, res, rec.KeyIDs)
	a.logger().Warn("attempt sent but not recorded; its workflow records it", "delivery_id", req.DeliveryID,
		"cycle", req.Cycle, "attempt", req.Number, "err", err)
	res.Unrecorded, res.KeyIDs = true, rec.KeyIDs
	return res, nil
}

// RecordLate records an attempt its send activity made but could not record
// (SendResult.Unrecorded). Recording is idempotent per (delivery, cycle,
// number); the workflow retries it while Postgres is away.
func (a *Activities) RecordLate(ctx context.Context, req SendRequest, res SendResult) error {
	end := res.StartedAt.Add(time.Duration(res.DurationMS) * time.Millisecond)
	errs, err := a.Store.RecordAttempts(ctx, []store.Attempt{*attemptRecord(req, res, res.KeyIDs, end)})
	if err == nil {
		err = errs[0]
	}
	var fu *store.FollowUpError
	if err != nil && !errors.As(err, &fu) {
		return gone(fmt.Errorf("record %s attempt %d: %w", req.DeliveryID, req.Number, err))
	}
	return nil
}

// recorded counts and logs an attempt once its record is stored.
func (a *Activities) recorded(ctx context.Context, req SendRequest, t store.Target, res SendResult, keyIDs []string) {
	var accepted time.Time
	if !req.Deadline.IsZero() {
		accepted = req.Deadline.Add(-req.Settings.WithDefaults().Deadline)
	}
	a.Metrics.Attempt(t.EndpointID, string(res.Class), res.StatusCode, time.Duration(res.DurationMS)*time.Millisecond, req.Cycle == 1 && req.Number == 1, accepted)
	if res.Class == ClassSuccess {
		a.Metrics.Finished(string(delivery.StatusSucceeded))
	}
	// One line per attempt: a success at debug, anything else at info.
	level := slog.LevelInfo
	if res.Class == ClassSuccess {
		level = slog.LevelDebug
	}
	a.logger().Log(ctx, level, "attempt",
		"delivery_id", req.DeliveryID, "event_id", t.EventID, "endpoint_id", t.EndpointID,
		"cycle", req.Cycle, "attempt", req.Number, "status_code", res.StatusCode,
		"class", res.Class, "duration_ms", res.DurationMS, "key_ids", keyIDs, "error", res.Error)
}

// nextAttempt is when the workflow will make the next attempt after res,
// nil when there is none (success, permanent failure, dead letter, or a
// request from a workflow that did not pass its settings).
func nextAttempt(req SendRequest, res SendResult, now time.Time) *time.Time {
	if req.Deadline.IsZero() || !res.Class.Retried() {
		return nil
	}
	var throttle *time.Duration
	if res.Class == ClassThrottled && res.HasRetryAfter {
		throttle = &res.RetryAfter
	}
	next := delivery.Plan(req.Settings, req.DeliveryID, req.Number+1, throttle, now, req.Deadline)
	if next.DeadLetter != "" {
		return nil
	}
	return &next.At
}

// record stores attempts in one statement, retrying it while Postgres is
// unreachable: the requests were sent, so their records must not be lost
// to a short outage. errs[i] is recs[i]'s own failure.
func (a *Activities) record(ctx context.Context, recs []store.Attempt) (errs []error, err error) {
	wait := RecordRetryWait
	for try := 0; ; try++ {
		errs, err = a.Store.RecordAttempts(ctx, recs)
		if err == nil {
			// A follow-up that failed does not undo the record: the
			// attempt is made, and must not be made again.
			for i, e := range errs {
				var fu *store.FollowUpError
				if errors.As(e, &fu) {
					a.logger().Warn("attempt recorded; its follow-up failed", "delivery_id", fu.DeliveryID, "err", fu.Err)
					errs[i] = nil
				}
			}
		}
		if err == nil || try == RecordRetries || !store.IsTransient(err) {
			return errs, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}
