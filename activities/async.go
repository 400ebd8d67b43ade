package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// Open tracks asynchronous attempts (see Activities.Completer).
type Open struct {
	wg sync.WaitGroup
	// stopped ends when the worker stops (Drain): waits for an endpoint's
	// share end, with nothing sent, and no request starts.
	once    sync.Once
	stopped context.Context
	stop    context.CancelFunc
}

// stopping is a context that ends once Drain began.
func (o *Open) stopping() context.Context {
	o.once.Do(func() { o.stopped, o.stop = context.WithCancel(context.Background()) })
	return o.stopped
}

// untilStop returns ctx, ended too when stop ends (the worker stops), and
// the func that releases it.
func untilStop(ctx, stop context.Context) (context.Context, func()) {
	wctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(stop, cancel)
	return wctx, func() { unhook(); cancel() }
}

// draining reports whether Drain began: no request starts any more.
func (o *Open) draining() bool { return o.stopping().Err() != nil }

// Drain ends the waits for an endpoint's share (their attempts send
// nothing), then waits until every asynchronous attempt completed or ctx
// ended.
func (o *Open) Drain(ctx context.Context) {
	o.stopping()
	o.stop()
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Completer completes an activity that returned activity.ErrResultPending
// (client.Client satisfies it).
type Completer interface {
	CompleteActivity(ctx context.Context, taskToken []byte, result any, err error) error
}

// sendAsync makes req in a goroutine bounded by its timeout and record
// slack, and completes the activity of token with its answer.
func (a *Activities) sendAsync(ctx context.Context, token []byte, req SendRequest) {
	a.Open.wg.Add(1)
	go func() {
		defer a.Open.wg.Done()
		base := context.WithoutCancel(ctx)
		// The answer must reach the workflow before the activity's own
		// deadline: the attempt gets what is left of it, less the time to
		// report.
		deadline := time.Now().Add(req.Timeout + RecordSlack)
		if d := activity.GetInfo(ctx).Deadline; !d.IsZero() {
			deadline = d.Add(-reportSlack)
		}
		sctx, cancel := context.WithDeadline(base, deadline)
		defer cancel()
		// A full endpoint share is waited for in what the activity's time
		// leaves past the request and its record (none for an activity a
		// workflow scheduled before it gave that time: see
		// attempt.ShareWaitMax).
		res, err := a.send(sctx, req, 0, deadline.Add(-req.Timeout-RecordSlack))
		cctx, cancelComplete := context.WithTimeout(base, CompleteTimeout)
		defer cancelComplete()
		if err := a.Completer.CompleteActivity(cctx, token, res, err); err != nil {
			// The activity times out and the workflow goes on; the record
			// in Postgres stands.
			a.logger().Warn("attempt not reported to its workflow; it times out", "delivery_id", req.DeliveryID, "err", err)
		}
	}()
}
