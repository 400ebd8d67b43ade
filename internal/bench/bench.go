// Package bench is `hookrelay bench`: it starts the dev stack in a fresh
// data dir, feeds K signature-verifying receivers through the public API,
// and measures delivery throughput, first-attempt latency, ingest, CPU per
// delivery, lost and duplicate receipts; in the same run it measures a plain
// sign-and-POST loop (the HTTP baseline) and a trivial workflow on the same
// Temporal server (the Temporal ceiling).
package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"hookrelay/config"
	"hookrelay/dispatch"
	"hookrelay/internal/app"
	"hookrelay/internal/defaults"
	"hookrelay/internal/pgcluster"
)

// NoisyRoundsDefault is how many rounds the noisy-neighbour run makes
// by default. A phase's p99 is its slowest 1 % of requests, and on a
// 2-core VM it moves with the machine: in A/A runs (Options.QuietA, 20 s
// phases) one B-alone phase's p99 was × 0.78–1.49 of another's, and
// within one run B alone's p99 went from 3.6 to 7.8 ms between rounds.
// Three rounds pool each phase's requests over the whole run.
const NoisyRoundsDefault = 3

// Options of a run. Zero values take the defaults.
type Options struct {
	// Events is how many events hookrelay (and the baseline) deliver.
	Events int
	// Rate is the open-loop ingest rate in events/s; 0 sends as fast as
	// the API accepts with Concurrency clients.
	Rate float64
	// Receivers is the number of receivers and endpoints.
	Receivers int
	// Concurrency is the number of ingest (and baseline) clients.
	Concurrency int
	// Schedule is every endpoint's retry schedule; the default starts
	// with a 0 s wait.
	Schedule []string
	// CeilingWorkflows is how many trivial workflows the ceiling runs.
	CeilingWorkflows int
	// NoEagerStart turns eager workflow start off.
	NoEagerStart bool
	// Modes are the first-attempt modes measured in turn on the same
	// server in the same run (dispatch.Mode names). Defaults to AllModes.
	Modes []string
	// Mode is the first-attempt mode of the runs that measure one mode
	// (--noisy, --ordered, --filters, --tracing). Defaults to the
	// product's default (workflow).
	Mode string
	// Tracing measures CPU per delivery with tracing on as well (sampling
	// 100 %, exported over OTLP/HTTP to an in-process collector that
	// discards), on a second stack after the run, beside the run's own
	// figure with tracing off.
	Tracing bool
	// Shards is the embedded server's history shard count (default 4).
	Shards int
	// DBMaxConns is the pgx pool size (default config.DBMaxConnsDefault).
	DBMaxConns int
	// TemporalSQLite puts the embedded server on SQLite (WAL) instead of
	// Postgres.
	TemporalSQLite bool
	// NoShed turns off the per-app backlog bound (the filter measurement
	// holds every delivery it makes).
	NoShed bool
	// FailFirst is the percentage of deliveries whose first request the
	// receivers answer 502 (the retry is accepted): failures in the
	// stream, each handed to its DeliveryWorkflow. Defaults to 0.
	FailFirst int
	// Rounds is how many times the noisy-neighbour run (RunNoisy) runs
	// its three phases in turn; each phase's figures are pooled over the
	// rounds, so a drift of the machine's speed during the run falls on
	// every phase alike, not on whichever phase it met. Defaults to
	// NoisyRoundsDefault.
	Rounds int
	// QuietA makes the noisy-neighbour run an A/A run: its phases run as
	// usual, A's apps made, but A sends nothing, so every ratio is one of
	// B alone over B alone: how far the ratio moves on this machine with
	// no neighbour (its noise floor). Defaults to false.
	QuietA bool
	// OrderedA makes the noisy-neighbour run's A an app with this many
	// ordering keys on one fifo endpoint (one event each, accepted while
	// the endpoint is paused and resumed as B's phase begins), in place of
	// the slow and silent A: B's lateness alone and beside those keys'
	// sequencers at work. Defaults to 0 (the slow and silent A).
	OrderedA int
	// DrainTimeout bounds the wait for deliveries after ingest ends.
	DrainTimeout time.Duration
	// CPUProfile, when set, receives a CPU profile of this process (API,
	// dispatcher, worker and the embedded server) during the last shape's
	// run.
	CPUProfile io.Writer
	// DataDir is the stack's state; empty uses a fresh temporary directory.
	DataDir string
	// Progress receives a progress line per second; nil is silent.
	Progress io.Writer
	Logger   *slog.Logger
}

