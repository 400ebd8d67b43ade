package activities_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
)

// TestLapsedPlacesOfAnEndpointComeBack: a place reserved for a run
// whose local attempt never ran in this worker (the run dead-lettered on its
// deadline before sending, was canceled before its first task, or its
// first task went to another worker) lapses at the time its reservation
// named, also while the worker's other endpoints keep Total below full:
// the endpoint gets local first attempts again.
func TestLapsedPlacesOfAnEndpointComeBack(t *testing.T) {
	var l activities.LocalFirsts
	now := time.Now()
	for i := range activities.LocalFirstsPerEndpoint {
		require.True(t, l.Reserve("ep_a", "dlv_"+string(rune('a'+i)), now, now.Add(time.Second)))
	}
	later := now.Add(time.Hour) // every reservation lapsed long ago
	require.True(t, l.Reserve("ep_a", "dlv_new", later, later.Add(time.Second)),
		"an endpoint whose places all lapsed an hour ago gets no local first attempt")
}
