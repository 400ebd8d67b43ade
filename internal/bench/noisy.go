package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/pprof"
	"sync"
	"time"
)

// lateness is each first request's lateness in ms for app's deliveries of
// the given events.
func (b *runner) lateness(ctx context.Context, appID string, eventIDs []string) ([]float64, error) {
	late, err := b.stack.Store.FirstRequestLateness(ctx, appID, eventIDs)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(late))
	for i, d := range late {
		out[i] = float64(d.Microseconds()) / 1000
	}
	return out, nil
}

// NoisyReport is what `hookrelay bench --noisy` measures: app B's
// first-attempt lateness alone, beside app A whose endpoint answers after
// 5 s, and beside app A whose endpoint never answers (until the request
// timeout).
type NoisyReport struct {
	Date     string  `json:"date"`
	Machine  string  `json:"machine"`
	RateB    float64 `json:"rate_b"`
	RateA    float64 `json:"rate_a"`
	Seconds  float64 `json:"seconds"`
	Schedule []string
	// QuietA is set for an A/A run (Options.QuietA): A sent nothing.
	QuietA bool `json:"quiet_a,omitempty"`
	// OrderedKeys is A's ordering keys when A is an ordered app
	// (Options.OrderedA).
	OrderedKeys int `json:"ordered_keys,omitempty"`
	// Phases are B alone, B beside a slow A, B beside a silent A, each
	// pooled over the rounds: its lateness over every round's requests,
	// its Delivered, Sent, CPUSeconds and Held the sums of its rounds'.
	Phases []NoisyPhase `json:"phases"`
	// Rounds are each round's phases, when there were more than one
	// (Options.Rounds), each ratio over its own round's alone phase.
	Rounds [][]NoisyPhase `json:"rounds,omitempty"`
}

// NoisyPhase is one phase of a noisy-neighbour run.
type NoisyPhase struct {
	Name string `json:"name"`
	// LatenessMS is B's first-attempt lateness; RatioP99 its p99 over the
	// alone phase's p99.
	LatenessMS Latency `json:"b_lateness_ms"`
	RatioP99   float64 `json:"ratio_p99"`
	// Delivered is B's first attempts made; Sent is B's events.
	Delivered, Sent int
	// CPUSeconds is what this process (hookrelay with its Temporal server)
	// and Postgres used while the phase's events were sent and B's last
	// first attempts made: B's work, and A's beside it.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Held is how many times a start row (A's, as B's endpoint answers at
	// once) was left in the outbox with nothing sent during the phase
	// (dispatch.Dispatcher.Held): its endpoint's share in use, or its
	// endpoint not answering (then also written leased until the probe by
	// its ingest).
	Held int64 `json:"held"`
	// Waits is what this process's work waited for during the phase;
	// pooled, its sums over the rounds and the highest SchedP99MS.
	Waits Waits `json:"waits"`
	// ADelivered is how many of an ordered A's keys were delivered by the
	// phase's end (Options.OrderedA).
	ADelivered int `json:"a_delivered,omitempty"`
}

