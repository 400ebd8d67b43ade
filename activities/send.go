package activities

// One attempt, from its target to its record: SendSigned (a workflow's
// attempt) and SendFirst (the sender's) load the target, claim the
// attempt, sign and POST it, and record what came back.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"hookrelay/delivery"
	"hookrelay/internal/egress"
	"hookrelay/internal/tracing"
	"hookrelay/signing"
	"hookrelay/store"
)

// SendSigned makes one signed POST of a delivery and records it. Transport
// and HTTP failures are results, not errors; an error means the attempt
// could not be prepared or recorded (the workflow treats it as retryable).
// As a regular activity with a Completer it completes asynchronously.
func (a *Activities) SendSigned(ctx context.Context, req SendRequest) (SendResult, error) {
	if a.Completer != nil && activity.IsActivity(ctx) {
		if info := activity.GetInfo(ctx); !info.IsLocalActivity {
			a.sendAsync(ctx, info.TaskToken, req)
			return SendResult{}, activity.ErrResultPending
		}
	}
	return a.send(ctx, req, 0, time.Time{})
}

// send makes req and records it; a sender's first attempt (outboxID > 0)
// records its outcome on its outbox row in the same statement. A full
// endpoint share is waited for until shareBy (zero: not at all).
func (a *Activities) send(ctx context.Context, req SendRequest, outboxID int64, shareBy time.Time) (result SendResult, _ error) {
	if a.FirstBegun != nil && req.Cycle <= 1 && req.Number == 1 {
		a.FirstBegun(req.DeliveryID)
	}
	defer func() { a.Local.settle(req, result, a.now()) }()
	if res, held := a.held(ctx, req, req.EndpointID, outboxID == 0, shareBy); held {
		return res, nil
	}
	started := a.now()
	t, claimed, err := a.load(ctx, req, started)
	if err != nil {
		return SendResult{}, gone(fmt.Errorf("send %s: %w", req.DeliveryID, err))
	}
	res, rec, err := a.attempt(ctx, req, t, started, shareBy, claimed)
	if err != nil || rec == nil {
		return res, err
	}
	if outboxID > 0 {
		rec.OutboxID = outboxID
		if rec.NextAttemptAt != nil {
			res.NextAttemptAt = *rec.NextAttemptAt
		}
		if rec.Outcome, err = json.Marshal(Outcome(res, nil)); err != nil {
			return SendResult{}, fmt.Errorf("send %s: %w", req.DeliveryID, err)
		}
	}
	errs, err := a.record(a.recordLinger(ctx, t), []store.Attempt{*rec})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		return a.unrecorded(ctx, req, t, res, rec, err)
	}
	a.recorded(ctx, req, t, res, rec.KeyIDs)
	return res, nil
}

// SendFirst makes a delivery's first attempt for a sender that holds its
// outbox row (outboxID) and records the attempt and its outcome on that row
// in one statement: once the row has an outcome, the attempt is never made
// again, whoever takes the row next. A full endpoint share is waited for
// until shareBy, which the row's lease leaves room for.
// It is a function, not a method, so it is not registered as an activity.
func SendFirst(ctx context.Context, a *Activities, req SendRequest, outboxID int64, shareBy time.Time) (SendResult, error) {
	return a.send(ctx, req, outboxID, shareBy)
}

// attempt makes one attempt of req to t, started at started, and returns
// its result and the record to store; a nil record means nothing was sent
// (endpoint disabled, paused, busy or rate-limited: res says which). With
// tracing on, the attempt is a span (its request carries it as W3C
// traceparent); its attributes name the attempt and its outcome, never a
// header, a secret, a signature or the payload.
func (a *Activities) attempt(ctx context.Context, req SendRequest, t store.Target, started, shareBy time.Time, claimed *claim) (SendResult, *store.Attempt, error) {
	if a.Tracing == nil {
		return a.try(ctx, req, t, started, shareBy, claimed)
	}
	ctx, span := a.Tracing.Start(ctx, tracing.SpanAttempt, trace.SpanKindClient,
		tracing.App(t.AppID), tracing.Endpoint(t.EndpointID), tracing.Event(t.EventID), tracing.Delivery(req.DeliveryID),
		tracing.Cycle(req.Cycle), tracing.Attempt(req.Number))
	defer span.End()
	res, rec, err := a.try(ctx, req, t, started, shareBy, claimed)
	switch {
	case err != nil:
		span.SetStatus(codes.Error, "attempt not made")
	default:
		span.SetAttributes(tracing.Class(string(res.Class)))
		if res.StatusCode != 0 {
			span.SetAttributes(tracing.StatusCode(res.StatusCode))
		}
		if res.Class != ClassSuccess && rec != nil {
			span.SetStatus(codes.Error, string(res.Class))
		}
	}
	return res, rec, err
}

