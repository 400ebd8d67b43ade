package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// phase is where a cycle stands. runCycle runs one step per phase, each
// naming the next, until the cycle ends:
//
//	scheduled ─▶ due ─▶ scheduled (the next attempt)
//	              └───▶ held ─▶ due (the same attempt)
//	resumed ─▶ due (a carrier's rate-limited attempt, at its slot)
//	any phase ─▶ ended (succeeded, dead-lettered, canceled, gone, continued)
type phase int

const (
	// phaseScheduled: the attempt in hand waits its scheduled time
	// (delivery.Plan), or the cycle dead-letters when none is left.
	phaseScheduled phase = iota
	// phaseDue: the attempt in hand is due; the deadline is checked again
	// (timers fire late when workers were down) and it is sent.
	phaseDue
	// phaseHeld: the attempt in hand sent nothing (delivery.Class.Held): it
	// is made again after its recheck wait or at its rate-limit slot, as the
	// same attempt.
	phaseHeld
	// phaseResumed: the attempt a carrier handed off rate-limited waits
	// for the slot it reserved, then is made as attempt 1. Unlike
	// phaseHeld it does not check HistoryBound: the run is new (and
	// runCycle before its phases did not check it here either).
	phaseResumed
	// phaseEnded: the cycle ended with cycle.out.
	phaseEnded
)

// cycle is one cycle's progress: up to len(Schedule) attempts within the
// deadline, counted from the cycle's acceptance.
type cycle struct {
	phase    phase
	number   int // the attempt in hand, 1-based
	deadline time.Time
	// throttle is a 429's Retry-After, which replaces the next scheduled
	// wait.
	throttle *time.Duration
	// slot is a rate-limit slot already reserved for the attempt in hand.
	slot time.Time
	// due is when the attempt in hand is due as the record of the attempt
	// before planned it (a sender's first attempt handed to this run);
	// zero: the run plans it.
	due time.Time
	// firstDue: due is attempt 1's due time, the run started at it
	// (Input.FirstDue).
	firstDue bool
	// held is the result that sent nothing (phaseHeld).
	held attempt.SendResult
	out  outcome // phaseEnded
}

func (c *cycle) end(out outcome) { c.phase, c.out = phaseEnded, out }

// runCycle runs the current cycle to its outcome.
func (r *run) runCycle(ctx workflow.Context) outcome {
	c := r.openCycle(ctx)
	for c.phase != phaseEnded {
		switch c.phase {
		case phaseScheduled:
			r.waitScheduled(ctx, &c)
		case phaseDue:
			r.sendDue(ctx, &c)
		case phaseHeld:
			r.waitHeld(ctx, &c)
		case phaseResumed:
			r.waitResumed(ctx, &c)
		}
	}
	return c.out
}

// openCycle is where the cycle starts: attempt 1's scheduled wait; in the
// run that carries a cycle on (Input.Progress), the held attempt it was
// making; in a run a carrier handed off (Input.Resume), after the
// carrier's first attempt, which counts as attempt 1.
func (r *run) openCycle(ctx workflow.Context) cycle {
	c := cycle{phase: phaseScheduled, number: 1, deadline: r.acceptedAt.Add(r.set.Deadline)}
	if r.state.Cycle != max(r.in.Cycle, 1) {
		return c
	}
	if p := r.in.Progress; p != nil {
		c.phase, c.number, c.slot, r.lastFailure = phaseDue, p.Attempt, p.Slot, p.LastFailure
		r.state.Attempts = append(r.state.Attempts, p.Attempts...)
		if n := len(r.state.Attempts); n > 0 {
			r.state.AttemptCount, r.state.LastAttempt = n, &r.state.Attempts[n-1]
		}
		return c
	}
	if !r.in.FirstDue.IsZero() && r.in.Resume == nil {
		// Started at its first attempt's due time: attempt 1 now.
		c.due, c.firstDue = r.in.FirstDue, true
		return c
	}
	if res := r.in.Resume; res != nil {
		switch res.Result.Class {
		case delivery.ClassEndpointPaused, delivery.ClassEndpointBusy:
			// The carrier sent nothing: attempt 1 on its schedule.
		case delivery.ClassRateLimited:
			c.phase, c.held = phaseResumed, res.Result
		default:
			r.judged(ctx, &c, res.Result, res.Err())
			if c.phase == phaseScheduled {
				c.due = res.Result.NextAttemptAt
			}
		}
		r.attempted(ctx, 1, res.Result, res.Err())
	}
	return c
}

