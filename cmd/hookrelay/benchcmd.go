package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"hookrelay/config"
	"hookrelay/internal/bench"
)

// benchCmd runs `hookrelay bench`.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hookrelay bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	fs.IntVar(&o.Events, "events", 3000, "events to deliver")
	fs.Float64Var(&o.Rate, "rate", 0, "open-loop ingest rate in events/s (0 = as fast as accepted)")
	fs.IntVar(&o.Receivers, "receivers", 4, "receivers (one endpoint each)")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "ingest clients")
	fs.IntVar(&o.FailFirst, "fail-first", 0, "percentage of deliveries whose first request the receivers answer 502 (the retry is accepted)")
	schedule := fs.String("schedule", "0s,5s,30s,2m,10m,1h", "every endpoint's retry schedule (first wait first)")
	eager := fs.Bool("eager-start", true, "start delivery workflows eagerly")
	modes := fs.String("modes", strings.Join(bench.AllModes(), ","), "first-attempt modes measured in turn on the same server, the first one's detail printed")
	fs.StringVar(&o.Mode, "first-attempts", "workflow", "first-attempt mode of --noisy, --ordered, --filters and --tracing")
	noisy := fs.Bool("noisy", false, "measure app B's first-attempt lateness alone and beside an app A whose endpoint answers after 5 s, then never (--rate is B's rate, default 80/s; --events B's events per phase)")
	fs.IntVar(&o.Rounds, "rounds", bench.NoisyRoundsDefault, "with --noisy: run its three phases this many times in turn and pool each phase's figures over the rounds (1: one phase each, whose p99 moves with the machine)")
	fs.BoolVar(&o.QuietA, "quiet-a", false, "with --noisy: A sends nothing, so every phase is B alone and each ratio is the noise floor of this machine's ratios (an A/A run)")
	filters := fs.Int("filters", 0, "measure ingest into N paused endpoints with a filter each against the same N without (--events per shape, --rate default 100/s)")
	ordered := fs.Int("ordered", 0, "measure K ordering keys on one fifo endpoint against one unordered endpoint (--events per shape, each accepted paused then drained; the receiver answers after 1 ms and checks every key's order); with --noisy, A is K ordering keys on a fifo endpoint, one event each, resumed as B's phase begins")
	fs.BoolVar(&o.Tracing, "tracing", false, "also measure CPU per delivery with tracing on (sampling 100 %, OTLP/HTTP to an in-process collector that discards), on a second stack after the run")
	fs.IntVar(&o.Shards, "temporal-shards", 4, "embedded Temporal history shards")
	fs.IntVar(&o.DBMaxConns, "db-max-conns", config.DBMaxConnsDefault, "the main pgx pool's size, as hookrelay's --db-max-conns")
	fs.BoolVar(&o.TemporalSQLite, "temporal-sqlite", false, "embedded Temporal on SQLite (WAL) instead of Postgres")
	fs.IntVar(&o.CeilingWorkflows, "ceiling-workflows", 1000, "trivial workflows for the Temporal ceiling")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured shape's run (with --noisy, the last round's third phase's (beside the silent A), whose CPU figure then includes the profiler's) to this file")
	out := fs.String("out", "bench-report.json", "report path")
	svg := fs.String("svg", "bench-report.svg", "chart path")
	if err := fs.Parse(args); err != nil {
		return parseStatus(err)
	}
	o.Schedule = strings.Split(*schedule, ",")
	o.Modes = strings.Split(*modes, ",")
	o.NoEagerStart = !*eager
	o.Progress = stderr
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "hookrelay bench:", err)
			return 1
		}
		defer f.Close()
		o.CPUProfile = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *noisy {
		o.OrderedA = *ordered
		return noisyBench(ctx, o, *out, stdout, stderr)
	}
	if *ordered > 0 {
		rep, err := bench.RunOrdered(ctx, o, *ordered)
		if code := writeReport(rep, err, *out, stdout, stderr); code != 0 || rep.Failed() {
			return 1
		}
		return 0
	}
	if *filters > 0 {
		rep, err := bench.RunFilters(ctx, o, *filters)
		return writeReport(rep, err, *out, stdout, stderr)
	}
	rep, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "\nhookrelay bench:", err)
		return 1
	}
	rep.WriteTable(stdout)
	if err := rep.WriteJSON(*out); err != nil {
		fmt.Fprintln(stderr, "hookrelay bench:", err)
		return 1
	}
	if err := rep.WriteSVG(*svg); err != nil {
		fmt.Fprintln(stderr, "hookrelay bench:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\n  wrote %s and %s\n", *out, *svg)
	if rep.Lost > 0 {
		return 1
	}
	return 0
}

// noisyBench runs `hookrelay bench --noisy` and writes its report to out.
func noisyBench(ctx context.Context, o bench.Options, out string, stdout, stderr io.Writer) int {
	rep, err := bench.RunNoisy(ctx, o)
	return writeReport(rep, err, out, stdout, stderr)
}

// writeReport prints a report's table and writes it as JSON to out.
func writeReport(rep interface{ WriteTable(io.Writer) }, err error, out string, stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintln(stderr, "\nhookrelay bench:", err)
		return 1
	}
	rep.WriteTable(stdout)
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.WriteFile(out, raw, 0o644)
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay bench:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\n  wrote %s\n", out)
	return 0
}
