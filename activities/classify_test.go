package activities_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/internal/egress"
	"hookrelay/internal/netguard"
)

func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]activities.Class{
		200: activities.ClassSuccess, 201: activities.ClassSuccess, 204: activities.ClassSuccess, 299: activities.ClassSuccess,
		429: activities.ClassThrottled,
		500: activities.ClassRetryable, 502: activities.ClassRetryable, 503: activities.ClassRetryable, 504: activities.ClassRetryable,
		410: activities.ClassPermanent,
		400: activities.ClassPermanent, 401: activities.ClassPermanent, 403: activities.ClassPermanent, 404: activities.ClassPermanent,
		301: activities.ClassPermanent, 302: activities.ClassPermanent, 307: activities.ClassPermanent, 308: activities.ClassPermanent,
	} {
		require.Equal(t, want, activities.ClassifyStatus(code), "HTTP %d", code)
	}
}

func TestClassifyError(t *testing.T) {
	t.Parallel()
	blocked := &netguard.BlockedError{Addr: netip.MustParseAddr("169.254.169.254"), Reason: "link-local"}
	for _, tc := range []struct {
		err  error
		want activities.Class
		msg  string
	}{
		{context.DeadlineExceeded, activities.ClassRetryable, "timeout"},
		{fmt.Errorf("Post: %w", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), activities.ClassRetryable, "connection refused"},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, activities.ClassRetryable, "connection reset"},
		{fmt.Errorf("Post: %w", io.EOF), activities.ClassRetryable, "connection reset"},
		{&net.DNSError{Err: "no such host", Name: "x.invalid"}, activities.ClassRetryable, "dns"},
		{fmt.Errorf("tls: failed to verify certificate: %w", x509.UnknownAuthorityError{}), activities.ClassRetryable, "tls"},
		{tls.AlertError(40), activities.ClassRetryable, "tls"},
		{errors.New("something else"), activities.ClassRetryable, "transport: something else"},
		{fmt.Errorf("dial: %w", blocked), activities.ClassPermanent, "169.254.169.254 is not allowed"},
		// A proxy's failure wins over what caused it: a refused connection
		// or a timeout to the proxy is the operator's, not the endpoint's.
		{fmt.Errorf("Post: %w", &egress.ProxyError{Proxy: "http://proxy:3128", Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}),
			activities.ClassProxy, "egress proxy http://proxy:3128: dial: connect: connection refused"},
		{&egress.ProxyError{Proxy: "http://proxy:3128", Op: "connect", Err: context.DeadlineExceeded}, activities.ClassProxy, "egress proxy"},
		{&egress.ProxyError{Proxy: "http://proxy:3128", Op: "connect", StatusCode: 407, Status: "407 Proxy Authentication Required"},
			activities.ClassProxy, "answered CONNECT with 407 Proxy Authentication Required"},
	} {
		class, msg := activities.ClassifyError(tc.err)
		require.Equal(t, tc.want, class, tc.err.Error())
		require.Contains(t, msg, tc.msg)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"120": 120 * time.Second, "0": 0, " 1 ": time.Second,
		"Mon, 30 Nov 2026 10:02:00 GMT": 2 * time.Minute,
		"Mon, 30 Nov 2026 09:00:00 GMT": 0, // in the past
	} {
		got, ok := activities.ParseRetryAfter(in, now)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "soon", "1.5", "Mon, 99 Foo"} {
		_, ok := activities.ParseRetryAfter(in, now)
		require.False(t, ok, in)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "Mon, 30 Nov 2026 10:02:00 GMT", "", "-5", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := activities.ParseRetryAfter(s, now)
		if ok && d < 0 {
			t.Fatalf("negative hint %v for %q", d, s)
		}
		if !ok && d != 0 {
			t.Fatalf("unusable hint %q returned %v", s, d)
		}
	})
}

// TestClassifyRealTransportErrors classifies what the attempt client
// really returns: a refused connection and an untrusted certificate.
func TestClassifyRealTransportErrors(t *testing.T) {
	t.Parallel()
	c := activities.NewHTTPClient(false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	_, err = c.Post("http://"+addr+"/hook", "application/json", nil)
	require.Error(t, err)
	_, msg := activities.ClassifyError(err)
	require.Equal(t, "connection refused", msg)

	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	_, err = c.Post(srv.URL, "application/json", nil)
	require.Error(t, err)
	class, msg := activities.ClassifyError(err)
	require.Equal(t, activities.ClassRetryable, class)
	require.True(t, strings.HasPrefix(msg, "tls: "), msg)
}

func TestNetguard(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "::1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "224.0.0.1", "fd00::1", "fe80::1", "0.0.0.0", "::ffff:127.0.0.1"} {
		require.Error(t, netguard.Check(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"} {
		require.NoError(t, netguard.Check(netip.MustParseAddr(a)), a)
	}
	require.Error(t, netguard.CheckHost("localhost"))
	require.NoError(t, netguard.CheckHost("example.com"), "hostnames are checked when dialed")
}

// TestGuardedDialRefusesLoopback: a guarded client refuses a name that
// resolves to loopback at connect time (what DNS rebinding would exploit).
func TestGuardedDialRefusesLoopback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	c := activities.NewHTTPClient(true)
	_, err = c.Post(fmt.Sprintf("http://localhost:%d/hook", port), "application/json", nil)
	require.Error(t, err)
	class, msg := activities.ClassifyError(err)
	require.Equal(t, activities.ClassPermanent, class)
	require.Contains(t, msg, "loopback")
	select {
	case <-accepted:
		t.Fatal("the guarded client connected to loopback")
	case <-time.After(100 * time.Millisecond):
	}
}
