package coalesce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentCallsShareBatches: 2000 concurrent calls are answered
// each with its own result, in fewer batches than calls; a lone call
// waits for nothing.
func TestConcurrentCallsShareBatches(t *testing.T) {
	var batches atomic.Int64
	release := make(chan struct{})
	c := New(func(_ context.Context, in []int) ([]int, []error, error) {
		batches.Add(1)
		<-release
		out := make([]int, len(in))
		errs := make([]error, len(in))
		for i, v := range in {
			out[i] = v * 2
			if v%7 == 0 {
				errs[i] = errors.New("seven")
			}
		}
		return out, errs, nil
	})
	defer c.Close()
	close(release)
	got, err := c.Do(context.Background(), 21)
	if err == nil || got != 42 {
		t.Fatalf("lone call: %d, %v", got, err)
	}
	var wg sync.WaitGroup
	const n = 2000
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			got, err := c.Do(context.Background(), i)
			if got != 2*i || (err != nil) != (i%7 == 0) {
				t.Errorf("call %d: %d, %v", i, got, err)
			}
		})
	}
	wg.Wait()
	if b := batches.Load(); b >= n {
		t.Fatalf("%d batches for %d calls", b, n)
	}
	t.Logf("%d concurrent calls in %d batches", n, batches.Load()-1)
}

// TestFailedBatchFailsEveryCall and TestClosed: a batch error reaches each
// of its calls; a call after Close fails at once.
func TestFailedBatchFailsEveryCall(t *testing.T) {
	boom := errors.New("boom")
	c := New(func(context.Context, []int) ([]int, []error, error) { return nil, nil, boom })
	if _, err := c.Do(context.Background(), 1); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	c.Close()
	done := make(chan error, 1)
	go func() { _, err := c.Do(context.Background(), 1); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call after Close hangs")
	}
}