// waitScheduled waits for the attempt in hand's scheduled time.
func (r *run) waitScheduled(ctx workflow.Context, c *cycle) {
	var next delivery.Next
	planned := workflow.DefaultVersion
	switch {
	case c.firstDue:
		// The dispatcher started the run when attempt 1 was due (its row
		// held for the first wait): no version marker, no upsert, no timer.
		next = delivery.Next{At: c.due, Wait: max(c.due.Sub(workflow.Now(ctx)), 0)}
	case !c.due.IsZero():
		planned = workflow.GetVersion(ctx, versionPlannedRetry, workflow.DefaultVersion, plannedRetryStateKept)
	}
	switch {
	case c.firstDue:
	case planned >= plannedRetry:
		// The record of the attempt before planned this one from the
		// failure, its deadline checked, as Postgres shows it; planned
		// again from this run's start (which the dispatcher may have
		// delayed to that time: then nothing is left to wait) it would
		// count the wait twice. sendDue's TooLate still guards it.
		next = delivery.Next{At: c.due, Wait: max(c.due.Sub(workflow.Now(ctx)), 0)}
	default:
		next = delivery.Plan(r.set, r.in.DeliveryID, c.number, c.throttle, workflow.Now(ctx), c.deadline)
	}
	c.throttle, c.due, c.firstDue = nil, time.Time{}, false
	if planned >= plannedRetryStateKept && r.state.Status != delivery.StatusDelivering {
		// The dispatcher started this run of a failed first attempt with
		// HookrelayState delivering already: no upsert (a visibility write)
		// to say it again.
		r.state.Status = delivery.StatusDelivering
		r.showDetails(ctx)
	}
	if next.DeadLetter != "" {
		reason := next.DeadLetter
		if c.number > len(r.set.Schedule) && r.lastFailure != "" {
			reason += "; last: " + r.lastFailure
		}
		c.end(r.deadLetter(reason))
		return
	}
	if c.number == 1 && r.in.Sequencer != "" && next.Wait > 0 {
		// An ordered delivery's first wait counts from its acceptance, as
		// an unordered one's does: the time it waited in its sequence is
		// not added to it.
		waited := workflow.Now(ctx).Sub(r.acceptedAt)
		next.Wait = max(next.Wait-waited, 0)
		next.At = workflow.Now(ctx).Add(next.Wait)
	}
	if next.Wait > 0 {
		r.state.NextAttemptAt = &next.At
		r.showDetails(ctx)
		if r.sleep(ctx, next.Wait, fmt.Sprintf("wait %s for attempt %d", next.Wait, c.number)) {
			c.end(outCanceled)
			return
		}
	}
	c.phase = phaseDue
}

// sendDue makes the attempt in hand, unless the deadline passed while it
// waited.
func (r *run) sendDue(ctx workflow.Context, c *cycle) {
	r.state.NextAttemptAt = nil
	if r.set.TooLate(workflow.Now(ctx), c.deadline) {
		c.end(r.deadLetter(fmt.Sprintf("deadline of %s passed while attempt %d waited (%d attempts made)", r.set.Deadline, c.number, r.state.AttemptCount)))
		return
	}
	if r.state.Status != delivery.StatusDelivering {
		r.setStatus(ctx, delivery.StatusDelivering)
	}
	res, err := r.send(ctx, c.number, c.deadline, c.slot)
	c.slot = time.Time{}
	if err == nil && res.Class.Held() {
		c.phase, c.held = phaseHeld, res
		return
	}
	r.judged(ctx, c, res, err)
}

// judged folds the attempt in hand's result into the run: the cycle ends,
// or the next attempt is scheduled.
func (r *run) judged(ctx workflow.Context, c *cycle, res attempt.SendResult, err error) {
	if err == nil && res.Unrecorded {
		res = r.recordLate(ctx, c, res)
	}
	out, done, throttle := r.apply(ctx, res, err)
	if done {
		c.end(out)
		return
	}
	c.phase, c.number, c.throttle = phaseScheduled, c.number+1, throttle
}

// waitHeld waits until the held attempt may be made again: its rate-limit
// slot (waking a little before it; the activity waits the rest), or a
// recheck of the paused or busy endpoint. A run whose history passed
// HistoryBound carries the cycle on in a new run instead.
func (r *run) waitHeld(ctx workflow.Context, c *cycle) {
	if r.waitHold(ctx, c) {
		return
	}
	if r.pastBound(ctx) {
		r.progress = &Progress{Attempt: c.number, Slot: c.slot, Attempts: r.state.Attempts, LastFailure: r.lastFailure}
		c.end(outContinued)
		return
	}
	c.phase = phaseDue
}

// waitResumed waits for the rate-limit slot of the attempt a carrier
// handed off, then makes it.
func (r *run) waitResumed(ctx workflow.Context, c *cycle) {
	if !r.waitHold(ctx, c) {
		c.phase = phaseDue
	}
}

// waitHold waits out the held attempt's hold; it reports true when a
// cancel ended the cycle.
func (r *run) waitHold(ctx workflow.Context, c *cycle) bool {
	now := workflow.Now(ctx)
	at, wake := now.Add(delivery.PausedRecheck), delivery.PausedRecheck
	switch c.held.Class {
	case delivery.ClassRateLimited:
		at, c.slot = c.held.SlotAt, c.held.SlotAt
		wake = c.held.SlotAt.Add(-attempt.SlotLead).Sub(now)
	case delivery.ClassEndpointBusy:
		wake = delivery.Jitter(delivery.BusyRecheck, r.in.DeliveryID, c.number)
		last := r.set.LastStart(c.deadline)
		held := delivery.HeldEnd(c.held.HeldUntil, now, last, r.in.DeliveryID, c.number).Sub(now)
		if c.held.HeldUntil.After(now) && (held > wake || now.Add(wake).After(last)) {
			// The endpoint stopped answering: nothing goes out before its
			// breaker lets a probe out, and the last moment an attempt fits
			// before the deadline (checked next) is not waited past, nor
			// is it by the recheck when the probe comes sooner. Only the
			// timer's length changes, not the commands: histories
			// recorded before replay as they were.
			wake = max(held, time.Millisecond)
		}
		at = now.Add(wake)
	}
	if wake > 0 {
		r.state.NextAttemptAt = &at
		r.showDetails(ctx)
		if r.sleep(ctx, wake, heldSummary(c.held.Class, c.number, wake)) {
			c.end(outCanceled)
			return true
		}
	}
	return false
}
