package coalesce

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// batches records each batch a Coalescer runs, with the bubble's clock.
type batches struct {
	mu  sync.Mutex
	ran [][]int
	at  []time.Time
}

func (b *batches) fn(_ context.Context, in []int) ([]int, []error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ran = append(b.ran, slices.Clone(in))
	b.at = append(b.at, time.Now())
	return in, nil, nil
}

func (b *batches) get() ([][]int, []time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ran), slices.Clone(b.at)
}

// start starts a Coalescer recording its batches in b, closed when t
// ends, and says when (on the bubble's clock).
func start(t *testing.T) (b *batches, c *Coalescer[int, int], t0 time.Time) {
	b = &batches{}
	c = New(b.fn)
	t.Cleanup(c.Close)
	return b, c, time.Now()
}

// goDo makes a call of v on c with ctx in its own goroutine; the channel
// gets its answer.
func goDo(ctx context.Context, c *Coalescer[int, int], v int) <-chan int {
	got := make(chan int, 1)
	go func() {
		out, _ := c.Do(ctx, v)
		got <- out
	}()
	return got
}

// TestLingeringCallsShareTheEarliestBy: a call that may linger waits for
// company; calls that come meanwhile join its batch, which runs when the
// earliest by among them comes, not before and not at the later one's.
func TestLingeringCallsShareTheEarliestBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c, t0 := start(t)
		a := goDo(Linger(context.Background(), t0.Add(50*time.Millisecond)), c, 1)
		synctest.Wait()
		<-time.After(20 * time.Millisecond)
		later := goDo(Linger(context.Background(), t0.Add(time.Hour)), c, 2)
		synctest.Wait()
		if ran, _ := b.get(); len(ran) != 0 {
			t.Fatalf("ran %v before the earliest by", ran)
		}
		if <-a != 1 || <-later != 2 {
			t.Fatal("a call got another's answer")
		}
		ran, at := b.get()
		if len(ran) != 1 || !slices.Equal(ran[0], []int{1, 2}) || !at[0].Equal(t0.Add(50*time.Millisecond)) {
			t.Fatalf("batches %v at %v; want one of [1 2] at +50ms", ran, at)
		}
	})
}

// TestCallThatMayNotWaitCutsTheLingerShort: a call with no linger (or one
// past) joins the lingering batch and runs it at once.
func TestCallThatMayNotWaitCutsTheLingerShort(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"no linger":   context.Background(),
		"linger past": Linger(context.Background(), time.Unix(0, 0)),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, c, t0 := start(t)
				a := goDo(Linger(context.Background(), t0.Add(time.Hour)), c, 1)
				synctest.Wait()
				if <-goDo(ctx, c, 2) != 2 || <-a != 1 {
					t.Fatal("a call got another's answer")
				}
				ran, at := b.get()
				if len(ran) != 1 || len(ran[0]) != 2 || !at[0].Equal(t0) {
					t.Fatalf("batches %v at %v; want one of both at once", ran, at)
				}
			})
		})
	}
}

// TestFullBatchDoesNotLinger: a batch that reaches the most calls a batch
// takes runs at once, whatever its calls' linger; the next call starts a
// batch of its own.
func TestFullBatchDoesNotLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c, t0 := start(t)
		ctx := Linger(context.Background(), t0.Add(time.Hour))
		var got []<-chan int
		for i := range MaxDefault + 1 {
			got = append(got, goDo(ctx, c, i))
		}
		synctest.Wait()
		ran, at := b.get()
		if len(ran) != 1 || len(ran[0]) != MaxDefault || !at[0].Equal(t0) {
			t.Fatalf("%d batches; want one full batch at once", len(ran))
		}
		for _, g := range got {
			<-g
		}
		ran, at = b.get()
		if len(ran) != 2 || len(ran[1]) != 1 || !at[1].Equal(t0.Add(time.Hour)) {
			t.Fatalf("%d batches; the last call should run alone at its by", len(ran))
		}
	})
}

// TestCloseAnswersALingeringBatch: Close does not wait out a linger; the
// calls taken are answered.
func TestCloseAnswersALingeringBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b batches
		c := New(b.fn)
		t0 := time.Now()
		a := goDo(Linger(context.Background(), t0.Add(time.Hour)), c, 7)
		synctest.Wait()
		c.Close()
		if got := <-a; got != 7 {
			t.Fatalf("got %d", got)
		}
		if _, at := b.get(); len(at) != 1 || !at[0].Equal(t0) {
			t.Fatalf("ran at %v; want at once on Close", at)
		}
	})
}
