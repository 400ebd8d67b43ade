package slots_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/slots"
)

func TestPlacesPerKeyAndNoWaitWithoutTime(t *testing.T) {
	k := slots.New(2)
	ctx := context.Background()
	require.True(t, k.Enter(ctx, "a", time.Time{}))
	require.True(t, k.Enter(ctx, "a", time.Time{}))
	require.False(t, k.Enter(ctx, "a", time.Time{}), "a's two places are in use and no wait was asked")
	require.False(t, k.Enter(ctx, "a", time.Now().Add(-time.Second)), "a past time does not wait")
	require.True(t, k.Enter(ctx, "b", time.Time{}), "another key has its own places")
	require.Equal(t, 2, k.Open("a"))
	k.Leave("a")
	require.Equal(t, 1, k.Open("a"))
	require.True(t, k.Enter(ctx, "a", time.Time{}))
}

// A waiter is handed the place that frees, in the order the waiters
// asked, and keeps it: the place count does not drop between them.
func TestWaitersAreHandedPlacesInOrder(t *testing.T) {
	k := slots.New(1)
	ctx := context.Background()
	require.True(t, k.Enter(ctx, "a", time.Time{}))
	order := make(chan int, 2)
	for i := range 2 {
		go func() {
			if k.Enter(ctx, "a", time.Now().Add(time.Minute)) {
				order <- i
			}
		}()
		// The second waiter asks after the first is queued.
		require.Eventually(t, func() bool { return waiting(k, "a") == i+1 }, 5*time.Second, time.Millisecond)
	}
	k.Leave("a")
	require.Equal(t, 0, <-order)
	require.Equal(t, 1, k.Open("a"))
	k.Leave("a")
	require.Equal(t, 1, <-order)
	k.Leave("a")
	require.Equal(t, 0, k.Open("a"))
}

// A wait ends with its time or its context, and the waiter leaves the
// queue: a place freed later goes to nobody and is free.
func TestWaitEndsWithItsTimeOrContext(t *testing.T) {
	k := slots.New(1)
	require.True(t, k.Enter(context.Background(), "a", time.Time{}))
	require.False(t, k.Enter(context.Background(), "a", time.Now().Add(20*time.Millisecond)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- k.Enter(ctx, "a", time.Now().Add(time.Minute)) }()
	require.Eventually(t, func() bool { return waiting(k, "a") == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.False(t, <-done)
	require.Equal(t, 0, waiting(k, "a"))
	k.Leave("a")
	require.Equal(t, 0, k.Open("a"))
	require.True(t, k.Enter(context.Background(), "a", time.Time{}))
}

func waiting(k *slots.Keyed, key string) int { return k.Waiting(key) }
