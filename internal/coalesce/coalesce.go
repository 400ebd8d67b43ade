// Package coalesce turns concurrent calls of one statement into one
// statement for all of them. A call made while a batch runs waits for the
// next batch, so under load N calls cost one round trip, and at low rates a
// call waits for nothing.
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
}

type call[I, O any] struct {
	in   I
	out  O
	err  error
	done chan struct{}
}

// New starts WorkersDefault workers that run fn on batches of at most
// MaxDefault calls. Close stops them.
func New[I, O any](fn Func[I, O]) *Coalescer[I, O] {
	c := &Coalescer[I, O]{fn: fn, max: MaxDefault, calls: make(chan *call[I, O]), stop: make(chan struct{})}
	for range WorkersDefault {
		c.wg.Go(c.work)
	}
	return c
}

// Do runs in, in the next batch, and answers its part. Once taken into a
// batch a call is answered whatever happens to ctx: the statement may have
// applied.
func (c *Coalescer[I, O]) Do(ctx context.Context, in I) (O, error) {
	cl := &call[I, O]{in: in, done: make(chan struct{})}
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
		var batch []*call[I, O]
		select {
		case <-c.stop:
			return
		case cl := <-c.calls:
			batch = append(batch, cl)
		}
	more:
		for len(batch) < c.max {
			select {
			case cl := <-c.calls:
				batch = append(batch, cl)
			default:
				break more
			}
		}
		c.run(batch)
	}
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
