package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hookrelay/activities"
	"hookrelay/internal/app"
	"hookrelay/internal/planwarm"
	"hookrelay/signing"
	"hookrelay/webhook"
	"io"
	"net/http"
	"sync"
	"time"
)

type runner struct {
	o       Options
	stack   *app.Stack
	rs      *receiverSet
	sink    *sink
	api     string
	key     string
	appID   string
	types   []string
	secrets []string
	client  *http.Client
}

func (b *runner) progress(format string, args ...any) {
	if b.o.Progress != nil {
		fmt.Fprintf(b.o.Progress, "\r\033[K"+format, args...)
	}
}

func (b *runner) call(ctx context.Context, method, path string, body any, out any) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, b.api+path, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

// startRunner starts a private stack for o and a runner that calls its
// API with the admin key; cleanup stops the stack.
func startRunner(ctx context.Context, o Options) (b *runner, cleanup func(), err error) {
	stack, cleanup, err := startStack(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	return &runner{o: o, stack: stack, api: "http://" + stack.APIAddr, key: stack.Config.AdminKey, client: apiClient()}, cleanup, nil
}

// apiClient is the load generator's client of the API.
func apiClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// setup creates one app and one endpoint per receiver, each subscribed to
// its own event type, so every event is exactly one delivery.
func (b *runner) setup(ctx context.Context) error {
	b.client = apiClient()
	var a struct{ ID string }
	if code, err := b.call(ctx, "POST", "/v1/apps", map[string]any{"name": "bench"}, &a); err != nil || code != 201 {
		return fmt.Errorf("create app: %d %v", code, err)
	}
	b.appID = a.ID
	for i, u := range b.rs.urls {
		typ := fmt.Sprintf("bench.r%d", i)
		var ep struct{ Secret string }
		code, err := b.call(ctx, "POST", "/v1/apps/"+a.ID+"/endpoints", map[string]any{
			"url": u, "event_types": []string{typ}, "retry_schedule": b.o.Schedule}, &ep)
		if err != nil || code != 201 {
			return fmt.Errorf("create endpoint: %d %v", code, err)
		}
		v, err := webhook.NewVerifier(ep.Secret)
		if err != nil {
			return err
		}
		b.rs.verifiers[i].Store(v)
		b.types = append(b.types, typ)
		b.secrets = append(b.secrets, ep.Secret)
	}
	return nil
}

// baseline signs and POSTs the same envelopes to the same receivers with
// the attempt client's settings: no Temporal, no Postgres.
func (b *runner) baseline(ctx context.Context) (float64, error) {
	b.sink.reset()
	client := activities.NewHTTPClient(false)
	keys := make([][]signing.Key, len(b.secrets))
	for i, s := range b.secrets {
		k, err := signing.ParseSecret(s)
		if err != nil {
			return 0, err
		}
		keys[i] = []signing.Key{{ID: "k", Secret: k}}
	}
	start := time.Now()
	// It sends once: a --fail-first 502 would only lose its requests.
	b.sink.withoutFailures(func() { b.baselineLoop(ctx, client, keys) })
	elapsed := time.Since(start).Seconds()
	return float64(b.sink.count()) / elapsed, nil
}

// baselineLoop makes the baseline's requests.
func (b *runner) baselineLoop(ctx context.Context, client *http.Client, keys [][]signing.Key) {
	fanOut(b.o.Concurrency, b.o.Events, 0, func(i int) {
		r := i % len(b.rs.urls)
		id := fmt.Sprintf("evt_baseline_%d", i)
		body := envelope(id, b.types[r], i)
		h, _ := signing.Sign(id, time.Now(), body, keys[r])
		req, _ := http.NewRequestWithContext(ctx, "POST", b.rs.urls[r], bytes.NewReader(body))
		for k, v := range h.Map() {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// fanOut calls fn(0..n-1) from concurrency goroutines; a positive rate
// releases call i at i/rate seconds (open loop), else as fast as they go.
func fanOut(concurrency, n int, rate float64, fn func(i int)) {
	jobs := make(chan int, concurrency)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				fn(i)
			}
		}()
	}
	start := time.Now()
	for i := range n {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

func envelope(id, typ string, i int) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":"2026-11-30T10:00:00Z","api_version":"2026-11-01","data":{"n":%d,"amount":9900,"currency":"usd"}}`, id, typ, i))
}

// warmUp sends what the measured run sends, at its rate, for warmUpFor
// (at full speed, a fifth of its events), and analyzes the database
// halfway through (analyzeMidway): what follows is measured on tables that hold rows and have
// statistics, as a running deployment's do. Autovacuum analyzes a new
// table once 50 of its rows changed, at its next visit (every
// autovacuum_naptime, 60 s by default); until then Postgres plans for
// empty tables, and the bench's first minute, its whole run, would be
// measured on those plans, or on new ones from the moment autovacuum
// came by.
//
// The receivers' record is cleared first, so the warm-up waits for its own
// deliveries (and their retries) to land: none of them is still on its
// way when the measured run starts. A warm-up that lost a delivery is an
// error.
func (b *runner) warmUp(ctx context.Context) (events int, err error) {
	warm := *b
	warm.o.Events = max(int(b.o.Rate*warmUpFor.Seconds()), 1)
	if b.o.Rate <= 0 {
		warm.o.Events = max(b.o.Events/5, 1)
	}
	b.sink.reset()
	analyzed := analyzeMidway(ctx, func() bool { return b.sink.count() >= max(warm.o.Events/2, 1) }, b.analyze)
	var rep Report
	// The warm-up's error first; analyzed always waits.
	if err := cmp.Or(warm.hookrelay(ctx, &rep), analyzed()); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	if rep.Lost > 0 {
		return 0, fmt.Errorf("warm-up: %d of %d deliveries not made within %s", rep.Lost, rep.Lost+rep.Delivered, b.o.DrainTimeout)
	}
	return warm.o.Events, nil
}

// analyzeMidway runs analyze (runner.analyze: ANALYZE) once halfway
// says a warm-up is halfway through, while its traffic still flows: the
// statistics then see the outbox holding rows, as a running deployment's
// autovacuum does, not empty as it is once the warm-up's deliveries have
// all landed. With an empty outbox in its statistics the planner
// estimates it at no rows whatever its size, and the record's kept plan
// read the whole outbox for every attempt (83 rows at 80 events/s with the
// default schedule). The returned func waits for the ANALYZE (or runs it,
// when the warm-up ended first) and returns its error; it runs analyze
// once however often it is called.
func analyzeMidway(ctx context.Context, halfway func() bool, analyze func(context.Context) error) (wait func() error) {
	ended := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
	wait:
		for !halfway() {
			select {
			case <-ended:
				break wait
			case <-t.C:
			}
		}
		done <- analyze(ctx)
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			close(ended)
			err = <-done
		})
		return err
	}
}

