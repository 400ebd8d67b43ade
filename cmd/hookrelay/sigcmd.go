package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"hookrelay/signing"
	"hookrelay/webhook"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// sign prints both header sets for the body on stdin.
func sign(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hookrelay sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var secrets multi
	fs.Var(&secrets, "secret", "whsec_ secret or whsk_ Ed25519 signing key; repeat for a rotation (newest first)")
	id := fs.String("id", "", "event ID (webhook-id)")
	ts := fs.Int64("timestamp", 0, "unix seconds (default now)")
	if err := fs.Parse(args); err != nil {
		return parseStatus(err)
	}
	if len(secrets) == 0 || *id == "" {
		fmt.Fprintln(stderr, "hookrelay sign: --secret and --id are required")
		return 2
	}
	keys := make([]signing.Key, len(secrets))
	for i, s := range secrets {
		k, err := signing.ParseKey("", s)
		if err != nil {
			fmt.Fprintf(stderr, "hookrelay sign: secret %d: %v\n", i+1, err)
			return 2
		}
		keys[i] = k
	}
	body, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay sign: read body:", err)
		return 1
	}
	at := time.Now()
	if *ts != 0 {
		at = time.Unix(*ts, 0)
	}
	h, err := signing.Sign(*id, at, body, keys)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay sign:", err)
		return 1
	}
	fmt.Fprintf(stdout, "webhook-id: %s\nwebhook-timestamp: %d\nwebhook-signature: %s\n", h.ID, h.Timestamp, h.Signature)
	if h.XSignature != "" {
		fmt.Fprintf(stdout, "X-Webhook-Signature: %s\n", h.XSignature)
	}
	return 0
}

// verify checks the headers given with -H against the body on stdin.
func verify(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hookrelay verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var secrets, publicKeys, headers multi
	fs.Var(&secrets, "secret", "whsec_ secret; repeat to accept several")
	fs.Var(&publicKeys, "public-key", "whpk_ Ed25519 public key for v1a; repeatable")
	fs.Var(&headers, "H", "header 'name: value'; repeatable")
	now := fs.Int64("now", 0, "unix seconds to verify at (default: the clock, ±5 min tolerance)")
	if err := fs.Parse(args); err != nil {
		return parseStatus(err)
	}
	v, err := webhook.NewVerifier(secrets...)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay verify:", err)
		return 2
	}
	for _, pk := range publicKeys {
		if err := v.AddPublicKey(pk); err != nil {
			fmt.Fprintln(stderr, "hookrelay verify:", err)
			return 2
		}
	}
	if *now != 0 {
		at := time.Unix(*now, 0)
		v.Now = func() time.Time { return at }
	}
	h := http.Header{}
	for _, line := range headers {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			fmt.Fprintf(stderr, "hookrelay verify: -H %q: want 'name: value'\n", line)
			return 2
		}
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	body, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "hookrelay verify: read body:", err)
		return 1
	}
	if err := v.Verify(h, body); err != nil {
		fmt.Fprintln(stdout, "invalid:", err)
		return 1
	}
	fmt.Fprintln(stdout, "valid")
	return 0
}