func (o *Options) withDefaults() {
	if o.Events <= 0 {
		o.Events = 3000
	}
	if o.Receivers <= 0 {
		o.Receivers = 4
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if len(o.Modes) == 0 {
		o.Modes = AllModes()
	}
	if o.Mode == "" {
		o.Mode = string(dispatch.ModeWorkflow)
	}
	if len(o.Schedule) == 0 {
		o.Schedule = []string{"0s", "5s", "30s", "2m", "10m", "1h"}
	}
	if o.CeilingWorkflows <= 0 {
		o.CeilingWorkflows = min(o.Events, 1000)
	}
	if o.Rounds <= 0 {
		o.Rounds = NoisyRoundsDefault
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// startStack starts the dev stack a run measures, on a fresh private
// Postgres and embedded Temporal; cleanup stops it and removes its data.
func startStack(ctx context.Context, o Options) (stack *app.Stack, cleanup func(), err error) {
	return startStackWith(ctx, o, app.Options{})
}

// startStackWith is startStack with the stack's options (tracing).
func startStackWith(ctx context.Context, o Options, opts app.Options) (stack *app.Stack, cleanup func(), err error) {
	dir := o.DataDir
	var base string
	if dir == "" {
		if base, err = os.MkdirTemp("", "hookrelay-bench-"); err != nil {
			return nil, nil, err
		}
		if err := os.Chmod(base, 0o755); err != nil {
			os.RemoveAll(base)
			return nil, nil, err
		}
		dir = filepath.Join(base, "data")
	}
	removeBase := func() {
		if base != "" {
			os.RemoveAll(base)
		}
	}
	pgPort, err := pgcluster.FreePort()
	if err != nil {
		removeBase()
		return nil, nil, err
	}
	// The product's defaults (the breaker, the shares, the worker's
	// concurrency), as `hookrelay dev` has them, with the bench's own
	// settings over them.
	cfg := defaults.Components()
	cfg.Dev, cfg.DataDir, cfg.HTTPAddr, cfg.PostgresPort, cfg.TemporalAddress = true, dir, "127.0.0.1:0", pgPort, "127.0.0.1:0"
	cfg.TemporalNamespace, cfg.AllowPrivateTargets, cfg.EagerStart = "default", true, !o.NoEagerStart
	cfg.TemporalShards, cfg.TemporalSQLite = o.Shards, sqliteFile(o.TemporalSQLite, dir)
	cfg.DBMaxConns, cfg.MaxBacklog = cmp.Or(o.DBMaxConns, config.DBMaxConnsDefault), map[bool]int{false: config.MaxBacklogDefault, true: 0}[o.NoShed]
	cfg.ShutdownTimeout, cfg.AdminKey, cfg.IngestRate = 10*time.Second, "hr_bench_admin", -1
	cfg.FirstAttempts = cmp.Or(o.Mode, cfg.FirstAttempts)
	stack, err = app.StartDevWith(ctx, cfg, o.Logger, opts)
	if err != nil {
		removeBase()
		return nil, nil, fmt.Errorf("start dev stack: %w", err)
	}
	// Creating the cluster (initdb, the databases, Temporal's schema)
	// leaves the page cache full of writes the kernel flushes when they
	// are 30 s old (vm.dirty_expire_centisecs): that flush delayed a
	// commit's WAL sync by 30-85 ms in the middle of the first measured
	// phase. They are flushed now, before anything is measured.
	syscall.Sync()
	return stack, func() { stack.Close(); removeBase() }, nil
}

// AllModes are the first-attempt modes `hookrelay bench` compares, the
// default first.
func AllModes() []string {
	return []string{string(dispatch.ModeWorkflow), string(dispatch.ModeSender), string(dispatch.ModeCarrier)}
}

// Run measures hookrelay on a dev stack of its own (see Options).
func Run(ctx context.Context, o Options) (*Report, error) {
	o.withDefaults()
	stack, stop, err := startStack(ctx, o)
	if err != nil {
		return nil, err
	}
	cleanup := sync.OnceFunc(stop)
	defer cleanup()
	cfg := stack.Config

	s := &sink{first: map[string]time.Time{}, failFirst: o.FailFirst}
	rs, err := startReceivers(o.Receivers, s)
	if err != nil {
		return nil, err
	}
	defer rs.stop()
	b := &runner{o: o, stack: stack, rs: rs, sink: s, api: "http://" + stack.APIAddr, key: cfg.AdminKey}
	rep := &Report{FailFirst: o.FailFirst, Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Events: o.Events, Receivers: o.Receivers,
		Rate: o.Rate, Schedule: o.Schedule, EagerStart: !o.NoEagerStart, Shards: cmp.Or(o.Shards, 4),
		TemporalStore: map[bool]string{true: "sqlite-wal", false: "postgres"}[o.TemporalSQLite]}
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	b.progress("baseline: plain sign-and-POST loop")
	if rep.BaselinePerSecond, err = b.baseline(ctx); err != nil {
		return nil, err
	}
	// The ceiling is warmed up (a fifth of its runs), read before the main
	// run and again after it; both readings are reported.
	b.progress("temporal ceiling: warm-up")
	if _, err = ceiling(ctx, stack.Client, max(o.CeilingWorkflows/5, 1), o.Concurrency); err != nil {
		return nil, err
	}
	b.progress("temporal ceiling: trivial workflows")
	if rep.TemporalCeilingPerSec, err = ceiling(ctx, stack.Client, o.CeilingWorkflows, o.Concurrency); err != nil {
		return nil, err
	}
	b.progress("hookrelay: warm-up")
	if rep.WarmUpEvents, err = b.warmUp(ctx); err != nil {
		return nil, err
	}
	// Every mode on the same server, in turn.
	shapes := o.Modes
	var runs []*Report
	for i, shape := range shapes {
		run := *rep
		run.Shape = shape
		b.progress("hookrelay: %s", run.Shape)
		stack.Dispatcher.SetMode(dispatch.Mode(shape))
		own0, carried0, direct0 := stack.Dispatcher.Counts()
		local0 := stack.Dispatcher.Local()
		from := time.Now()
		taken0 := stack.Dispatcher.Taken()
		s.reset()
		profiling := o.CPUProfile != nil && i == len(shapes)-1
		if profiling {
			if err := pprof.StartCPUProfile(o.CPUProfile); err != nil {
				return nil, fmt.Errorf("cpu profile: %w", err)
			}
		}
		err := b.hookrelay(ctx, &run)
		if profiling {
			pprof.StopCPUProfile()
		}
		if err != nil {
			return nil, err
		}
		own1, carried1, direct1 := stack.Dispatcher.Counts()
		if n := float64(own1 - own0 + carried1 - carried0 + direct1 - direct0); n > 0 {
			run.CarriedShare = float64(carried1-carried0) / n
			run.DirectShare = float64(direct1-direct0) / n
			run.TakenShare = float64(stack.Dispatcher.Taken()-taken0) / n
			run.LocalShare = float64(stack.Dispatcher.Local()-local0) / n
		}
		if run.Histories, err = histories(ctx, stack.Client, from, time.Now(), run.Delivered); err != nil {
			return nil, err
		}
		runs = append(runs, &run)
	}
	*rep = *runs[0]
	rep.Modes = runs
	b.progress("temporal ceiling: again, after the run")
	if rep.TemporalCeilingAfterPerSec, err = ceiling(ctx, stack.Client, o.CeilingWorkflows, o.Concurrency); err != nil {
		return nil, err
	}
	lo, hi := min(rep.TemporalCeilingPerSec, rep.TemporalCeilingAfterPerSec), max(rep.TemporalCeilingPerSec, rep.TemporalCeilingAfterPerSec)
	rep.CeilingUnstable = lo <= 0 || (hi-lo)/lo > CeilingTolerance
	if o.Tracing {
		// This stack stops first: its idle server would count in the
		// traced run's CPU.
		cleanup()
		b.progress("tracing: a second stack, every delivery traced")
		if rep.Tracing, err = measureTracing(ctx, o, rep); err != nil {
			return nil, err
		}
	}
	if rep.BaselinePerSecond > 0 {
		rep.RatioToBaseline = rep.DeliveriesPerSecond / rep.BaselinePerSecond
	}
	if rep.TemporalCeilingPerSec > 0 {
		rep.RatioToTemporalCeiling = rep.DeliveriesPerSecond / rep.TemporalCeilingPerSec
	}
	return rep, nil
}

func sqliteFile(on bool, dir string) string {
	if !on {
		return ""
	}
	return filepath.Join(dir, "temporal.sqlite")
}

// CeilingTolerance is how far apart, as a fraction, the two ceiling
// readings may be before the report calls the ceiling unstable.
const CeilingTolerance = 0.20
