package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/testvectors"
	"hookrelay/signing"
)

func cli(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// headers turns `hookrelay sign` output into -H flags.
func headers(out string) []string {
	var args []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		args = append(args, "-H", line)
	}
	return args
}

func TestSignReproducesVectors(t *testing.T) {
	v, err := testvectors.Load()
	require.NoError(t, err)
	s := v.Standard
	code, out, errOut := cli(t, s.Payload, "sign", "--secret", s.Secret, "--id", s.ID, "--timestamp", strconv.FormatInt(s.Timestamp, 10))
	require.Zero(t, code, errOut)
	require.Contains(t, out, "webhook-signature: "+s.Expected+"\n")
	require.Contains(t, out, "webhook-id: "+s.ID+"\n")

	code, out, _ = cli(t, v.X.Payload, "sign", "--secret", v.X.Secret, "--id", "x", "--timestamp", strconv.FormatInt(v.X.Timestamp, 10))
	require.Zero(t, code)
	require.Contains(t, out, "X-Webhook-Signature: "+v.X.Expected+"\n")

	r := v.Rotation
	code, out, _ = cli(t, r.Payload, "sign", "--secret", r.NewSecret, "--secret", r.PreviousSecret, "--id", r.ID, "--timestamp", strconv.FormatInt(r.Timestamp, 10))
	require.Zero(t, code)
	require.Contains(t, out, "webhook-signature: "+r.ExpectedStd+"\n")
	require.Contains(t, out, "X-Webhook-Signature: "+r.ExpectedX+"\n")
}

func TestVerify(t *testing.T) {
	v, err := testvectors.Load()
	require.NoError(t, err)
	r := v.Rotation
	ts := strconv.FormatInt(r.Timestamp, 10)
	_, signed, _ := cli(t, r.Payload, "sign", "--secret", r.NewSecret, "--id", r.ID, "--timestamp", ts)
	now := []string{"--now", ts}
	verify := func(body string, extra ...string) (int, string) {
		args := append([]string{"verify"}, extra...)
		code, out, _ := cli(t, body, args...)
		return code, out
	}
	code, out := verify(r.Payload, append(append([]string{"--secret", r.NewSecret}, now...), headers(signed)...)...)
	require.Zero(t, code, out)
	require.Equal(t, "valid\n", out)

	// Rotation: a verifier holding the new and the old secret accepts a
	// signature by either.
	_, byOld, _ := cli(t, r.Payload, "sign", "--secret", r.PreviousSecret, "--id", r.ID, "--timestamp", ts)
	code, _ = verify(r.Payload, append(append([]string{"--secret", r.NewSecret, "--secret", r.PreviousSecret}, now...), headers(byOld)...)...)
	require.Zero(t, code)

	// Ed25519 v1a.
	e := v.Ed25519
	code, out = verify(e.Payload, "--public-key", e.PublicKey, "--now", strconv.FormatInt(e.Timestamp, 10),
		"-H", "webhook-id: "+e.ID, "-H", "webhook-timestamp: "+strconv.FormatInt(e.Timestamp, 10), "-H", "webhook-signature: "+e.Expected)
	require.Zero(t, code, out)

	for name, tc := range map[string]struct {
		body string
		args []string
		want string
	}{
		"tampered body":    {r.Payload + " ", append(append([]string{"--secret", r.NewSecret}, now...), headers(signed)...), "no matching signature"},
		"tampered id":      {r.Payload, append(append([]string{"--secret", r.NewSecret}, now...), headers(strings.Replace(signed, "webhook-id: evt_", "webhook-id: evt_X", 1))...), "no matching signature"},
		"stale":            {r.Payload, append([]string{"--secret", r.NewSecret, "--now", strconv.FormatInt(r.Timestamp+301, 10)}, headers(signed)...), "too old"},
		"future":           {r.Payload, append([]string{"--secret", r.NewSecret, "--now", strconv.FormatInt(r.Timestamp-301, 10)}, headers(signed)...), "future"},
		"retired key":      {r.Payload, append(append([]string{"--secret", r.NewSecret}, now...), headers(byOld)...), "no matching signature"},
		"malformed digest": {r.Payload, []string{"--secret", r.NewSecret, "--now", ts, "-H", "webhook-id: " + r.ID, "-H", "webhook-timestamp: " + ts, "-H", "webhook-signature: v1,not-base64!"}, "malformed"},
	} {
		code, out := verify(tc.body, tc.args...)
		require.Equal(t, 1, code, name)
		require.Contains(t, out, tc.want, name)
		require.Equal(t, 1, strings.Count(out, "\n"), "%s: one-line reason", name)
	}
}

func TestUsage(t *testing.T) {
	code, _, errOut := cli(t, "", "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unknown command")
	code, _, errOut = cli(t, "", "sign", "--id", "x")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--secret")
}

// TestHelpIsNotAnError: every command's --help prints its usage and exits 0.
func TestHelpIsNotAnError(t *testing.T) {
	for _, c := range []string{"dev", "api", "worker", "migrate", "sign", "verify", "receiver", "bench"} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run([]string{c, "--help"}, strings.NewReader(""), &out, &errOut), c)
	}
	var out, errOut bytes.Buffer
	require.Equal(t, 2, run([]string{"dev", "--no-such-flag"}, strings.NewReader(""), &out, &errOut))
}

// TestReceiverSecretsOffTheCommandLine: secrets can come from the
// environment and a file, so they need not show in ps.
func TestReceiverSecretsOffTheCommandLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.WriteFile(file, []byte("whsec_c\n\nwhsec_d\n"), 0o600))
	got, err := receiverSecrets([]string{"whsec_a"}, "whsec_b, whsec_e", file)
	require.NoError(t, err)
	require.Equal(t, []string{"whsec_a", "whsec_b", "whsec_e", "whsec_c", "whsec_d"}, got)
	_, err = receiverSecrets(nil, "", filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
}

// TestEd25519SignAndVerify: a body signed with an Ed25519 key, as the
// sender signs an ed25519 endpoint, verifies with `hookrelay verify
// --public-key` alone, and not with another key.
func TestEd25519SignAndVerify(t *testing.T) {
	secret, public, err := signing.GenerateSigningKey()
	require.NoError(t, err)
	_, other, err := signing.GenerateSigningKey()
	require.NoError(t, err)
	body := `{"id":"evt_1","type":"a.b","data":{}}`
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"sign", "--secret", secret, "--id", "evt_1"}, strings.NewReader(body), &out, &errOut), errOut.String())
	require.NotContains(t, out.String(), "X-Webhook-Signature", "no HMAC header without an HMAC key")
	var args []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		args = append(args, "-H", line)
	}
	out.Reset()
	require.Equal(t, 0, run(append([]string{"verify", "--public-key", public}, args...), strings.NewReader(body), &out, &errOut), out.String())
	require.Equal(t, "valid\n", out.String())
	out.Reset()
	require.Equal(t, 1, run(append([]string{"verify", "--public-key", other}, args...), strings.NewReader(body), &out, &errOut))
	require.Contains(t, out.String(), "invalid")
}
