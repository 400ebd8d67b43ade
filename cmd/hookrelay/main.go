// Command hookrelay delivers webhooks durably on Temporal and Postgres.
//
//	hookrelay dev       the whole product on one machine
//	hookrelay api       the REST API (production)
//	hookrelay worker    the Temporal worker and outbox dispatcher (production)
//	hookrelay migrate   apply database migrations
//	hookrelay setup-temporal  prepare the Temporal namespace (production)
//	hookrelay sign      print the signature headers for a body
//	hookrelay verify    check a webhook's signature headers
//	hookrelay receiver  the reference receiver, for demos and tests
//	hookrelay bench     the load harness
//	hookrelay probe     a container health check (GET a URL, exit 0 on 2xx)
//	hookrelay version   print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"hookrelay/api"
	"hookrelay/config"
	"hookrelay/internal/app"
	"hookrelay/internal/defaults"
)

const usage = `usage: hookrelay <command> [flags]

commands:
  dev       run the whole product on this machine (embedded Temporal + UI, private Postgres)
  api       run the REST API against external Postgres and Temporal
  worker    run the delivery worker and outbox dispatcher
  migrate   apply database migrations
  setup-temporal
            register the Temporal namespace (when missing) and the search
            attributes hookrelay sets (needs the cluster operator's rights)
  rotate-secret-key
            seal every secret and custom header again with the newest key of
            HOOKRELAY_SECRET_KEY (comma-separated, newest first)
  sign      print both signature header sets for a body on stdin
  verify    verify a webhook's signature headers (exit 0 valid, 1 not)
  receiver  run the reference receiver (verify, dedupe, durable inbox, failure injection)
  bench     measure delivery throughput, latency and cost on a fresh dev stack
  probe     GET a URL, exit 0 on 2xx (a container health check)
  version   print the version (CHANGELOG.md says what each holds)

Run 'hookrelay <command> -h' for the command's flags.
`

// GCPercentDefault is the garbage collector's target (GOGC) of a hookrelay
// process when GOGC is not set: the Temporal server and SDK allocate a
// little for every workflow task, so a higher target trades a larger peak
// heap for less CPU per delivery (docs/benchmarks.md).
const GCPercentDefault = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercentDefault)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "sign":
		return sign(rest, stdin, stdout, stderr)
	case "verify":
		return verify(rest, stdin, stdout, stderr)
	case "receiver":
		return receiverCmd(rest, stderr)
	case "bench":
		return benchCmd(rest, stdout, stderr)
	case "probe":
		return probe(rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "hookrelay", api.Version)
		return 0
	case "dev", "api", "worker", "migrate", "rotate-secret-key", "setup-temporal":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "hookrelay: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, err := config.Load(cmd, cmd == "dev", rest, os.Getenv, defaults.Components())
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay:", err)
		return 2
	}
	logger := newLogger(cfg.LogLevel, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "dev":
		err = app.Dev(ctx, cfg, logger)
	case "api":
		err = app.API(ctx, cfg, logger)
	case "worker":
		err = app.Worker(ctx, cfg, logger)
	case "migrate":
		err = app.Migrate(ctx, cfg, logger)
	case "rotate-secret-key":
		err = app.RotateSecretKey(ctx, cfg, logger)
	case "setup-temporal":
		err = app.SetupTemporal(ctx, cfg, logger)
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay:", err)
		return 1
	}
	return 0
}

// parseStatus is the exit status of a failed flag parse: help is not an
// error (the flag package has printed the usage).
func parseStatus(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func newLogger(level string, w io.Writer) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
