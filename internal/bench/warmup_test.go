package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/internal/app"
	"hookrelay/signing"
	"hookrelay/store"
)

// fakeDeliveryRunner is a runner on two real receivers and a fake API
// that accepts each event and delivers it, signed, to its receiver, as
// hookrelay would; inFlight says how many accepted events the fake has
// not delivered yet. The fake delivers only once an event is accepted
// while the receivers' record is empty, so that a receipt can only be of
// what this runner sent since: a runner that waits on a record still
// holding earlier receipts never sees its deliveries, and returns with
// them in flight. Its stack's store has no database: hookrelay() fails at
// its lateness query, after its drain, which is what the tests look at.
func fakeDeliveryRunner(t *testing.T, events int) (b *runner, inFlight func() int) {
	t.Helper()
	s := &sink{first: map[string]time.Time{}}
	rs, err := startReceivers(2, s)
	require.NoError(t, err)
	t.Cleanup(rs.stop)
	keys := make([][]signing.Key, len(rs.urls))
	b = &runner{o: Options{Events: events, Concurrency: 4, DrainTimeout: 10 * time.Second}, rs: rs, sink: s, key: "k", appID: "app", client: apiClient()}
	for i, secret := range giveSecrets(t, b) {
		k, err := signing.ParseSecret(secret)
		require.NoError(t, err)
		keys[i] = []signing.Key{{ID: "k", Secret: k}}
		b.types = append(b.types, fmt.Sprintf("t%d", i))
	}
	var n, pending atomic.Int64
	ready := make(chan struct{})
	open := sync.OnceFunc(func() { close(ready) })
	t.Cleanup(open)
	client := &http.Client{Timeout: 10 * time.Second}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Type string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		id := fmt.Sprintf("evt_fake_%d", n.Add(1))
		recv := 0
		if in.Type == "t1" {
			recv = 1
		}
		if s.count() == 0 {
			open()
		}
		pending.Add(1)
		go func() {
			defer pending.Add(-1)
			<-ready
			body := envelope(id, in.Type, 0)
			h, _ := signing.Sign(id, time.Now(), body, keys[recv])
			req, _ := http.NewRequest("POST", rs.urls[recv], bytes.NewReader(body))
			for k, v := range h.Map() {
				req.Header.Set(k, v)
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
	}))
	t.Cleanup(api.Close)
	b.api = api.URL
	dead, err := pgxpool.New(context.Background(), "postgres://fake@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(dead.Close)
	b.stack = &app.Stack{Store: store.New(dead, nil)}
	return b, func() int { return int(pending.Load()) }
}

// TestWarmUpWaitsForItsDeliveries: in Run the baseline's receipts are in
// the receivers' record when the warm-up starts; the warm-up still waits
// for its own deliveries, so none of them (or their retries) lands in
// the measured phase, its CPU, its record or its drain (review finding:
// the warm-up returned after its 0.5 s grace with 20 of its 20
// deliveries in flight).
func TestWarmUpWaitsForItsDeliveries(t *testing.T) {
	b, inFlight := fakeDeliveryRunner(t, 100)
	ctx := context.Background()
	_, err := b.baseline(ctx) // as Run does before the warm-up
	require.NoError(t, err)
	require.Equal(t, 100, b.sink.count(), "the baseline's receipts")
	start := time.Now()
	_, err = b.warmUp(ctx) // a fifth of the events at full speed: 20
	require.ErrorContains(t, err, "first-request lateness", "no database: fails after its drain")
	took := time.Since(start)
	left := inFlight()
	t.Logf("warm-up returned after %v with %d of its 20 deliveries in flight", took.Round(time.Millisecond), left)
	require.Zero(t, left, "the warm-up's deliveries leak into the measured phase")
}

// TestAnalyzeMidwayRunsOnce: the warm-up's ANALYZE runs once, as soon as
// the warm-up is halfway through, before it ends (review finding: a test
// that only read the error passed with the ANALYZE moved to the end), or
// when the warm-up ends first; its error comes back from every wait.
func TestAnalyzeMidwayRunsOnce(t *testing.T) {
	ctx := context.Background()
	var runs atomic.Int64
	ran := make(chan struct{}, 2)
	analyze := func(context.Context) error {
		runs.Add(1)
		ran <- struct{}{}
		return errors.New("analyzed")
	}
	var halfway atomic.Bool
	wait := analyzeMidway(ctx, halfway.Load, analyze)
	select {
	case <-ran:
		t.Fatal("analyzed before the warm-up was halfway")
	case <-time.After(50 * time.Millisecond):
	}
	halfway.Store(true)
	select { // the warm-up still running: wait not called yet
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("not analyzed once the warm-up was halfway")
	}
	require.ErrorContains(t, wait(), "analyzed")
	require.ErrorContains(t, wait(), "analyzed", "a second wait returns the same error")
	require.EqualValues(t, 1, runs.Load())

	wait = analyzeMidway(ctx, func() bool { return false }, analyze)
	require.ErrorContains(t, wait(), "analyzed", "the warm-up ended before its halfway mark: analyzed then")
	require.EqualValues(t, 2, runs.Load())
}
