// Package netguard refuses outbound connections to addresses a webhook must
// never reach in production: loopback, private, link-local (including the
// 169.254.169.254 metadata service), CGNAT, multicast, unspecified and IPv6
// unique-local addresses. The check runs on the resolved address at connect
// time, so a hostname that resolves (or rebinds) to such an address is
// refused too.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// BlockedError reports a refused target address.
type BlockedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("target address %s is not allowed (%s)", e.Addr, e.Reason)
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Check returns a *BlockedError when addr must not be dialed.
func Check(addr netip.Addr) error {
	addr = addr.Unmap()
	reason := ""
	switch {
	case addr.IsLoopback():
		reason = "loopback"
	case addr.IsUnspecified():
		reason = "unspecified"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		reason = "link-local"
	case addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		reason = "multicast"
	case addr.IsPrivate():
		if addr.Is6() {
			reason = "IPv6 unique local"
		} else {
			reason = "private"
		}
	case cgnat.Contains(addr):
		reason = "carrier-grade NAT"
	case addr.Is4() && addr.As4()[0] == 0:
		reason = "this network"
	case addr == netip.MustParseAddr("255.255.255.255"):
		reason = "broadcast"
	}
	if reason == "" {
		return nil
	}
	return &BlockedError{Addr: addr, Reason: reason}
}

// Control is a net.Dialer Control function that applies Check to the
// address actually being connected to.
func Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: parse dial address %q: %w", address, err)
	}
	return Check(ap.Addr())
}

// CheckHost refuses a literal IP host at configuration time; hostnames are
// checked when dialed.
func CheckHost(host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return Check(ip)
	}
	if host == "localhost" {
		return &BlockedError{Addr: netip.MustParseAddr("127.0.0.1"), Reason: "loopback"}
	}
	return nil
}

// Dialer returns a dialer that applies the guard when guarded is true.
func Dialer(guarded bool) *net.Dialer {
	d := &net.Dialer{KeepAlive: 30e9}
	if guarded {
		d.Control = Control
	}
	return d
}
