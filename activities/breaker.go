package activities

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"hookrelay/delivery"
)

// Defaults of Breaker.
const (
	// BreakerMissesDefault is how many requests in a row to one endpoint
	// may get no answer (a timeout, a refused or reset connection, a DNS
	// or TLS failure) before the worker stops sending to it. A receiver
	// that fails one request in five at random gets 20 in a row about once
	// in 10^14 requests; one that stopped answering at 40 requests a
	// second, within half a second of its first timeout.
	BreakerMissesDefault = 20
	// BreakerCooldown is how long an endpoint that stopped answering is
	// left alone before one request probes it; each probe that gets no
	// answer doubles it, up to BreakerCooldownMax.
	BreakerCooldown = 10 * time.Second
	// BreakerCooldownMax bounds the cool-down.
	BreakerCooldownMax = 5 * time.Minute
)

// Breaker stops a worker sending to an endpoint that stopped answering,
// so its requests (each open until the request timeout) and their retries'
// workflows do not take the CPU, sockets and shares other endpoints need.
// After Misses requests in a row got no answer, the endpoint is down on
// this worker for a cool-down; then one request probes it (half-open).
// Any answer, whatever its status, closes the breaker: an endpoint that
// answers 500 is up, and its failures are the schedule's business. An
// attempt the breaker holds sends nothing: it is not an attempt, its
// delivery keeps its deadline, and it is made once the endpoint is probed
// up (ClassEndpointBusy with HeldUntil). Each worker learns on its own;
// nothing is stored.
type Breaker struct {
	// Misses is how many requests in a row with no answer open the
	// breaker (in the order they were sent: a request sent before one that
	// got an answer does not count); 0 turns it off (a zero Breaker holds nothing). The
	// configuration's default is BreakerMissesDefault.
	Misses int
	// Cooldown is how long the breaker stays open before its first probe.
	// Defaults to BreakerCooldown.
	Cooldown time.Duration

	mu       sync.Mutex
	circuits map[string]*circuit
	// open are the endpoints whose circuits are open (see OpenEndpoints).
	open     map[string]struct{}
	forgotAt time.Time
}

// circuit is one endpoint's state; an endpoint with none is closed.
type circuit struct {
	// misses counts the requests with no answer sent after lastAnswer,
	// the send time of the latest-sent request that got one. Counting by
	// send time, not by when the failures came back, keeps a burst's
	// timeouts (all back one timeout after they left, after the answers
	// of the requests sent between them) from looking like a run.
	misses     int
	lastAnswer time.Time
	// openUntil is the end of the cool-down (zero: closed); cooldown its
	// length, doubled by each failed probe.
	openUntil time.Time
	cooldown  time.Duration
	// probeUntil: a probe, prober's attempt, is out until then (past it,
	// its sender is taken to have sent nothing, and another may probe).
	probeUntil time.Time
	prober     string
	// seen is when the circuit last heard of a request.
	seen time.Time
	// changed, when someone watches, is closed as the breaker opens again
	// or closes (see watch).
	changed chan struct{}
}