// warmUpFor is how long a bench sends before it measures.
const warmUpFor = 10 * time.Second

// analyze gathers the statistics of every table of hookrelay's database.
func (b *runner) analyze(ctx context.Context) error {
	return b.exec(ctx, "analyze", `ANALYZE`)
}

// exec runs each statement on hookrelay's database, in order; what names
// the step in its error.
func (b *runner) exec(ctx context.Context, what string, statements ...string) error {
	if b.stack == nil || b.stack.Pool == nil {
		return fmt.Errorf("%s: no database", what)
	}
	for _, q := range statements {
		if _, err := b.stack.Pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %s: %w", what, q, err)
		}
	}
	return nil
}

// settle starts a measured phase from the state every other phase starts
// from, so a comparison between phases measures what differs in their
// load, not which of them Postgres's upkeep fell in:
//   - VACUUM ANALYZE of hookrelay's database does now what the earlier
//     phases' writes made due, which autovacuum would otherwise do (and
//     write WAL for) inside the next phase: one such run kept B's requests
//     10-57 ms late for seconds of a `--noisy` phase;
//   - CHECKPOINT lets the WAL files before it be recycled, so the phase
//     does not create and zero a new 16 MB one, which stalled every
//     commit 40-60 ms on these machines (a young cluster creates one per
//     16 MB of WAL until its first checkpoint);
//   - the VACUUM dropped the kept plans of the hot pool's connections,
//     idle then: a pass of the plan warmer (planwarm.Warmer.Warm, which the
//     stack's own warmer starts within its interval of a VACUUM) makes
//     them again before the phase, not on its first requests (without it,
//     the worst of B's first three requests beside A was 21.1-54.5 ms late
//     in 5 of 6 such phases of three runs; with it, 3.4-6.3 ms in 6 of 6).
//
// Upkeep is equalised, not removed: what a phase's own writes make due
// still counts (an autovacuum inside the phase, and the plans it drops on
// the connections in use), and each phase starts with the full-page
// writes that follow a checkpoint. The bench's private cluster runs as
// its superuser, which may CHECKPOINT.
func (b *runner) settle(ctx context.Context) error {
	if err := b.exec(ctx, "settle", `VACUUM (ANALYZE)`, `CHECKPOINT`); err != nil {
		return err
	}
	if _, err := (&planwarm.Warmer{Pool: b.stack.Store.HotPool()}).Warm(ctx); err != nil {
		// As the stack's warmer does: the plans are made at their next
		// use, and the phase goes on (the line stays, above the progress).
		b.progress("settle: the hot pool's plans not all made again, the rest at their next use: %v\n", err)
	}
	return nil
}
