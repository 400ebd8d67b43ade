// Package coalesce turns concurrent calls of one statement into one
// statement for all of them. A call made while a batch runs waits for the
// next batch, so under load N calls cost one round trip, and at low rates a
// call waits for nothing, unless its context says it may wait for company
// (Linger): then the calls that come meanwhile share its statement.
package coalesce

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Defaults of a Coalescer.
const (
	// WorkersDefault is how many batches run at once.
	WorkersDefault = 4
	// MaxDefault is the most calls one batch takes.
	MaxDefault = 256
	// TimeoutDefault bounds one batch (it runs apart from any caller's
	// context, since its result belongs to several callers).
	TimeoutDefault = 30 * time.Second
)

// ErrClosed is the error of a call made after Close.
var ErrClosed = errors.New("coalesce: closed")

// Func runs one batch: out[i] and errs[i] answer in[i]; err fails them all.
type Func[I, O any] func(ctx context.Context, in []I) (out []O, errs []error, err error)

// Coalescer batches calls of one Func.
type Coalescer[I, O any] struct {
	fn    Func[I, O]
	max   int
	calls chan *call[I, O]
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	// gathering holds a token while one worker takes calls into its
	// batch, so calls that come while a batch lingers join it instead of
	// starting batches of their own on idle workers.
	gathering chan struct{}
}

type call[I, O any] struct {
	in   I
	by   time.Time
	out  O
	err  error
	done chan struct{}
}

type lingerKey struct{}

// Linger returns ctx saying that a call made with it may wait until by for
// other calls to share its batch (a batch runs when the earliest by among
// its calls comes, or when it is full). A call whose context says nothing,
// or a time past, runs in the next batch as soon as a worker is free.
func Linger(ctx context.Context, by time.Time) context.Context {
	return context.WithValue(ctx, lingerKey{}, by)
}

// LingerOf is until when ctx lets a call wait for company (zero: not at
// all; see Linger).
func LingerOf(ctx context.Context) time.Time {
	by, _ := ctx.Value(lingerKey{}).(time.Time)
	return by
}

// New starts WorkersDefault workers that run fn on batches of at most
// MaxDefault calls. Close stops them.
func New[I, O any](fn Func[I, O]) *Coalescer[I, O] {
	c := &Coalescer[I, O]{fn: fn, max: MaxDefault, calls: make(chan *call[I, O]), stop: make(chan struct{}), gathering: make(chan struct{}, 1)}
	for range WorkersDefault {
		c.wg.Go(c.work)
	}
	return c
}

// Do runs in, in the next batch, and answers its part. Once taken into a
// batch a call is answered whatever happens to ctx: the statement may have
// applied. A batch that lingers (Linger) runs at its earliest by, so a
// call taken into it may wait that long whatever its own ctx says.
func (c *Coalescer[I, O]) Do(ctx context.Context, in I) (O, error) {
	cl := &call[I, O]{in: in, by: LingerOf(ctx), done: make(chan struct{})}
	var zero O
	select {
	case c.calls <- cl:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-c.stop:
		return zero, ErrClosed
	}
	<-cl.done
	return cl.out, cl.err
}

// Close stops the workers once their batches end; later calls fail with
// ErrClosed.
func (c *Coalescer[I, O]) Close() {
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
}

func (c *Coalescer[I, O]) work() {
	for {
		batch, ok := c.gather()
		if !ok {
			return
		}
		c.run(batch)
	}
}

// gather takes the next batch: a first call, then those that come until
// the earliest by among them (those already waiting, when that is past) or
// until the batch is full. ok is false once the Coalescer is closed and
// no call is left to run.
func (c *Coalescer[I, O]) gather() (batch []*call[I, O], ok bool) {
	select {
	case c.gathering <- struct{}{}:
	case <-c.stop:
		return nil, false
	}
	defer func() { <-c.gathering }()
	select {
	case <-c.stop:
		return nil, false
	case cl := <-c.calls:
		batch = append(batch, cl)
	}
	by := batch[0].by
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for len(batch) < c.max {
		wait := time.Until(by)
		if wait <= 0 {
			// Due: only the calls already waiting join.
			select {
			case cl := <-c.calls:
				batch = append(batch, cl)
				continue
			default:
				return batch, true
			}
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		select {
		case cl := <-c.calls:
			batch = append(batch, cl)
			if cl.by.Before(by) {
				by = cl.by
				timer.Reset(time.Until(by))
			}
		case <-timer.C:
		case <-c.stop:
			// Closing: the calls taken are answered.
			return batch, true
		}
	}
	return batch, true
}

func (c *Coalescer[I, O]) run(batch []*call[I, O]) {
	ctx, cancel := context.WithTimeout(context.Background(), TimeoutDefault)
	defer cancel()
	in := make([]I, len(batch))
	for i, cl := range batch {
		in[i] = cl.in
	}
	out, errs, err := c.fn(ctx, in)
	for i, cl := range batch {
		switch {
		case err != nil:
			cl.err = err
		case i >= len(out):
			cl.err = errors.New("coalesce: batch answered fewer calls than it took")
		default:
			cl.out = out[i]
			if i < len(errs) {
				cl.err = errs[i]
			}
		}
		close(cl.done)
	}
}
