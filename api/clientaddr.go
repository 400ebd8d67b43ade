package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// proxies is the set of trusted reverse proxies and load balancers.
type proxies []netip.Prefix

// trusts reports whether a is a trusted proxy's address.
func (ps proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address limits are counted against: the connection's
// peer, or, when the peer is a trusted proxy, the right-most address of
// X-Forwarded-For (else of Forwarded) that is not a trusted proxy's. An
// entry that is not an address ends the walk at the proxy that wrote it;
// when every entry is a trusted proxy the left-most is the client. A client
// that connects directly cannot choose its address by sending the headers.
func (ps proxies) clientAddr(r *http.Request) string {
	peer, ok := parseHop(hostOf(r.RemoteAddr))
	if !ok {
		return hostOf(r.RemoteAddr)
	}
	if !ps.trusts(peer) {
		return peer.String()
	}
	hops := forwardedFor(r.Header)
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break
		}
		client = a
		if !ps.trusts(a) {
			break
		}
	}
	return client.String()
}

// hostOf is the host part of a host:port address.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// forwardedFor lists the addresses a request passed through, client first:
// X-Forwarded-For's (every line, in order) when it has any, else the for=
// parameters of Forwarded (RFC 7239).
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, f := range strings.Split(line, ",") {
			if f = strings.TrimSpace(f); f != "" {
				hops = append(hops, f)
			}
		}
	}
	if len(hops) > 0 {
		return hops
	}
	for _, line := range h.Values("Forwarded") {
		for _, elem := range strings.Split(line, ",") {
			for _, pair := range strings.Split(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					hops = append(hops, strings.Trim(v, `"`))
				}
			}
		}
	}
	return hops
}

// parseHop reads one hop: an address, an address:port, or a bracketed IPv6
// address with or without a port.
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}
