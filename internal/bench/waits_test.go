package bench

import (
	"bytes"
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestWaitsQuantileCountsWhatAPhaseAdded: the quantile counts only what
// the phase added to each bucket, reads a bucket at its upper bound (the
// last, unbounded one at its lower bound), and takes the sample at rank
// q·n counted from 0, as summarize does.
func TestWaitsQuantileCountsWhatAPhaseAdded(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0, 0.001, 0.002, 0.005, math.Inf(1)}
	before := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{0, 500, 10, 3, 7}}
	after := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{0, 500 + 90, 10 + 8, 3 + 1, 7 + 1}}
	require.Equal(t, 0.001, histogramQuantile(before, after, 0.5))
	require.Equal(t, 0.002, histogramQuantile(before, after, 0.95))
	require.Equal(t, 0.002, histogramQuantile(before, after, 0.90), "rank 90 is the 91st sample, the first past the second bucket's 90")
	require.Equal(t, 0.005, histogramQuantile(before, after, 0.98), "rank 98 is the 99th sample, the first past the third bucket's 98")
	require.Equal(t, 0.005, histogramQuantile(before, after, 0.995), "the 100th sample is in the +Inf bucket, read at its lower bound")

	require.Zero(t, histogramQuantile(before, before, 0.99), "nothing added")
	require.Zero(t, histogramQuantile(nil, after, 0.99), "no reading")
	require.Zero(t, histogramQuantile(before, &metrics.Float64Histogram{Buckets: buckets[:3], Counts: []uint64{1, 2}}, 0.5), "other buckets")
}

// TestWaitsReadTheRuntime: the runtime has the metric the scheduler's
// wait is read from, and a reading sees the goroutines run and the
// collections made meanwhile (and no acquire of a pool not used).
func TestWaitsReadTheRuntime(t *testing.T) {
	h := readSchedLatencies()
	require.NotNil(t, h, "%s is not a histogram in this runtime", schedLatencies)
	require.Len(t, h.Buckets, len(h.Counts)+1)

	pool, err := pgxpool.New(context.Background(), "postgres://hookrelay@127.0.0.1:1/none")
	require.NoError(t, err, "a pool connects lazily")
	defer pool.Close()
	since := measureWaits(pool)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {})
	}
	wg.Wait()
	runtime.GC()
	w := since()
	require.Positive(t, w.SchedP99MS, "100 goroutines ran")
	require.Positive(t, w.GCPauseMS, "a collection stops the world")
	require.Zero(t, w.HotAcquireWaits)
}

// TestNoisyWaitsPoolTheirRounds: pooled, the waits are summed and the
// scheduler's p99 is the worst round's; the table prints them under the
// rounds' lines.
func TestNoisyWaitsPoolTheirRounds(t *testing.T) {
	var pooled NoisyPhase
	pooled.add(NoisyPhase{Name: "B alone", Waits: Waits{SchedP99MS: 0.5, GCPauseMS: 3, HotAcquireWaits: 2, HotAcquireWaitMS: 1.5}})
	pooled.add(NoisyPhase{Name: "B alone", Waits: Waits{SchedP99MS: 0.25, GCPauseMS: 4, HotAcquireWaits: 1, HotAcquireWaitMS: 0.5}})
	require.Equal(t, Waits{SchedP99MS: 0.5, GCPauseMS: 7, HotAcquireWaits: 3, HotAcquireWaitMS: 2}, pooled.Waits)

	var out bytes.Buffer
	round := []NoisyPhase{{LatenessMS: Latency{P99: 4}}}
	(&NoisyReport{Phases: []NoisyPhase{pooled}, Rounds: [][]NoisyPhase{round, round}}).WriteTable(&out)
	table := out.String()
	require.Regexp(t, `B alone +0\.50 +7\.0 +3, 2\.0\n`, table)
	require.Less(t, bytes.Index(out.Bytes(), []byte("round 2:")), bytes.Index(out.Bytes(), []byte("what this process waited for")))
}
