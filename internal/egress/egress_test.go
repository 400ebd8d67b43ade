package egress_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/egress"
	"hookrelay/internal/egress/egresstest"
	"hookrelay/internal/netguard"
	"hookrelay/internal/netguard/netguardtest"
)

func startProxy(t *testing.T, opts egresstest.Options) *egresstest.Proxy {
	p, err := egresstest.Start(opts)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// client sends through d, trusting tlsCfg's roots for the targets.
func client(d *egress.Dialer, tlsCfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: tlsCfg}, Timeout: 5 * time.Second}
}

func post(t *testing.T, c *http.Client, url string) (*http.Response, error) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(`{}`))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestTunnels: plain http and https targets both go through a CONNECT to
// the address hookrelay resolved (the name never reaches the proxy), with
// the credentials; an https target's TLS carries its name as SNI; an
// https proxy works the same.
func TestTunnels(t *testing.T) {
	t.Parallel()
	for _, proxyTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("proxy_tls=%v", proxyTLS), func(t *testing.T) {
			t.Parallel()
			px := startProxy(t, egresstest.Options{User: "relay", Password: "s3cret:pw", TLS: proxyTLS})
			p, err := egress.Parse(strings.Replace(px.URL(), "://", "://relay:s3cret%3Apw@", 1), "", "")
			require.NoError(t, err)
			require.NotContains(t, p.String(), "s3cret", "the printable form has no credentials")
			if proxyTLS {
				p.TLS = &tls.Config{RootCAs: px.RootCAs()}
			}
			d := &egress.Dialer{Proxy: p, Resolver: netguardtest.LoopbackResolver(t)}

			var got int
			var mu sync.Mutex
			plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got++
				mu.Unlock()
			}))
			t.Cleanup(plain.Close)
			var sni string
			secure := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got++
				mu.Unlock()
			}))
			secure.TLS = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
				mu.Lock()
				sni = h.ServerName
				mu.Unlock()
				return nil, nil
			}}
			secure.StartTLS()
			t.Cleanup(secure.Close)
			c := client(d, secure.Client().Transport.(*http.Transport).TLSClientConfig)

			resp, err := post(t, c, plain.URL+"/hook")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			// example.com is in httptest's certificate; the test resolver
			// makes it 127.0.0.1.
			securePort := secure.Listener.Addr().(*net.TCPAddr).Port
			resp, err = post(t, c, fmt.Sprintf("https://example.com:%d/hook", securePort))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)

			mu.Lock()
			require.Equal(t, 2, got)
			require.Equal(t, "example.com", sni, "TLS to the target carries its name")
			mu.Unlock()
			require.Equal(t, []string{plain.Listener.Addr().String(), fmt.Sprintf("127.0.0.1:%d", securePort)}, px.Connects(),
				"CONNECT names the checked address, never the name")
			want := "Basic " + base64.StdEncoding.EncodeToString([]byte("relay:s3cret:pw"))
			require.Equal(t, []string{want, want}, px.Auths())
		})
	}
}

// TestRefusedBeforeConnect: outside dev mode, a loopback, metadata or
// private target, by address or by a name resolving to one, is refused
// before anything is asked of the proxy; the proxy's own address and an
// unspecified one are refused even in dev mode.
func TestRefusedBeforeConnect(t *testing.T) {
	t.Parallel()
	px := startProxy(t, egresstest.Options{})
	p, err := egress.Parse(px.URL(), "", "")
	require.NoError(t, err)
	resolver := netguardtest.LoopbackResolver(t)
	for _, tc := range []struct {
		guarded bool
		url     string
		reason  string
	}{
		{true, "http://127.0.0.1:9/hook", "loopback"},
		{true, "http://169.254.169.254/latest/meta-data/", "link-local"},
		{true, "http://10.1.2.3:8080/hook", "private"},
		{true, "http://rebind.hookrelay.test:8080/hook", "loopback"},
		{true, "https://[::1]:8443/hook", "IPv4-compatible, loopback or unspecified"},
		{false, "http://" + px.Addr() + "/hook", "the egress proxy's own address"},
		{false, "http://0.0.0.0:" + strings.Split(px.Addr(), ":")[1] + "/", "unspecified: the egress proxy's own host"},
		{true, "http://" + px.Addr() + "/hook", "the egress proxy's own address"},
	} {
		c := client(&egress.Dialer{Proxy: p, Guarded: tc.guarded, Resolver: resolver}, nil)
		_, err := post(t, c, tc.url)
		var be *netguard.BlockedError
		require.ErrorAs(t, err, &be, "%s (guarded %v)", tc.url, tc.guarded)
		require.Equal(t, tc.reason, be.Reason, tc.url)
		var pe *egress.ProxyError
		require.NotErrorAs(t, err, &pe)
	}
	require.Empty(t, px.Connects(), "the proxy heard of none of them")
}

