package bench

import (
	"math"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWaitsReadWhatAPhaseAdded: the quantile and the sum count only what
// the phase added to each bucket, at its upper bound (the lower one for
// the last, unbounded bucket).
func TestWaitsReadWhatAPhaseAdded(t *testing.T) {
	buckets := []float64{0, 0.001, 0.002, 0.010, math.Inf(1)}
	before := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{500, 10, 3, 0}}
	after := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{500 + 90, 10 + 8, 3 + 1, 1}}
	require.Equal(t, 0.001, histogramQuantile(before, after, 0.5))
	require.Equal(t, 0.002, histogramQuantile(before, after, 0.95))
	require.Equal(t, 0.010, histogramQuantile(before, after, 0.995), "the +Inf bucket reads as its lower bound")
	require.InDelta(t, 90*0.001+8*0.002+1*0.010+1*0.010, histogramSum(before, after), 1e-12)

	require.Zero(t, histogramQuantile(before, before, 0.99), "nothing added")
	require.Zero(t, histogramQuantile(nil, after, 0.99), "no reading")
	require.Zero(t, histogramSum(before, &metrics.Float64Histogram{Buckets: buckets[:3], Counts: []uint64{1, 2}}), "other buckets")
}

// TestNoisyWaitsPoolTheirRounds: pooled, the waits are summed and the
// scheduler's p99 is the worst round's.
func TestNoisyWaitsPoolTheirRounds(t *testing.T) {
	var pooled NoisyPhase
	pooled.add(NoisyPhase{Waits: Waits{SchedP99MS: 0.5, GCPauseMS: 3, HotAcquireWaits: 2, HotAcquireWaitMS: 1.5}})
	pooled.add(NoisyPhase{Waits: Waits{SchedP99MS: 0.25, GCPauseMS: 4, HotAcquireWaits: 1, HotAcquireWaitMS: 0.5}})
	require.Equal(t, Waits{SchedP99MS: 0.5, GCPauseMS: 7, HotAcquireWaits: 3, HotAcquireWaitMS: 2}, pooled.Waits)
}