// RunNoisy runs the noisy-neighbour measurement on one server: app B at
// o.Rate alone, then B while app A (at half B's rate) has an endpoint that
// answers after 5 s, then while A's endpoint never answers until the
// request timeout; o.Rounds times in turn, each phase pooled over them.
// Each phase lasts o.Events/o.Rate seconds.
func RunNoisy(ctx context.Context, o Options) (*NoisyReport, error) {
	o.withDefaults()
	if o.Rate <= 0 {
		o.Rate = 80
	}
	b, cleanup, err := startRunner(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fast, fastURL, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	if err != nil {
		return nil, err
	}
	defer fast.Close()
	// A's receiver: ?slow=1 answers after 5 s; otherwise it never answers
	// (the request timeout ends it).
	stop := make(chan struct{})
	slow, slowURL, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := time.Hour
		if r.URL.Query().Get("slow") != "" {
			wait = 5 * time.Second
		}
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	if err != nil {
		return nil, err
	}
	defer slow.Close()
	defer close(stop)
	appB, err := b.app(ctx, "tenant-b", fastURL)
	if err != nil {
		return nil, err
	}
	as, err := b.tenants(ctx, 1, slowURL, fastURL)
	if err != nil {
		return nil, err
	}
	rep := &NoisyReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), RateB: o.Rate, RateA: o.Rate / 2,
		Seconds: float64(o.Events) / o.Rate, Schedule: o.Schedule}
	if o.QuietA {
		rep.RateA, rep.QuietA = 0, true
	}
	if o.OrderedA > 0 {
		rep.RateA, rep.OrderedKeys = 0, o.OrderedA
	}
	names := phaseNames(o)
	// A warm-up, not measured: B alone for warmUpFor, so the first phase
	// does not pay for the stack's first minutes (pools, caches, Temporal's
	// first tasks, plans made on empty tables; see warmUp) and the ratios
	// compare like with like.
	b.progress("noisy: warm-up")
	warm := *b
	warm.o.Events = int(o.Rate * warmUpFor.Seconds())
	began := time.Now()
	analyzed := analyzeMidway(ctx, func() bool { return time.Since(began) >= warmUpFor/2 }, b.analyze)
	_, _, err = warm.noisyPhase(ctx, appB, "", false)
	// The warm-up's error first; analyzed always waits.
	if err = cmp.Or(err, analyzed()); err != nil {
		return nil, err
	}
	lates := make([][]float64, len(names))
	rep.Phases = make([]NoisyPhase, len(names))
	for r := range o.Rounds {
		if r > 0 {
			// The last round's A apps go, with what the silent one left
			// waiting for its endpoint's probe, before this round's B
			// alone: it would run beside them otherwise.
			if err := b.dropTenants(ctx, as); err != nil {
				return nil, err
			}
			if as, err = b.tenants(ctx, r+1, slowURL, fastURL); err != nil {
				return nil, err
			}
		}
		round := make([]NoisyPhase, len(names))
		for i, noisy := range as.beside(o.QuietA) {
			b.progress("noisy: round %d of %d: %s", r+1, o.Rounds, names[i])
			if err := b.settle(ctx); err != nil {
				return nil, err
			}
			// --cpuprofile profiles the last round's last phase (B beside a
			// silent A).
			profiling := o.CPUProfile != nil && r == o.Rounds-1 && i == len(names)-1
			if profiling {
				if err := pprof.StartCPUProfile(o.CPUProfile); err != nil {
					return nil, err
				}
			}
			cpu := stackCPU(b.pgPID())
			held := b.stack.Dispatcher.Held()
			waits := measureWaits(b.stack.Store.HotPool())
			p, late, err := b.noisyPhase(ctx, appB, noisy, noisy != "" && noisy == as.ordered)
			p.CPUSeconds, _ = cpu()
			p.Waits = waits()
			p.Held = b.stack.Dispatcher.Held() - held
			if profiling {
				pprof.StopCPUProfile()
			}
			if err != nil {
				return nil, err
			}
			p.Name = names[i]
			round[i] = p
			lates[i] = append(lates[i], late...)
			rep.Phases[i].add(p)
			if as.ordered == "" {
				// Let A's open requests end before the next phase.
				time.Sleep(12 * time.Second)
			}
		}
		if o.Rounds > 1 {
			rep.Rounds = append(rep.Rounds, withRatios(round))
		}
	}
	for i := range rep.Phases {
		rep.Phases[i].LatenessMS = summarize(lates[i])
	}
	withRatios(rep.Phases)
	b.progress("")
	return rep, nil
}

// phaseNames names a round's phases: B alone, beside the slow A, beside
// the silent A; with Options.QuietA, B alone three times; with
// Options.OrderedA, B alone and beside the ordered A.
func phaseNames(o Options) []string {
	if o.OrderedA > 0 {
		return []string{"B alone", fmt.Sprintf("B beside A's %d ordering keys draining", o.OrderedA)}
	}
	if o.QuietA {
		return []string{"B alone", "B alone again (A quiet)", "B alone a third time (A quiet)"}
	}
	return []string{"B alone", "B beside A answering after 5 s", "B beside A never answering (10 s timeout)"}
}

// add counts round's p in the pooled phase: its name, and the sums of
// what it delivered, sent, used and held (its lateness is pooled apart,
// sample by sample).
func (pooled *NoisyPhase) add(p NoisyPhase) {
	pooled.Name = p.Name
	pooled.Delivered, pooled.Sent = pooled.Delivered+p.Delivered, pooled.Sent+p.Sent
	pooled.CPUSeconds, pooled.Held = pooled.CPUSeconds+p.CPUSeconds, pooled.Held+p.Held
	pooled.ADelivered += p.ADelivered
	pooled.Waits.add(p.Waits)
}

// withRatios sets each phase's RatioP99, its p99 over the first phase's,
// and returns phases.
func withRatios(phases []NoisyPhase) []NoisyPhase {
	for i := range phases {
		if i > 0 && phases[0].LatenessMS.P99 > 0 {
			phases[i].RatioP99 = phases[i].LatenessMS.P99 / phases[0].LatenessMS.P99
		}
	}
	return phases
}