// TestProxyFailures: a proxy that refuses connections, one that wants
// other credentials, one that answers 503, and one that never answers
// are each a *ProxyError, telling nothing of the credentials.
func TestProxyFailures(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)

	closed := startProxy(t, egresstest.Options{})
	closed.Close()
	auth := startProxy(t, egresstest.Options{User: "relay", Password: "right"})
	busy := startProxy(t, egresstest.Options{Answer: http.StatusServiceUnavailable})
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()

	for _, tc := range []struct {
		name, url, password string
		status              int
		check               func(error) bool
	}{
		{"refused", closed.URL(), "", 0, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"407", auth.URL(), "wrong-password", http.StatusProxyAuthRequired, nil},
		{"503", busy.URL(), "", http.StatusServiceUnavailable, nil},
		{"silent", "http://" + silent.Addr().String(), "", 0, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
	} {
		p, err := egress.Parse(tc.url, "relay", tc.password)
		require.NoError(t, err)
		c := client(&egress.Dialer{Proxy: p}, nil)
		c.Timeout = 0
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		ctx, probe := egress.WithProbe(ctx)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, strings.NewReader(`{}`))
		require.NoError(t, err)
		_, err = c.Do(req)
		cancel()
		err = probe.Wrap(err)
		var pe *egress.ProxyError
		require.ErrorAs(t, err, &pe, tc.name)
		require.Equal(t, tc.status, pe.StatusCode, tc.name)
		require.Equal(t, p.String(), pe.Proxy, tc.name)
		if tc.check != nil {
			require.True(t, tc.check(err), "%s: %v", tc.name, err)
		}
		require.NotContains(t, err.Error(), "wrong-password", tc.name)
	}
}

// TestProbeLeavesTargetFailuresAlone: once the tunnel is open, a failure
// is the target's, not the proxy's.
func TestProbeLeavesTargetFailuresAlone(t *testing.T) {
	t.Parallel()
	px := startProxy(t, egresstest.Options{})
	p, err := egress.Parse(px.URL(), "", "")
	require.NoError(t, err)
	hang := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); target.Close() })
	c := client(&egress.Dialer{Proxy: p}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ctx, probe := egress.WithProbe(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, strings.NewReader(`{}`))
	require.NoError(t, err)
	_, err = c.Do(req)
	require.ErrorIs(t, probe.Wrap(err), context.DeadlineExceeded)
	var pe *egress.ProxyError
	require.NotErrorAs(t, probe.Wrap(err), &pe, "the receiver was slow, not the proxy")
}

// TestParse: only http and https proxy URLs without a path are taken;
// explicit credentials win over the URL's; errors never repeat the URL.
func TestParse(t *testing.T) {
	t.Parallel()
	p, err := egress.Parse("http://u:urlpw@proxy.internal:3128", "", "")
	require.NoError(t, err)
	require.Equal(t, []string{"u", "urlpw", "http://proxy.internal:3128"}, []string{p.User, p.Password, p.String()})
	p, err = egress.Parse("https://u:urlpw@proxy.internal", "env", "envpw")
	require.NoError(t, err)
	require.Equal(t, []string{"env", "envpw", "https://proxy.internal:443"}, []string{p.User, p.Password, p.String()})
	for _, bad := range []string{"socks5://u:topsecret@h:1080", "http://u:topsecret@h:3128/path", "http://u:topsecret@:3128", "http://u:topsecret@h:99999", "::"} {
		_, err := egress.Parse(bad, "", "")
		var pe *egress.ParseError
		require.ErrorAs(t, err, &pe, bad)
		require.NotContains(t, err.Error(), "topsecret")
	}
}
