package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLingerEndsForARoundAskedNow: the linger after a round ends as soon
// as a NOTIFY asks for a round now (that round runs at once); a round
// asked for later does not end it.
func TestLingerEndsForARoundAskedNow(t *testing.T) {
	t.Parallel()
	w := &wakeup{signal: make(chan struct{}, 1)}
	ctx := context.Background()

	w.request(time.Now().Add(time.Hour))
	ended := make(chan bool)
	go func() { ended <- w.sleep(ctx, time.Now().Add(time.Hour), 0) }()
	select {
	case <-ended:
		t.Fatal("a round asked for in an hour ended the linger")
	case <-time.After(50 * time.Millisecond):
	}
	require.False(t, w.due())
	w.request(time.Now())
	require.True(t, <-ended, "a round asked for now ends the linger")
	require.True(t, w.due())
	w.take()
	require.False(t, w.due())
}
