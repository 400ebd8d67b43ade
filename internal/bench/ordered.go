package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"hookrelay/delivery"
)

// OrderedReport is what `hookrelay bench --ordered K` measures on one
// server: the same events drained by an unordered endpoint, then by a fifo
// endpoint with K ordering keys, each endpoint paused while its events are
// accepted and resumed at once, so the figure is delivery, not ingest. The
// receiver answers after 1 ms and checks every key's order.
type OrderedReport struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Keys    int    `json:"keys"`
	Events  int    `json:"events_per_shape"`
	// Shapes are unordered, then fifo with Keys keys.
	Shapes []OrderedShape `json:"shapes"`
	// Ratio is the fifo shape's deliveries/s over the unordered one's.
	Ratio float64 `json:"ratio"`
}

// OrderedShape is one endpoint's drain.
type OrderedShape struct {
	Name          string  `json:"name"`
	Delivered     int     `json:"delivered"`
	PerSecond     float64 `json:"deliveries_per_second"`
	CPUMSDelivery float64 `json:"cpu_ms_per_delivery"`
	// KeyPerSecond are the slowest, median and fastest key's
	// deliveries/s (fifo only).
	KeyPerSecond [3]float64 `json:"key_deliveries_per_second,omitzero"`
	// OutOfOrder counts requests whose key's number or webhook-sequence
	// went back, or skipped one.
	OutOfOrder int `json:"out_of_order"`
}

// orderedSink records each key's requests in arrival order.
type orderedSink struct {
	mu   sync.Mutex
	seen map[string][]keyed
	n    int
	done chan struct{}
	want int
}

type keyed struct {
	i, seq int
	at     time.Time
}

