package bench

import (
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
	// could run waited to (runtime/metrics /sched/latencies:seconds), at
	// its histogram bucket's upper bound.
	SchedP99MS float64 `json:"sched_p99_ms"`
	// GCPauseMS is the sum of the stop-the-world pauses, each at its
	// bucket's upper bound (/sched/pauses/total/gc:seconds).
	GCPauseMS float64 `json:"gc_pause_ms"`
	// HotAcquireWaits is how many of the hot pool's acquires found no
	// idle connection; HotAcquireWaitMS how long they waited in all.
	HotAcquireWaits  int64   `json:"hot_acquire_waits"`
	HotAcquireWaitMS float64 `json:"hot_acquire_wait_ms"`
}

// waitMetrics are the runtime histograms Waits reads.
var waitMetrics = [...]string{"/sched/latencies:seconds", "/sched/pauses/total/gc:seconds"}

// measureWaits starts a reading of Waits over hot; since ends it.
func measureWaits(hot *pgxpool.Pool) (since func() Waits) {
	before := readWaitMetrics()
	stat := hot.Stat()
	waits, waited := stat.EmptyAcquireCount(), stat.EmptyAcquireWaitTime()
	return func() Waits {
		after := readWaitMetrics()
		stat := hot.Stat()
		return Waits{
			SchedP99MS:       histogramQuantile(before[0], after[0], 0.99) * 1000,
			GCPauseMS:        histogramSum(before[1], after[1]) * 1000,
			HotAcquireWaits:  stat.EmptyAcquireCount() - waits,
			HotAcquireWaitMS: float64(stat.EmptyAcquireWaitTime()-waited) / float64(time.Millisecond),
		}
	}
}

func readWaitMetrics() [len(waitMetrics)]*metrics.Float64Histogram {
	samples := make([]metrics.Sample, len(waitMetrics))
	for i, name := range waitMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	var out [len(waitMetrics)]*metrics.Float64Histogram
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindFloat64Histogram {
			out[i] = s.Value.Float64Histogram()
		}
	}
	return out
}

// histogramDelta is each bucket's count in after less before's (nil when
// either is missing or their buckets differ).
func histogramDelta(before, after *metrics.Float64Histogram) []uint64 {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return nil
	}
	d := make([]uint64, len(after.Counts))
	for i := range d {
		d[i] = after.Counts[i] - before.Counts[i]
	}
	return d
}

// histogramQuantile is the upper bound of the bucket that holds the q
// quantile of what was counted between before and after (0 if nothing).
func histogramQuantile(before, after *metrics.Float64Histogram, q float64) float64 {
	d := histogramDelta(before, after)
	var n uint64
	for _, c := range d {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n))
	var seen uint64
	for i, c := range d {
		seen += c
		if seen > rank {
			return finiteBound(after.Buckets, i)
		}
	}
	return finiteBound(after.Buckets, len(d)-1)
}

// histogramSum is the sum of what was counted between before and after,
// each at its bucket's upper bound.
func histogramSum(before, after *metrics.Float64Histogram) float64 {
	var sum float64
	for i, c := range histogramDelta(before, after) {
		sum += float64(c) * finiteBound(after.Buckets, i)
	}
	return sum
}

// finiteBound is bucket i's upper bound, or its lower one when the upper
// is +Inf.
func finiteBound(buckets []float64, i int) float64 {
	if b := buckets[i+1]; b < 1e300 {
		return b
	}
	return buckets[i]
}
