package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"hookrelay/config"
	"hookrelay/internal/temporalconn"
)

// TestAPIRefusesAMisconfiguredTemporal: an API process whose Temporal
// frontend answers TCP but refuses the connection (TLS expected but not
// configured, a wrong API key, mTLS without a certificate) gets a
// ConnectError with Reachable set: a configuration error no wait fixes, so
// it refuses to start with the error's hint, as the worker does; only a
// frontend that does not answer at all lets the API start degraded.
func TestAPIRefusesAMisconfiguredTemporal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Speaks something that is not gRPC over cleartext HTTP/2 (a
			// TLS-only frontend reached without TLS fails alike).
			go func() {
				_, _ = io.WriteString(c, "\x15\x03\x01\x00\x02\x02\x46")
				c.Close()
			}()
		}
	}()
	// The worker's path (apiOnly false) says what it is: reachable.
	wst := &Stack{Config: config.Config{TemporalAddress: l.Addr().String(), TemporalNamespace: "default"}, Logger: slog.New(slog.DiscardHandler)}
	werr := wst.connectTemporal(context.Background(), nil, false)
	ce, ok := errors.AsType[*temporalconn.ConnectError](werr)
	if !ok || !ce.Reachable {
		t.Fatalf("setup: want a reachable ConnectError, got %v", werr)
	}
	st := &Stack{Config: config.Config{TemporalAddress: l.Addr().String(), TemporalNamespace: "default"},
		Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = st.connectTemporal(ctx, nil, true)
	defer func() {
		for _, c := range st.closers {
			c()
		}
	}()
	if err == nil {
		t.Fatal("an API process started against a Temporal frontend that refused it (reachable: a configuration error), with a lazy client that never connects")
	}
	t.Logf("refused: %v", err)
}