// try is attempt without its span. An attempt claimed with its target
// (claimed, see load) is made at once.
func (a *Activities) try(ctx context.Context, req SendRequest, t store.Target, started, shareBy time.Time, claimed *claim) (SendResult, *store.Attempt, error) {
	res := SendResult{Number: req.Number, StartedAt: started}
	if claimed != nil {
		defer claimed.release()
		return a.request(ctx, req, t, res, req.At, claimed.until)
	}
	if unavailable(t, &res) {
		return res, nil, nil
	}
	// The endpoint's share first: a wait for it holds no rate-limit slot
	// (which would pass meanwhile, the request then bunching with later
	// slots' ones) and no max_in_flight lease (whose TTL covers the
	// request, not the wait). It is waited for never past the last moment
	// the request still fits before the deadline, nor, for a workflow's
	// attempt, past the worker's stop (a sender's first attempts end
	// before the worker drains; their waits end by QueueMax).
	if last, ok := lastStart(req); ok && shareBy.After(last) {
		shareBy = last
	}
	release, waited, ok := a.Shares.acquire(ctx, a.Open.stopping(), t.EndpointID, shareBy)
	if !ok {
		res.Class = ClassEndpointBusy
		res.Error = "this worker's share of requests to the endpoint is in use; nothing sent yet"
		return res, nil, nil
	}
	defer release()
	if waited {
		// The request goes to the target as it is now: the endpoint may
		// have been paused, disabled or changed (its URL, keys) meanwhile.
		var err error
		if t, err = a.Store.LoadTarget(ctx, req.DeliveryID, a.now()); err != nil {
			return SendResult{}, nil, gone(fmt.Errorf("send %s: %w", req.DeliveryID, err))
		}
		if unavailable(t, &res) {
			return res, nil, nil
		}
		// The endpoint may have stopped answering meanwhile: the requests
		// whose places this one waited for timed out.
		if res, held := a.held(ctx, req, t.EndpointID, false, time.Time{}); held {
			return res, nil, nil
		}
	}
	slot, held, err := a.slotFor(ctx, req, t, &res)
	if err != nil || held {
		return res, nil, err
	}
	if t.MaxInFlight > 0 {
		// The slot is waited for before the lease (a lease held while
		// waiting would leave the endpoint's other attempts busy, their
		// slots unused), the due time (req.At) is not, as for the claim.
		if !a.sleepUntil(ctx, slot) {
			return SendResult{}, nil, ctx.Err()
		}
		lease, ok, err := a.Store.AcquireFlight(ctx, t.EndpointID, t.MaxInFlight, req.Timeout+FlightSlack)
		if err != nil {
			return SendResult{}, nil, fmt.Errorf("send %s: %w", req.DeliveryID, err)
		}
		if !ok {
			res.Class = ClassEndpointBusy
			res.Error = fmt.Sprintf("max_in_flight of %d reached; nothing sent yet", t.MaxInFlight)
			return res, nil, nil
		}
		defer func() {
			if err := a.Store.ReleaseFlight(context.WithoutCancel(ctx), lease); err != nil {
				a.logger().Warn("request lease not released; it expires", "err", err)
			}
		}()
	}
	slot = delivery.Later(slot, req.At)
	if len(t.Keys) == 0 {
		msg := fmt.Sprintf("endpoint %s has no valid signing key; nothing was sent", t.EndpointID)
		return SendResult{}, nil, temporal.NewNonRetryableApplicationError(msg, ErrNoSigningKey, nil)
	}
	if a.Open.draining() {
		res.Class = ClassEndpointBusy
		res.Error = "the worker is stopping; nothing sent yet"
		return res, nil, nil
	}
	// The last check before the request is written: the delivery must
	// still be in flight and its endpoint enabled. The claim's lease also
	// covers what is left to wait for the slot.
	until := claimEnd(req, delivery.Later(a.now(), slot))
	switch claim, err := a.Store.ClaimAttempt(ctx, req.DeliveryID, until); {
	case err != nil:
		return SendResult{}, nil, fmt.Errorf("send %s: %w", req.DeliveryID, err)
	case claim == store.ClaimOnTheWire:
		res.Class = ClassEndpointBusy
		res.Error = "another request of this delivery is on the wire; nothing sent yet"
		return res, nil, nil
	case claim != store.Claimed:
		res.Class = ClassEndpointDisabled
		res.Error = "delivery canceled, or endpoint disabled or deleted; nothing sent"
		return res, nil, nil
	}
	return a.request(ctx, req, t, res, slot, until)
}

