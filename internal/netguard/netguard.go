// Package netguard refuses outbound connections to addresses a webhook must
// never reach in production: every range of the IANA special-purpose
// registries that is not globally reachable (loopback, private, link-local
// including the 169.254.169.254 metadata service, CGNAT, documentation,
// benchmarking, reserved), multicast, and the IPv6 transition ranges that
// can reach them (NAT64, 6to4, IPv4-mapped). The check runs on the resolved address at connect
// time, so a hostname that resolves (or rebinds) to such an address is
// refused too.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// BlockedError reports a refused target address.
type BlockedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("target address %s is not allowed (%s)", e.Addr, e.Reason)
}

// blocked lists every range a webhook must not reach: the IANA IPv4 and
// IPv6 special-purpose address registries' entries that are not globally
// reachable, plus multicast, 6to4, NAT64 (which can reach any IPv4 address,
// private ones included) and the reserved 240.0.0.0/4. IPv4-mapped IPv6
// addresses are checked as their IPv4 address.
func blocked() []struct {
	prefix netip.Prefix
	reason string
} {
	table := []struct{ prefix, reason string }{
		{"0.0.0.0/8", "this network"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "carrier-grade NAT"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"},
		{"::/96", "IPv4-compatible, loopback or unspecified"},
		{"::ffff:0:0:0/96", "IPv4-translated"},
		{"64:ff9b::/96", "NAT64"},
		{"64:ff9b:1::/48", "local NAT64"},
		{"100::/64", "discard-only"},
		{"2001::/23", "IETF protocol assignments"},
		{"2001:db8::/32", "documentation"},
		{"2002::/16", "6to4"},
		{"3fff::/20", "documentation"},
		{"5f00::/16", "segment routing"},
		{"fc00::/7", "IPv6 unique local"},
		{"fe80::/10", "link-local"},
		{"ff00::/8", "multicast"},
	}
	out := make([]struct {
		prefix netip.Prefix
		reason string
	}, len(table))
	for i, r := range table {
		out[i].prefix, out[i].reason = netip.MustParsePrefix(r.prefix), r.reason
	}
	return out
}

// Ranges lists the refused ranges (for documentation and tests).
func Ranges() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range blocked() {
		out = append(out, r.prefix)
	}
	return out
}

// Check returns a *BlockedError when addr must not be dialed.
func Check(addr netip.Addr) error {
	addr = addr.Unmap().WithZone("")
	if addr == netip.IPv4Unspecified() || addr.As16() == [16]byte{} {
		return &BlockedError{Addr: addr, Reason: "unspecified"}
	}
	for _, r := range blocked() {
		if r.prefix.Contains(addr) {
			return &BlockedError{Addr: addr, Reason: r.reason}
		}
	}
	if addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return &BlockedError{Addr: addr, Reason: "broadcast"}
	}
	return nil
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

// Dialer returns a dialer that applies the guard when guarded is true; a
// nil resolver is the system's.
func Dialer(guarded bool, resolver *net.Resolver) *net.Dialer {
	d := &net.Dialer{KeepAlive: 30 * time.Second, Resolver: resolver}
	if guarded {
		d.Control = Control
	}
	return d
}
