package pgcluster

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFreePortsLieBelowTheEphemeralRange: the ports are distinct, free, and
// (where Linux says what its ephemeral range is) outside it, so no outgoing
// connection can take one before its owner binds it.
func TestFreePortsLieBelowTheEphemeralRange(t *testing.T) {
	ports, err := FreePorts(50)
	require.NoError(t, err)
	lo, hi, known := belowEphemeral()
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
		if known {
			require.GreaterOrEqual(t, p, lo)
			require.Less(t, p, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d is not free", p)
		require.NoError(t, l.Close())
	}
}

// TestFreePortsSkipATakenPort: a port something listens on is never
// handed out, even when every pick would land on it.
func TestFreePortsSkipATakenPort(t *testing.T) {
	lo, _, known := belowEphemeral()
	if !known {
		t.Skip("no ephemeral range to pick below")
	}
	held := make([]net.Listener, 0, 200)
	taken := map[int]bool{}
	for p := lo; len(held) < 200; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		held = append(held, l)
		taken[p] = true
	}
	t.Cleanup(func() {
		for _, l := range held {
			l.Close()
		}
	})
	ports, err := FreePorts(100)
	require.NoError(t, err)
	for _, p := range ports {
		require.False(t, taken[p], "port %d is held by the test", p)
	}
}
