package bench

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/pgcluster"
)

// TestSmokeSQLite runs the embedded server on SQLite, the store the README
// compares Postgres with.
func TestSmokeSQLite(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skip(err)
	}
	rep, err := Run(context.Background(), Options{Events: 50, CeilingWorkflows: 20, Concurrency: 4, TemporalSQLite: true})
	require.NoError(t, err)
	require.Equal(t, "sqlite-wal", rep.TemporalStore)
	require.Zero(t, rep.Lost)
	require.Equal(t, 50, rep.Delivered)
}

// TestSmoke runs a short bench end to end: every accepted event must be
// delivered (lost = 0). It checks no speed.
func TestSmoke(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skip(err)
	}
	rep, err := Run(context.Background(), Options{Events: 300, CeilingWorkflows: 100, Concurrency: 8})
	require.NoError(t, err)
	require.Equal(t, 300, rep.Delivered)
	require.Zero(t, rep.Lost)
	require.Equal(t, 60, rep.WarmUpEvents, "a fifth of the events at full speed, not measured")
	require.Equal(t, "workflow", rep.Shape, "the default mode first")
	require.Len(t, rep.Modes, 3, "every mode in one run")
	byMode := map[string]*Report{}
	for _, m := range rep.Modes {
		byMode[m.Shape] = m
		require.Equal(t, 300, m.Delivered, m.Shape)
		require.Zero(t, m.Lost, m.Shape)
	}
	wf := byMode["workflow"]
	require.Zero(t, wf.DirectShare, "no first attempt made outside a workflow")
	require.Zero(t, wf.CarriedShare)
	require.GreaterOrEqual(t, wf.Histories.Workflows, 300, "a DeliveryWorkflow per delivery")
	require.GreaterOrEqual(t, wf.Histories.TasksPerDelivery, 1.0)
	require.GreaterOrEqual(t, wf.Histories.EventsPerDelivery, 5.0)
	sender := byMode["sender"]
	require.Equal(t, 1.0, sender.DirectShare, "every first attempt made by the sender")
	require.Less(t, sender.Histories.TasksPerDelivery, wf.Histories.TasksPerDelivery, "the sender starts no workflow for a success")
	require.Positive(t, sender.TakenShare, "rows due at once go from their ingest to the sender (0s first wait)")
	require.Positive(t, byMode["carrier"].CarriedShare, "a burst of 300 goes through carriers")
	require.Zero(t, byMode["carrier"].TakenShare, "carriers take nothing from the ingest")
	require.Positive(t, rep.LatenessMS.P99, "lateness measured from the attempts")
	require.Positive(t, rep.DeliveriesPerSecond)
	require.Positive(t, rep.TemporalCeilingPerSec)
	require.Positive(t, rep.TemporalCeilingAfterPerSec, "the ceiling is read again after the run")
	require.Positive(t, rep.BaselinePerSecond)
	require.Positive(t, rep.CPUSeconds)
	dir := t.TempDir()
	require.NoError(t, rep.WriteJSON(filepath.Join(dir, "bench-report.json")))
	require.NoError(t, rep.WriteSVG(filepath.Join(dir, "bench-report.svg")))
	raw, err := os.ReadFile(filepath.Join(dir, "bench-report.json"))
	require.NoError(t, err)
	for _, key := range []string{`"deliveries_per_second"`, `"latency_ms"`, `"p99"`, `"ingest_per_second"`, `"cpu_ms_per_delivery"`, `"lost"`, `"duplicates"`,
		`"baseline_deliveries_per_second"`, `"ratio_to_baseline"`, `"temporal_ceiling_per_second"`, `"temporal_ceiling_after_per_second"`, `"ceiling_unstable"`, `"modes"`, `"histories"`, `"history_events_per_delivery"`, `"workflow_tasks_per_delivery"`, `"local_share"`, `"carried_share"`, `"direct_share"`, `"taken_share"`, `"first_attempt_lateness_ms"`, `"ratio_to_temporal_ceiling"`, `"schedule"`, `"events"`, `"warm_up_events"`} {
		require.Contains(t, string(raw), key)
	}
}

// TestTreeCPUReadsEveryProcessOnce: the tree of this process (with its
// children) costs one walk of /proc and counts at least this process.
func TestTreeCPUReadsEveryProcessOnce(t *testing.T) {
	own := cpuSeconds(os.Getpid(), true)
	require.GreaterOrEqual(t, treeCPU(os.Getpid()), own)
	ppid, secs, ok := parseStat("42 (a b) c) S 7 1 1 0 -1 4194560 1 0 0 0 250 50 10 5 20 0 1 0 1 1 1", true)
	require.True(t, ok)
	require.Equal(t, 7, ppid)
	require.InDelta(t, 3.15, secs, 1e-9, "(250+50+10+5) ticks")
}

func TestOutOfOrderCountsWhatBreaksAKeysOrder(t *testing.T) {
	k := func(is ...int) []keyed {
		var out []keyed
		for _, i := range is {
			out = append(out, keyed{i: i, seq: i})
		}
		return out
	}
	if n := outOfOrder(k(1, 2, 2, 3), true); n != 0 {
		t.Fatalf("a retry repeated at once breaks nothing: %d", n)
	}
	if n := outOfOrder(k(1, 3, 2), true); n != 2 {
		t.Fatalf("a skip and a step back: %d", n)
	}
	if n := outOfOrder([]keyed{{i: 1, seq: 1}, {i: 2, seq: 3}}, true); n != 1 {
		t.Fatalf("a webhook-sequence other than the number: %d", n)
	}
	if n := outOfOrder([]keyed{{i: 1, seq: 0}}, false); n != 0 {
		t.Fatalf("unordered requests carry no sequence: %d", n)
	}
}

func TestPublishKeyedPublishesEachKeyInOrderFromOneClient(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]int{}
	publishKeyed(3, 5, 23, func(key string, i int) {
		mu.Lock()
		defer mu.Unlock()
		got[key] = append(got[key], i)
	})
	total := 0
	for key, is := range got {
		for j, i := range is {
			if i != j+1 {
				t.Fatalf("key %s: %v", key, is)
			}
		}
		total += len(is)
	}
	if total != 23 || len(got) != 5 {
		t.Fatalf("%d events over %d keys", total, len(got))
	}
}