// request makes the claimed (until until) attempt req to t at its slot
// (zero: now) and returns its result and the record to store.
func (a *Activities) request(ctx context.Context, req SendRequest, t store.Target, res SendResult, slot, until time.Time) (SendResult, *store.Attempt, error) {
	// What is left of the slot's wait comes last, so no database round
	// trip lies between the slot and the request: requests leave on their
	// slots, not bunched by the claims' latency.
	if !a.sleepUntil(ctx, slot) {
		a.releaseClaim(ctx, req.DeliveryID, until)
		return SendResult{}, nil, ctx.Err()
	}
	// The request starts now: its signature's time, its start and its
	// duration leave out the waits and statements before it.
	started := a.now()
	res.StartedAt = started
	hdr, err := signing.Sign(t.EventID, started, t.Payload, t.Keys)
	if err != nil {
		return SendResult{}, nil, fmt.Errorf("send %s: %w", req.DeliveryID, err)
	}
	keyIDs := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		keyIDs[i] = k.ID
	}
	a.post(ctx, t, hdr, req.Timeout, &res)
	res.DurationMS = a.now().Sub(started).Milliseconds()
	rec := attemptRecord(req, res, keyIDs, a.now())
	// The breaker hears of it before the request's place in its
	// endpoint's share frees: an attempt that waited for that place checks
	// the breaker next.
	a.observe(ctx, t.EndpointID, res)
	return res, rec, nil
}

// injectTrace sets the trace context t's receiver is sent (see
// delivery.TraceContext): the endpoint's choice, else the deployment's.
func (a *Activities) injectTrace(ctx context.Context, t store.Target, h http.Header) {
	mode := cmp.Or(delivery.TraceContext(t.TraceContext), a.ReceiverTraces, delivery.TraceContextDefault)
	switch mode {
	case delivery.TraceLinked:
		a.Tracing.Inject(ctx, h)
	case delivery.TraceFresh:
		if id := a.Tracing.InjectFresh(ctx, h); id != "" {
			trace.SpanFromContext(ctx).SetAttributes(tracing.ReceiverTraceID(id))
		}
	}
}

// post sends the request and fills the HTTP part of res.
func (a *Activities) post(ctx context.Context, t store.Target, hdr signing.Headers, timeout time.Duration, res *SendResult) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(t.Payload))
	if err != nil {
		res.Class, res.Error = ClassPermanent, "invalid endpoint URL: "+err.Error()
		return
	}
	for k, v := range t.Headers {
		httpReq.Header.Set(k, v)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("User-Agent", a.UserAgent)
	// Custom headers cannot name these (the API refuses them). The Standard
	// Webhooks names are sent in their documented lower case.
	for k, v := range hdr.Map() {
		if k == signing.HeaderXSignature {
			httpReq.Header.Set(k, v)
		} else {
			httpReq.Header[k] = []string{v}
		}
	}
	if t.Sequence > 0 {
		httpReq.Header[delivery.HeaderSequence] = []string{strconv.FormatInt(t.Sequence, 10)}
	}
	// The attempt's span, when tracing is on (the signature covers only
	// id, timestamp and body), as the endpoint or the deployment says.
	a.injectTrace(ctx, t, httpReq.Header)
	client, err := a.client(t)
	if err != nil {
		res.Class, res.Error = ClassifyError(err)
		return
	}
	ctx, probe := egress.WithProbe(ctx)
	resp, err := client.Do(httpReq.WithContext(ctx))
	if err != nil {
		res.Class, res.Error = ClassifyError(probe.Wrap(err))
		return
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	res.StatusCode = resp.StatusCode
	res.ResponseExcerpt = excerpt(body)
	if readErr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The status line arrived but the body did not finish in time: the
		// receiver did not answer within the timeout.
		res.Class, res.Error = ClassRetryable, "timeout: response body not complete within the request timeout"
		return
	}
	res.Class = ClassifyStatus(resp.StatusCode)
	switch res.Class {
	case ClassThrottled:
		res.RetryAfter, res.HasRetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), a.now())
		res.Error = "HTTP 429 Too Many Requests"
	case ClassPermanent:
		if resp.StatusCode == http.StatusGone {
			res.Error = "HTTP 410 Gone; the endpoint was disabled"
		} else if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			res.Error = fmt.Sprintf("HTTP %d redirect not followed (Location: %s); check the endpoint's URL", resp.StatusCode, truncate(resp.Header.Get("Location"), 200))
		} else {
			res.Error = fmt.Sprintf("HTTP %d; check the endpoint's configuration", resp.StatusCode)
		}
	case ClassRetryable:
		res.Error = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
}