// signal wakes the attempts waiting on c's state.
func (c *circuit) signal() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// watch returns a channel closed when endpointID's breaker next opens or
// closes (nil, which never fires, when it is closed: nothing waits then).
func (b *Breaker) watch(endpointID string) <-chan struct{} {
	if b.off() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuits[endpointID]
	if c == nil || c.openUntil.IsZero() {
		return nil
	}
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// off says whether b holds nothing: none, or Misses 0.
func (b *Breaker) off() bool { return b == nil || b.Misses <= 0 }

// forgetAfter is how long a closed circuit is kept after its last request
// came back: past it, no request sent before its last answer can still
// come back (delivery.MaxRequestTimeout), and what it counted is dropped.
const forgetAfter = delivery.MaxRequestTimeout + time.Minute

// admit says whether deliveryID's attempt to endpointID may be sent at
// now; when the breaker is open it says until when not (see heldUntil).
// Past the cool-down the first attempt admitted is the probe, out for at
// most probeFor; its delivery is admitted again while it is out (an
// attempt checks again after waiting for its endpoint's share).
func (b *Breaker) admit(endpointID, deliveryID string, now time.Time, probeFor time.Duration) (until time.Time, ok bool) {
	if b.off() {
		return time.Time{}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuits[endpointID]
	if until := c.heldUntil(deliveryID, now); !until.IsZero() {
		return until, false
	}
	if c != nil && !c.openUntil.IsZero() && !c.probing(deliveryID, now) {
		c.probeUntil, c.prober = now.Add(probeFor), deliveryID
	}
	return time.Time{}, true
}

// heldUntil is when c (nil: closed) may let deliveryID's attempt out: the
// end of its cool-down, or of the probe another delivery has out; zero
// when it is closed, a probe may go now, or deliveryID's attempt is the
// probe.
func (c *circuit) heldUntil(deliveryID string, now time.Time) time.Time {
	switch {
	case c == nil || c.openUntil.IsZero():
		return time.Time{}
	case now.Before(c.openUntil):
		return c.openUntil
	case now.Before(c.probeUntil) && !c.probing(deliveryID, now):
		return c.probeUntil
	}
	return time.Time{}
}

// probing says whether deliveryID's attempt is the probe out at now.
func (c *circuit) probing(deliveryID string, now time.Time) bool {
	return deliveryID == c.prober && now.Before(c.probeUntil)
}

// HeldUntil is when a's breaker may next let deliveryID's attempt to
// endpointID out, zero when it would now: a sender leaves the rows of an
// endpoint that stopped answering in the outbox until then. It changes
// nothing. It is a function, not a method, so it is not registered as an
// activity.
func HeldUntil(a *Activities, endpointID, deliveryID string, now time.Time) time.Time {
	b := a.Breaker
	if b.off() {
		return time.Time{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.circuits[endpointID].heldUntil(deliveryID, now)
}

// TakeProbe is HeldUntil for a delivery that goes on now when it returns
// zero (a failed first attempt's row handed to its workflow, whose retry
// is due): past the cool-down that delivery is then the probe, as in
// admit (out for timeout and its slacks), and the rows of the endpoint
// that come after it wait for that probe, not one workflow each. A
// function, like HeldUntil.
func TakeProbe(a *Activities, endpointID, deliveryID string, now time.Time, timeout time.Duration) time.Time {
	until, _ := a.Breaker.admit(endpointID, deliveryID, now, timeout+FlightSlack+RecordSlack)
	return until
}

// OpenEndpoints lists the endpoints a's breaker holds open (their attempts
// held, or one probe out), nil when none, and, for each, until when it
// holds a new delivery's attempt at now (HeldUntil; zero when a probe may
// go now): a publish writes their rows leased until then, or leaves them
// to the dispatchers' rounds (see outbox.Handoff). A function, like
// HeldUntil.
func OpenEndpoints(a *Activities, now time.Time) (ids []string, until []time.Time) {
	b := a.Breaker
	if b.off() {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.open {
		ids, until = append(ids, id), append(until, b.circuits[id].heldUntil("", now))
	}
	return ids, until
}

// observe counts the answer (or none) a request to endpointID sent at
// sent got; it reports the end of a cool-down it began (zero: none), and
// closed when an answer closed an open breaker.
func (b *Breaker) observe(endpointID string, answered bool, sent, now time.Time) (opened time.Time, closed bool) {
	if b.off() {
		return time.Time{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forget(now)
	c := b.circuits[endpointID]
	if c == nil {
		if b.circuits == nil {
			b.circuits = map[string]*circuit{}
		}
		c = &circuit{}
		b.circuits[endpointID] = c
	}
	c.seen = now
	if answered {
		// Any answer closes the breaker: the endpoint is there.
		closed = !c.openUntil.IsZero()
		c.openUntil, c.probeUntil, c.prober, c.cooldown = time.Time{}, time.Time{}, "", 0
		delete(b.open, endpointID)
		c.signal()
		if sent.After(c.lastAnswer) {
			c.lastAnswer, c.misses = sent, 0
		}
		return time.Time{}, closed
	}
	if !sent.After(c.lastAnswer) {
		// A request sent before one that got an answer.
		return time.Time{}, false
	}
	c.misses++
	switch {
	case c.openUntil.IsZero():
		if c.misses < b.Misses {
			return time.Time{}, false
		}
		c.cooldown = cmp.Or(b.Cooldown, BreakerCooldown)
	case !sent.Before(c.openUntil):
		// The probe (or a request sent after the cool-down) got no
		// answer either: down again, for twice as long.
		c.cooldown = max(min(2*c.cooldown, BreakerCooldownMax), c.cooldown)
	default:
		// A request sent before the breaker opened: it changes nothing.
		return time.Time{}, false
	}
	c.openUntil, c.probeUntil, c.prober = now.Add(c.cooldown), time.Time{}, ""
	if b.open == nil {
		b.open = map[string]struct{}{}
	}
	b.open[endpointID] = struct{}{}
	c.signal()
	return c.openUntil, false
}

// forget drops the closed circuits that heard of no request for
// forgetAfter, at most once per forgetAfter, so a worker keeps a circuit
// only for the endpoints it sends to.
func (b *Breaker) forget(now time.Time) {
	if now.Sub(b.forgotAt) < forgetAfter {
		return
	}
	b.forgotAt = now
	for id, c := range b.circuits {
		if c.openUntil.IsZero() && now.Sub(c.seen) > forgetAfter {
			delete(b.circuits, id)
		}
	}
}

// answer says what res, a request that was sent, tells of its endpoint:
// answered when an HTTP status came back; counts is false when it says
// nothing either way (a refused address, an invalid URL, a failure of the
// egress proxy), true for an answer and for the endpoint's own transport
// failures (ClassRetryable with no status).
func answer(res SendResult) (answered, counts bool) {
	if res.StatusCode != 0 {
		return true, true
	}
	return false, res.Class == ClassRetryable
}

// Unanswered says whether res, a request that was sent, got no answer
// that a's breaker counts (a timeout, a refused or reset connection; see
// answer), with the breaker on. A function, like HeldUntil.
func Unanswered(a *Activities, res SendResult) bool {
	if a.Breaker.off() {
		return false
	}
	answered, counts := answer(res)
	return counts && !answered
}

// held asks the breaker whether req, to endpointID (empty: an attempt
// scheduled before requests named their endpoint, not held), may be sent.
// When wait is set, it waits in the worker (a goroutine, no task slot)
// until waitBy at most, and never past the last moment the request still
// fits before the deadline or the worker's stop: for the end of the
// cool-down, or for the breaker to close (a probe got an answer), when it
// goes at once. A sender's first attempt does not wait (its row goes back
// to the outbox until then). held is true when res, with nothing sent, is
// the attempt's result: HeldUntil says when to try again.
func (a *Activities) held(ctx context.Context, req SendRequest, endpointID string, wait bool, waitBy time.Time) (res SendResult, held bool) {
	if endpointID == "" {
		return SendResult{}, false
	}
	probeFor := req.Timeout + FlightSlack + RecordSlack
	if last, fits := lastStart(req); fits && waitBy.After(last) {
		waitBy = last
	}
	var wctx context.Context
	for {
		until, ok := a.Breaker.admit(endpointID, req.DeliveryID, a.now(), probeFor)
		if ok {
			return SendResult{}, false
		}
		changed := a.Breaker.watch(endpointID)
		if changed == nil {
			// It closed since admit: ask again.
			continue
		}
		at := until
		if at.After(waitBy) {
			at = waitBy
		}
		if wctx == nil && wait && at.After(a.now()) {
			var release func()
			wctx, release = untilStop(ctx, a.Open.stopping())
			defer release()
		}
		if !wait || !at.After(a.now()) || !a.sleepUntilOr(wctx, at, changed) {
			return SendResult{
				Number: req.Number, StartedAt: a.now(), Class: ClassEndpointBusy, HeldUntil: until,
				Error: fmt.Sprintf("the endpoint stopped answering (timeouts or failed connections); nothing sent until %s", until.UTC().Format(time.RFC3339)),
			}, true
		}
	}
}

// observe tells the breaker what a request sent to endpointID heard (res),
// and logs the breaker opening or closing.
func (a *Activities) observe(ctx context.Context, endpointID string, res SendResult) {
	if a.Breaker == nil {
		return
	}
	answered, counts := answer(res)
	if !counts {
		return
	}
	switch opened, closed := a.Breaker.observe(endpointID, answered, res.StartedAt, a.now()); {
	case !opened.IsZero():
		a.logger().WarnContext(ctx, "endpoint stopped answering; this worker holds its attempts until a probe gets an answer",
			"endpoint_id", endpointID, "probe_at", opened, "error", res.Error)
	case closed:
		a.logger().InfoContext(ctx, "endpoint answers again; its held attempts go out", "endpoint_id", endpointID)
	}
}