// noisyPhase sends o.Events events to appB at o.Rate and, when noisy is
// set, events to noisy at half that rate, and measures B's lateness: its
// summary, and each first request's (ms).
func (b *runner) noisyPhase(ctx context.Context, appB, noisy string, ordered bool) (NoisyPhase, []float64, error) {
	var p NoisyPhase
	done := make(chan struct{})
	switch {
	case ordered:
		close(done)
		if err := b.resumeOrdered(ctx, noisy); err != nil {
			return p, nil, err
		}
	case noisy != "":
		go func() {
			defer close(done)
			fanOut(b.o.Concurrency, b.o.Events/2, b.o.Rate/2, func(i int) {
				_, _ = b.call(ctx, "POST", "/v1/apps/"+noisy+"/events", map[string]any{"type": "noise.made", "data": map[string]any{"i": i}}, nil)
			})
		}()
	default:
		close(done)
	}
	var mu sync.Mutex
	var ids []string
	fanOut(b.o.Concurrency, b.o.Events, b.o.Rate, func(i int) {
		var ev struct{ ID string }
		if code, err := b.call(ctx, "POST", "/v1/apps/"+appB+"/events", map[string]any{"type": "order.paid", "data": map[string]any{"i": i}}, &ev); err == nil && code == http.StatusAccepted {
			mu.Lock()
			ids = append(ids, ev.ID)
			mu.Unlock()
		}
	})
	<-done
	// B's last first attempts are due within its first wait.
	time.Sleep(3 * time.Second)
	late, err := b.lateness(ctx, appB, ids)
	if err != nil {
		return p, nil, err
	}
	p.LatenessMS, p.Delivered, p.Sent = summarize(late), len(late), len(ids)
	if ordered {
		if p.ADelivered, err = b.delivered(ctx, noisy); err != nil {
			return p, nil, err
		}
	}
	return p, late, nil
}

// WriteTable prints the noisy-neighbour table.
func (r *NoisyReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\nhookrelay bench --noisy — %s, %s\n", r.Date, r.Machine)
	a := fmt.Sprintf("app A at %.0f events/s", r.RateA)
	switch {
	case r.QuietA:
		a = "app A quiet (its apps made, nothing sent: an A/A run)"
	case r.OrderedKeys > 0:
		a = fmt.Sprintf("app A with %d ordering keys on a fifo endpoint, one event each, accepted paused and resumed as B's phase begins", r.OrderedKeys)
	}
	fmt.Fprintf(w, "  app B at %.0f events/s, %s, %.0f s per phase after %s of B alone not measured (warm-up), schedule %v\n", r.RateB, a, r.Seconds, warmUpFor, r.Schedule)
	if len(r.Rounds) > 1 {
		fmt.Fprintf(w, "  the three phases run %d times in turn; each row pools its phase's rounds (CPU s: their sum)\n", len(r.Rounds))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-44s %28s %10s %12s %8s %6s\n", "phase", "B lateness p50/p95/p99 (ms)", "p99 ratio", "B delivered", "CPU s", "held")
	for _, p := range r.Phases {
		ratio := "—"
		if p.RatioP99 > 0 {
			ratio = fmt.Sprintf("× %.2f", p.RatioP99)
		}
		fmt.Fprintf(w, "  %-44s %28s %10s %12s %8.1f %6d\n", p.Name,
			fmt.Sprintf("%.1f / %.1f / %.1f", p.LatenessMS.P50, p.LatenessMS.P95, p.LatenessMS.P99), ratio, fmt.Sprintf("%d/%d", p.Delivered, p.Sent), p.CPUSeconds, p.Held)
		if p.ADelivered > 0 {
			fmt.Fprintf(w, "  %-44s A's keys delivered by the phase's end (its rounds summed): %d\n", "", p.ADelivered)
		}
	}
	for i, round := range r.Rounds {
		fmt.Fprintf(w, "  round %d: B's p99", i+1)
		for j, p := range round {
			switch {
			case j == 0:
				fmt.Fprintf(w, " %.1f ms", p.LatenessMS.P99)
			case p.RatioP99 > 0:
				fmt.Fprintf(w, ", %.1f ms (× %.2f)", p.LatenessMS.P99, p.RatioP99)
			default:
				fmt.Fprintf(w, ", %.1f ms (—)", p.LatenessMS.P99)
			}
		}
		fmt.Fprintln(w)
	}
	writeWaits(w, r.Phases)
}
