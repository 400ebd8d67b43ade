package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Waits is what work in this process waited for during a phase, beside
// the work itself: the Go scheduler, the garbage collector's pauses, and
// the hot path's connections. It tells a phase whose lateness rose
// because the process ran short of CPU from one whose statements queued
// for a connection.
type Waits struct {
	// SchedP99MS is the 99th percentile of how long a goroutine that
	// could run waited to (runtime/metrics schedLatencies), at its
	// histogram bucket's upper bound.
	SchedP99MS float64 `json:"sched_p99_ms"`
	// GCPauseMS is how long the garbage collector stopped the world in
	// all (runtime.MemStats.PauseTotalNs).
	GCPauseMS float64 `json:"gc_pause_ms"`
	// HotAcquireWaits is how many of the hot pool's acquires found no
	// idle connection; HotAcquireWaitMS how long they waited in all.
	HotAcquireWaits  int64   `json:"hot_acquire_waits"`
	HotAcquireWaitMS float64 `json:"hot_acquire_wait_ms"`
}

// add counts a round's waits in pooled ones: the sums, and the worst
// round's SchedP99MS.
func (pooled *Waits) add(w Waits) {
	pooled.SchedP99MS, pooled.GCPauseMS = max(pooled.SchedP99MS, w.SchedP99MS), pooled.GCPauseMS+w.GCPauseMS
	pooled.HotAcquireWaits, pooled.HotAcquireWaitMS = pooled.HotAcquireWaits+w.HotAcquireWaits, pooled.HotAcquireWaitMS+w.HotAcquireWaitMS
}

// schedLatencies is the runtime metric SchedP99MS reads.
const schedLatencies = "/sched/latencies:seconds"

// measureWaits starts a reading of Waits over hot; since ends it.
func measureWaits(hot *pgxpool.Pool) (since func() Waits) {
	before, paused := readSchedLatencies(), gcPauseTotal()
	stat := hot.Stat()
	waits, waited := stat.EmptyAcquireCount(), stat.EmptyAcquireWaitTime()
	return func() Waits {
		after := readSchedLatencies()
		stat := hot.Stat()
		return Waits{
			SchedP99MS:       histogramQuantile(before, after, 0.99) * 1000,
			GCPauseMS:        float64(gcPauseTotal()-paused) / float64(time.Millisecond),
			HotAcquireWaits:  stat.EmptyAcquireCount() - waits,
			HotAcquireWaitMS: float64(stat.EmptyAcquireWaitTime()-waited) / float64(time.Millisecond),
		}
	}
}

// readSchedLatencies reads schedLatencies (nil if the runtime has none).
func readSchedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// gcPauseTotal is how long the garbage collector has stopped the world
// since the process started.
func gcPauseTotal() time.Duration {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return time.Duration(m.PauseTotalNs)
}

// histogramQuantile is the upper bound of the bucket that holds the q
// quantile of what was counted between before and after (0 if nothing,
// or if either reading is missing or their buckets differ).
func histogramQuantile(before, after *metrics.Float64Histogram, q float64) float64 {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0
	}
	d := make([]uint64, len(after.Counts))
	var n uint64
	for i := range d {
		d[i] = after.Counts[i] - before.Counts[i]
		n += d[i]
	}
	if n == 0 {
		return 0
	}
	// As summarize: the sample at rank q·n, counted from 0.
	rank := uint64(q * float64(n))
	var seen uint64
	for i, c := range d {
		seen += c
		if seen > rank {
			return finiteBound(after.Buckets, i)
		}
	}
	return 0
}

// finiteBound is bucket i's upper bound, or its lower one when the upper
// is +Inf.
func finiteBound(buckets []float64, i int) float64 {
	if b := buckets[i+1]; !math.IsInf(b, 1) {
		return b
	}
	return buckets[i]
}

// writeWaits prints each phase's Waits (pooled over rounds: the sums, and
// the worst round's goroutine wait).
func writeWaits(w io.Writer, phases []NoisyPhase) {
	fmt.Fprintf(w, "\n  %-44s %30s %16s %22s\n", "what this process waited for", "runnable goroutine, p99 (ms)", "GC pauses (ms)", "hot pool: waits, ms")
	for _, p := range phases {
		fmt.Fprintf(w, "  %-44s %30.2f %16.1f %22s\n", p.Name, p.Waits.SchedP99MS, p.Waits.GCPauseMS,
			fmt.Sprintf("%d, %.1f", p.Waits.HotAcquireWaits, p.Waits.HotAcquireWaitMS))
	}
}
