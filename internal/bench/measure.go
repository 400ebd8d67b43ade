package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hookrelay ingests Events through the API and waits for their delivery.
func (b *runner) hookrelay(ctx context.Context, rep *Report) error {
	cpu := stackCPU(b.pgPID())
	accepted := make(map[string]time.Time, b.o.Events)
	var mu sync.Mutex
	var ingestLat []float64
	var shed atomic.Int64
	start := time.Now()
	done := make(chan struct{})
	go b.report(done, start, func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted), b.sink.count()
	})
	fanOut(b.o.Concurrency, b.o.Events, b.o.Rate, func(i int) {
		typ := b.types[i%len(b.types)]
		for {
			t0 := time.Now()
			var ev struct{ ID string }
			code, err := b.call(ctx, "POST", "/v1/apps/"+b.appID+"/events", map[string]any{"type": typ, "data": map[string]any{"n": i, "amount": 9900}}, &ev)
			if err == nil && code == http.StatusTooManyRequests {
				shed.Add(1)
				time.Sleep(time.Second) // Retry-After
				continue
			}
			if err != nil || code != http.StatusAccepted {
				return
			}
			t1 := time.Now()
			mu.Lock()
			accepted[ev.ID] = t1
			ingestLat = append(ingestLat, float64(t1.Sub(t0).Microseconds())/1000)
			mu.Unlock()
			return
		}
	})
	ingestDur := time.Since(start).Seconds()
	deadline := time.Now().Add(b.o.DrainTimeout)
	for b.sink.count() < len(accepted) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let late duplicates land
	close(done)
	cpuSecs, pgSecs := cpu()

	b.sink.mu.Lock()
	defer b.sink.mu.Unlock()
	var lat []float64
	var times []time.Time
	for id, at := range accepted {
		if got, ok := b.sink.first[id]; ok {
			lat = append(lat, float64(got.Sub(at).Microseconds())/1000)
			times = append(times, got)
		}
	}
	rep.Delivered = len(lat)
	rep.Lost = len(accepted) - len(lat)
	rep.Duplicates = b.sink.dups
	rep.Shed = int(shed.Load())
	rep.LatencyMS = summarize(lat)
	rep.LatencySamplesMS = lat
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	late, err := b.lateness(ctx, b.appID, ids)
	if err != nil {
		return err
	}
	rep.LatenessMS = summarize(late)
	rep.IngestLatencyMS = summarize(ingestLat)
	rep.IngestPerSecond = float64(len(accepted)) / ingestDur
	rep.CPUSeconds = cpuSecs
	if rep.Delivered > 0 {
		rep.CPUMSPerDelivery = rep.CPUSeconds * 1000 / float64(rep.Delivered)
		rep.PostgresCPUMSPerDelivery = pgSecs * 1000 / float64(rep.Delivered)
	}
	rep.PeakRSSMB = float64(peakRSSKB(os.Getpid())) / 1024
	rep.ThroughputPerSecond, rep.DeliveriesPerSecond = throughput(start, times)
	if rep.Lost > 0 {
		b.o.Logger.Warn("bench: deliveries missing", "lost", rep.Lost)
	}
	return nil
}

func (b *runner) report(done <-chan struct{}, start time.Time, counts func() (int, int)) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			b.progress("")
			return
		case <-t.C:
			acc, del := counts()
			b.progress("hookrelay: %5.0fs  accepted %d/%d  delivered %d", time.Since(start).Seconds(), acc, b.o.Events, del)
		}
	}
}

// throughput buckets first receipts per second since start and returns
// the steady rate: deliveries in the middle 80 % of the delivery interval
// divided by its length.
func throughput(start time.Time, times []time.Time) ([]int, float64) {
	if len(times) == 0 {
		return nil, 0
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	last := times[len(times)-1]
	buckets := make([]int, int(last.Sub(start).Seconds())+1)
	for _, t := range times {
		buckets[int(t.Sub(start).Seconds())]++
	}
	first := times[0]
	span := last.Sub(first)
	lo, hi := first.Add(span/10), last.Add(-span/10)
	n := 0
	for _, t := range times {
		if !t.Before(lo) && !t.After(hi) {
			n++
		}
	}
	if hi.Sub(lo) <= 0 {
		return buckets, float64(len(times)) / max(span.Seconds(), 0.001)
	}
	return buckets, float64(n) / hi.Sub(lo).Seconds()
}

func summarize(v []float64) Latency {
	if len(v) == 0 {
		return Latency{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	q := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Latency{P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: s[len(s)-1]}
}

func machine() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	model := ""
	cores := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "model name") && model == "" {
			model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
		}
		if strings.HasPrefix(line, "processor") {
			cores++
		}
	}
	return fmt.Sprintf("%d cores, %s", cores, model)
}