func (s *orderedSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var env struct {
		Data struct {
			Key string `json:"key"`
			I   int    `json:"i"`
		} `json:"data"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &env)
	seq, _ := strconv.Atoi(r.Header.Get(delivery.HeaderSequence))
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	k := s.seen[env.Data.Key]
	if len(k) == 0 || k[len(k)-1].i != env.Data.I {
		s.n++
		if s.n == s.want {
			close(s.done)
		}
	}
	s.seen[env.Data.Key] = append(k, keyed{i: env.Data.I, seq: seq, at: time.Now()})
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// RunOrdered runs the ordered measurement with keys ordering keys.
func RunOrdered(ctx context.Context, o Options, keys int) (*OrderedReport, error) {
	o.withDefaults()
	o.NoShed = true
	b, cleanup, err := startRunner(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rep := &OrderedReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Keys: keys, Events: o.Events,
		Shapes: []OrderedShape{{Name: "unordered"}, {Name: fmt.Sprintf("fifo, %d keys", keys)}}}
	for s, ordering := range []string{"none", "fifo"} {
		sink := &orderedSink{seen: map[string][]keyed{}, done: make(chan struct{}), want: o.Events}
		srv, url, err := serve(sink)
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		var app, ep struct{ ID string }
		if code, err := b.call(ctx, "POST", "/v1/apps", map[string]any{"name": rep.Shapes[s].Name}, &app); err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("create app: %d %v", code, err)
		}
		body := map[string]any{"url": url + "/hook", "ordering": ordering, "retry_schedule": o.Schedule}
		if code, err := b.call(ctx, "POST", "/v1/apps/"+app.ID+"/endpoints", body, &ep); err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("create endpoint: %d %v", code, err)
		}
		stackCPUSince := stackCPU(b.pgPID())
		start := time.Now()
		var mu sync.Mutex
		var failed error
		publish := func(key string, i int) {
			ev := map[string]any{"type": "ledger.entry", "data": map[string]any{"key": key, "i": i}}
			if ordering == "fifo" {
				ev["ordering_key"] = key
			}
			if code, err := b.call(ctx, "POST", "/v1/apps/"+app.ID+"/events", ev, nil); err != nil || code != http.StatusAccepted {
				mu.Lock()
				failed = fmt.Errorf("publish: %d %v", code, err)
				mu.Unlock()
			}
		}
		if ordering == "fifo" {
			publishKeyed(min(o.Concurrency, keys), keys, o.Events, publish)
		} else {
			// Every event its own key: no order to keep.
			fanOut(o.Concurrency, o.Events, 0, func(i int) { publish("u"+strconv.Itoa(i), 1) })
		}
		if failed != nil {
			return nil, failed
		}
		b.progress("ordered: %s: %d events accepted in %s", rep.Shapes[s].Name, o.Events, time.Since(start).Round(time.Millisecond))
		select {
		case <-sink.done:
		case <-time.After(10 * time.Minute):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		elapsed := time.Since(start).Seconds()
		cpu, _ := stackCPUSince()
		sh := &rep.Shapes[s]
		sink.mu.Lock()
		sh.Delivered = sink.n
		sh.PerSecond = float64(sink.n) / elapsed
		if sink.n > 0 {
			sh.CPUMSDelivery = cpu * 1000 / float64(sink.n)
		}
		var perKey []float64
		for _, got := range sink.seen {
			sh.OutOfOrder += outOfOrder(got, ordering == "fifo")
			if len(got) > 0 {
				perKey = append(perKey, float64(len(got))/got[len(got)-1].at.Sub(start).Seconds())
			}
		}
		sink.mu.Unlock()
		if ordering == "fifo" && len(perKey) > 0 {
			slices.Sort(perKey)
			sh.KeyPerSecond = [3]float64{perKey[0], perKey[len(perKey)/2], perKey[len(perKey)-1]}
		}
	}
	b.progress("")
	if rep.Shapes[0].PerSecond > 0 {
		rep.Ratio = rep.Shapes[1].PerSecond / rep.Shapes[0].PerSecond
	}
	return rep, nil
}

// publishKeyed publishes n events over keys keys from clients clients:
// each key's events come from one client, one after another, numbered from
// 1, so acceptance order is number order.
func publishKeyed(clients, keys, n int, publish func(key string, i int)) {
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 1; ; i++ {
				sent := false
				for k := c; k < keys; k += clients {
					if (i-1)*keys+k < n {
						publish(strconv.Itoa(k), i)
						sent = true
					}
				}
				if !sent {
					return
				}
			}
		})
	}
	wg.Wait()
}

// outOfOrder counts the requests of one key that broke its order: a
// number lower than the one before, a number skipped, or (ordered) a
// webhook-sequence other than the number. A request repeated at once (a
// retry) breaks nothing.
func outOfOrder(got []keyed, ordered bool) int {
	bad, last := 0, 0
	for _, g := range got {
		if g.i != last && g.i != last+1 {
			bad++
		}
		if ordered && g.seq != g.i {
			bad++
		}
		last = max(last, g.i)
	}
	return bad
}

// Failed reports whether the run lost a delivery or broke an order.
func (r *OrderedReport) Failed() bool {
	for _, s := range r.Shapes {
		if s.Delivered < r.Events || (s.Name != "unordered" && s.OutOfOrder > 0) {
			return true
		}
	}
	return false
}

// WriteTable prints the ordered measurement.
func (r *OrderedReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\nhookrelay bench --ordered %d — %s, %s\n", r.Keys, r.Date, r.Machine)
	fmt.Fprintf(w, "  %d events per shape published as fast as accepted (each key's from one client, in order), measured from the first to the last delivery; the receiver answers after 1 ms\n\n", r.Events)
	fmt.Fprintf(w, "  %-18s %12s %14s %16s %30s %12s\n", "shape", "delivered", "deliveries/s", "CPU ms/delivery", "per key slowest/median/fastest", "out of order")
	for _, s := range r.Shapes {
		keys := "—"
		if s.KeyPerSecond[2] > 0 {
			keys = fmt.Sprintf("%.1f / %.1f / %.1f", s.KeyPerSecond[0], s.KeyPerSecond[1], s.KeyPerSecond[2])
		}
		order := strconv.Itoa(s.OutOfOrder)
		if s.Name == "unordered" {
			order = "(not ordered)"
		}
		fmt.Fprintf(w, "  %-18s %12d %14.1f %16.2f %30s %12s\n", s.Name, s.Delivered, s.PerSecond, s.CPUMSDelivery, keys, order)
	}
	fmt.Fprintf(w, "\n  fifo with %d keys: %.0f %% of unordered (targets: ≥ 50 %% with 100 keys; ≥ 100 deliveries/s with one key)\n", r.Keys, 100*r.Ratio)
}
