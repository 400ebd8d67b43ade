package egress_test

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/egress"
	"hookrelay/internal/netguard"
)

// TestProxyAddressWithZoneIsTheProxy: an IPv6 literal with a zone
// ("[addr%25zone]" in a URL) is the same address as without it; a target
// spelled so must not slip past the proxy's-own-address check, in dev
// mode (the proxy on ::1) or guarded (a proxy on a public address; the
// test never reaches it: the refusal comes before any dial).
func TestProxyAddressWithZoneIsTheProxy(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback")
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var heard []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				mu.Lock()
				heard = append(heard, req.Host)
				mu.Unlock()
				_, _ = c.Write([]byte("HTTP/1.1 502 Bad Gateway\r\n\r\n"))
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	p, err := egress.Parse("http://"+ln.Addr().String(), "", "")
	require.NoError(t, err)
	for _, target := range []string{
		"http://[::1%25lo]:" + strconv.Itoa(port) + "/",
		"http://[::1%25eth0]:" + strconv.Itoa(port) + "/",
		"http://[0:0:0:0:0:0:0:1%25x]:" + strconv.Itoa(port) + "/",
	} {
		c := client(&egress.Dialer{Proxy: p}, nil)
		_, err := post(t, c, target)
		var be *netguard.BlockedError
		require.ErrorAs(t, err, &be, target)
		require.Equal(t, "the egress proxy's own address", be.Reason, target)
	}
	mu.Lock()
	require.Empty(t, heard, "the proxy was asked to CONNECT to itself")
	mu.Unlock()

	public, err := egress.Parse("http://[2001:4860:4860::8888]:3128", "", "")
	require.NoError(t, err)
	c := client(&egress.Dialer{Proxy: public, Guarded: true}, nil)
	_, err = post(t, c, "https://[2001:4860:4860::8888%25x]:3128/")
	var be *netguard.BlockedError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "the egress proxy's own address", be.Reason)
	require.False(t, strings.Contains(err.Error(), "%x"), "the zone is dropped: %v", err)
}
