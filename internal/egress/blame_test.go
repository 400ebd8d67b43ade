package egress_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/egress"
)

// selectiveProxy tunnels CONNECTs to open and never answers the others
// (a proxy still waiting on a target that drops its packets).
func selectiveProxy(t *testing.T, open string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Host != open {
					return // hold the connection, answer nothing
				}
				up, err := net.Dial("tcp", open)
				if err != nil {
					return
				}
				t.Cleanup(func() { up.Close() })
				_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go func() { _, _ = io.Copy(up, br) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestSilentTargetBehindAWorkingProxy: a proxy that never answers CONNECT
// is the operator's fault while it has opened no tunnel; once it has (it
// works), a CONNECT it is still working on when the request's timeout
// comes is the target's timeout. Either way the request ends at its
// timeout.
func TestSilentTargetBehindAWorkingProxy(t *testing.T) {
	t.Parallel()
	live := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(live.Close)
	p, err := egress.Parse(selectiveProxy(t, live.Listener.Addr().String()), "", "")
	require.NoError(t, err)
	c := client(&egress.Dialer{Proxy: p}, nil)
	c.Timeout = 0
	try := func(url string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		ctx, probe := egress.WithProbe(ctx)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{}`))
		require.NoError(t, err)
		start := time.Now()
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		require.Less(t, time.Since(start), 2*time.Second, "held past the request's timeout")
		return probe.Wrap(err)
	}
	silent := "http://127.0.0.1:9/hook"
	var pe *egress.ProxyError
	require.ErrorAs(t, try(silent), &pe, "no tunnel yet: the proxy may be the one at fault")

	require.NoError(t, try(live.URL))
	err = try(silent)
	require.False(t, errors.As(err, &pe), "the proxy works; the target did not answer it: %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
