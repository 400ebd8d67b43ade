package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"

	"hookrelay/receiver"
)

// receiverSecrets gathers the receiver's secrets from --secret flags, the
// environment (comma or space separated) and a file (one per line): the
// last two stay out of the process list.
func receiverSecrets(flagged []string, env, file string) ([]string, error) {
	out := append([]string(nil), flagged...)
	out = append(out, strings.FieldsFunc(env, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })...)
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("secrets file: %w", err)
		}
		out = append(out, strings.Fields(string(raw))...)
	}
	return out, nil
}

// receiverCmd runs the reference receiver until interrupted.
func receiverCmd(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("hookrelay receiver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var secrets, publicKeys multi
	fs.Var(&secrets, "secret", "whsec_ secret, or tenant=whsec_… to dedupe per tenant; repeat to accept several (rotation, tenants). Visible to other users in ps: prefer --secrets-file or HOOKRELAY_RECEIVER_SECRETS")
	secretsFile := fs.String("secrets-file", "", "file of whsec_ secrets, one per line, newest first")
	controlToken := fs.String("control-token", os.Getenv("HOOKRELAY_RECEIVER_CONTROL_TOKEN"), "bearer token POST /control requires; without one only loopback clients may call it (env HOOKRELAY_RECEIVER_CONTROL_TOKEN)")
	fs.Var(&publicKeys, "public-key", "whpk_ Ed25519 public key; repeatable")
	addr := fs.String("addr", "127.0.0.1:9000", "listen address (POST /webhook, GET /stats, POST /control)")
	dbURL := fs.String("database-url", os.Getenv("HOOKRELAY_RECEIVER_DATABASE_URL"), "the receiver's Postgres (env HOOKRELAY_RECEIVER_DATABASE_URL)")
	source := fs.String("source", "hookrelay", "sender name in dedupe keys")
	fail := fs.String("fail", receiver.FailNone, "injected failure: none, 502, sleep (commit, then answer after --sleep), rollback (business write fails)")
	failTimes := fs.Int("fail-times", 1, "deliveries of each event the failure hits (0 = all)")
	sleep := fs.Duration("sleep", 15*time.Second, "how long --fail sleep waits before answering")
	maxBacklog := fs.Int("max-backlog", 0, "answer 503 + Retry-After while more side effects than this wait in the inbox (0 = never)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return parseStatus(err)
	}
	secrets, err := receiverSecrets(secrets, os.Getenv("HOOKRELAY_RECEIVER_SECRETS"), *secretsFile)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay receiver:", err)
		return 2
	}
	if *dbURL == "" || (len(secrets) == 0 && len(publicKeys) == 0) {
		fmt.Fprintln(stderr, "hookrelay receiver: --database-url and at least one --secret or --public-key are required")
		return 2
	}
	logger := newLogger(*logLevel, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay receiver:", err)
		return 1
	}
	defer pool.Close()
	rc, err := receiver.New(ctx, receiver.Config{Secrets: secrets, PublicKeys: publicKeys, Source: *source, Pool: pool,
		Fail: *fail, FailTimes: *failTimes, Sleep: *sleep, ControlToken: *controlToken, MaxBacklog: *maxBacklog, Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay receiver:", err)
		return 2
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay receiver:", err)
		return 1
	}
	srv := &http.Server{Handler: rc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rc.Worker().Run(ctx) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logger.Info("receiver listening", "addr", l.Addr().String(), "fail", *fail, "fail_times", *failTimes)
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "hookrelay receiver:", err)
		return 1
	}
	return 0
}
