package netguard_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/netguard"
	"hookrelay/internal/netguard/netguardtest"
)

// last returns the last address of p.
func last(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(a)*8; i++ {
		a[i/8] |= 1 << (7 - i%8)
	}
	out, _ := netip.AddrFromSlice(a)
	return out
}

// TestEveryRangeIsRefused checks the first and last address of every range,
// IPv4 ranges also in their IPv4-mapped IPv6 form.
func TestEveryRangeIsRefused(t *testing.T) {
	t.Parallel()
	require.GreaterOrEqual(t, len(netguard.Ranges()), 28)
	for _, p := range netguard.Ranges() {
		for _, a := range []netip.Addr{p.Masked().Addr(), last(p)} {
			var be *netguard.BlockedError
			require.ErrorAs(t, netguard.Check(a), &be, "%s in %s", a, p)
			if a.Is4() {
				require.Error(t, netguard.Check(netip.AddrFrom16(a.As16())), "mapped %s", a)
			}
		}
	}
	for _, a := range []string{"0.0.0.0", "::", "255.255.255.255", "169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::a00:1",
		"2002:a00:1::", "fe80::1%eth0"} {
		require.Error(t, netguard.Check(netip.MustParseAddr(a)), a)
	}
}

func TestPublicAddressesPass(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "192.167.255.255", "192.169.0.0", "198.17.255.255", "198.20.0.0", "223.255.255.255",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1"} {
		require.NoError(t, netguard.Check(netip.MustParseAddr(a)), a)
	}
}

// TestRebindingIsRefusedAtDialTime: a hostname that resolves to loopback is
// refused by the guarded dialer before any connection is made; unguarded
// (dev mode), the same name connects.
func TestRebindingIsRefusedAtDialTime(t *testing.T) {
	t.Parallel()
	resolver := netguardtest.LoopbackResolver(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	url := fmt.Sprintf("http://rebind.hookrelay.test:%d/hook", ln.Addr().(*net.TCPAddr).Port)
	get := func(guarded bool) error {
		tr := &http.Transport{DialContext: netguard.Dialer(guarded, resolver).DialContext}
		c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	err = get(true)
	var be *netguard.BlockedError
	require.True(t, errors.As(err, &be), "refused by the guard: %v", err)
	require.Equal(t, "loopback", be.Reason)
	require.Empty(t, accepted, "no connection was made")

	_ = get(false) // the listener closes at once; the request may fail after connecting
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the unguarded dialer did not connect")
	}
}
