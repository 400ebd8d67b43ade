package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/signing"
	"hookrelay/webhook"
)

// TestBaselineIsNotFailedByFailFirst: --fail-first is about hookrelay's
// deliveries; the baseline (sign and POST once, no retry) shares the
// receivers, and none of its requests is answered 502 (else
// BaselinePerSecond would drop by about P %). Needs no stack: two local
// receivers and the baseline's own client.
func TestBaselineIsNotFailedByFailFirst(t *testing.T) {
	const events = 200
	s := &sink{first: map[string]time.Time{}, failFirst: 20}
	rs, err := startReceivers(2, s)
	require.NoError(t, err)
	defer rs.stop()
	b := &runner{o: Options{Events: events, Concurrency: 4}, rs: rs, sink: s}
	for range giveSecrets(t, b) {
		b.types = append(b.types, "t")
	}
	_, err = b.baseline(context.Background())
	require.NoError(t, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Zero(t, s.rejected, "every baseline request verifies")
	require.Equal(t, events, len(s.first), "every baseline request counts (%d answered 502)", len(s.failed))
}

// giveSecrets gives each of b's receivers a new signing secret its
// verifier checks, in b.secrets, and returns them.
func giveSecrets(t *testing.T, b *runner) []string {
	t.Helper()
	for i := range b.rs.urls {
		secret, err := signing.GenerateSecret()
		require.NoError(t, err)
		v, err := webhook.NewVerifier(secret)
		require.NoError(t, err)
		b.rs.verifiers[i].Store(v)
		b.secrets = append(b.secrets, secret)
	}
	return b.secrets
}
