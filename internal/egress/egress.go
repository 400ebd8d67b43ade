// Package egress sends attempts through the operator's forward proxy
// (--egress-proxy). Every target, plain http included, is reached through
// a CONNECT tunnel, so the address a request goes to is one hookrelay
// resolved and checked itself: the target's name is resolved here, the
// address guard (package netguard) refuses private and metadata addresses
// outside dev mode, and the proxy is asked to CONNECT to that checked
// IP:port, never to the name, so a DNS answer that changes between the
// check and the connect (rebinding) cannot move the request. TLS to an
// https target runs inside the tunnel with the target's name as SNI (the
// http.Transport does it over the connection the Dialer returns).
//
// A target equal to the proxy's own address (or an unspecified address,
// which means "this host" to the proxy) is refused even in dev mode: an
// endpoint must never reach the proxy itself.
//
// Failing to reach the proxy, to set up TLS with it, or a CONNECT it does
// not answer 200 is a *ProxyError: an operator fault, not the endpoint's.
// The one exception is a proxy that says, in an RFC 9209 Proxy-Status
// header, that the target failed (connection_refused, connection_timeout,
// destination_unavailable, …): that answer is the target's failure
// (*UnreachableError), which counts toward the endpoint's failing streak
// like a refused connection made directly. A bare 502, 503 or 504 names no
// culprit, so it stays the proxy's. A proxy that opened a tunnel for this
// Dialer within HealthyWindow and is still waiting on the target when the
// request's timeout comes is taken to be waiting on the target (the
// request's own timeout).
package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"hookrelay/internal/netguard"
)

// Direct is the per-endpoint override that sends without any proxy.
const Direct = "direct"

// ConnectTimeoutDefault bounds reaching the proxy and reading its answer
// to CONNECT.
const ConnectTimeoutDefault = 30 * time.Second

// HealthyWindow is how long after opening a tunnel a proxy is taken to
// work: its silence on a CONNECT until the request's timeout blames the
// target, not the proxy.
const HealthyWindow = time.Minute

// Dialer dials targets through Proxy: DialContext returns a CONNECT
// tunnel to the checked address of its target, ready for the
// http.Transport (which adds TLS for https targets).
type Dialer struct {
	Proxy *Proxy
	// Guarded refuses targets the address guard refuses (outside dev
	// mode). The proxy's own address is refused either way.
	Guarded bool
	// Resolver resolves targets and the proxy. Defaults to the system's.
	Resolver *net.Resolver

	// opened is when the proxy last opened a tunnel (Unix nanoseconds).
	opened atomic.Int64
}

// healthy reports whether the proxy opened a tunnel within HealthyWindow.
func (d *Dialer) healthy() bool {
	last := d.opened.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < HealthyWindow
}

func (d *Dialer) resolver() *net.Resolver {
	if d.Resolver != nil {
		return d.Resolver
	}
	return net.DefaultResolver
}

func (d *Dialer) timeout() time.Duration {
	if d.Proxy.ConnectTimeout > 0 {
		return d.Proxy.ConnectTimeout
	}
	return ConnectTimeoutDefault
}

// lookup resolves host (an IP literal is itself). Addresses are unmapped
// and lose any IPv6 zone ("[::1%lo]" is ::1): another spelling of an
// address must compare equal to it (the proxy's own address), and a zone
// names an interface of this host, which means nothing to the proxy.
func (d *Dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap().WithZone("")}, nil
	}
	ips, err := d.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	for i := range ips {
		ips[i] = ips[i].Unmap().WithZone("")
	}
	return ips, nil
}

// DialContext opens a tunnel through the proxy to addr (the target's
// host:port). The target is resolved and checked first: a refused target
// is a *netguard.BlockedError and the proxy hears nothing of it.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	probe := probeFrom(ctx)
	// The transport dials on after its request gave up (for the next
	// request); the dial bounds itself.
	ctx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress: port of %q: %w", addr, err)
	}
	ips, err := d.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	pe := func(op string, err error) *ProxyError { return &ProxyError{Proxy: d.Proxy.String(), Op: op, Err: err} }
	proxyHost, proxyPortStr, _ := net.SplitHostPort(d.Proxy.HostPort())
	proxyPort, _ := strconv.ParseUint(proxyPortStr, 10, 16)
	proxyIPs, err := d.lookup(ctx, proxyHost)
	if err != nil {
		probe.set(phaseProxy, d.Proxy.String())
		return nil, pe("dial", err)
	}
	target, err := d.pick(ips, uint16(port), proxyIPs, uint16(proxyPort))
	if err != nil {
		return nil, err
	}
	probe.set(phaseProxy, d.Proxy.String())
	conn, err := d.dialProxy(ctx, proxyIPs, uint16(proxyPort))
	if err != nil {
		return nil, pe("dial", err)
	}
	if d.Proxy.URL.Scheme == "https" {
		cfg := &tls.Config{}
		if d.Proxy.TLS != nil {
			cfg = d.Proxy.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = proxyHost
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, pe("tls", err)
		}
		conn = tc
	}
	tunnel, err := d.connect(ctx, conn, target)
	if err != nil {
		conn.Close()
		return nil, err
	}
	d.opened.Store(time.Now().UnixNano())
	probe.set(phaseTunnel, "")
	return tunnel, nil
}

// pick is the first of ips the guard lets through, refusing the proxy's
// own address (and unspecified ones) whatever the guard.
func (d *Dialer) pick(ips []netip.Addr, port uint16, proxyIPs []netip.Addr, proxyPort uint16) (netip.AddrPort, error) {
	var first error
	for _, ip := range ips {
		var err error
		switch {
		case ip.IsUnspecified():
			err = &netguard.BlockedError{Addr: ip, Reason: "unspecified: the egress proxy's own host"}
		case port == proxyPort && containsAddr(proxyIPs, ip):
			err = &netguard.BlockedError{Addr: ip, Reason: "the egress proxy's own address"}
		case d.Guarded:
			err = netguard.Check(ip)
		}
		if err == nil {
			return netip.AddrPortFrom(ip, port), nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = &net.DNSError{Err: "no address", IsNotFound: true}
	}
	return netip.AddrPort{}, first
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if b == a {
			return true
		}
	}
	return false
}

// dialProxy connects to the first of the proxy's addresses that answers.
func (d *Dialer) dialProxy(ctx context.Context, ips []netip.Addr, port uint16) (net.Conn, error) {
	nd := &net.Dialer{KeepAlive: 30 * time.Second}
	var errs []error
	for _, ip := range ips {
		c, err := nd.DialContext(ctx, "tcp", netip.AddrPortFrom(ip, port).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// connect asks the proxy for a tunnel to target over conn.
func (d *Dialer) connect(ctx context.Context, conn net.Conn, target netip.AddrPort) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target.String()}, Host: target.String(), Header: http.Header{}}
	if d.Proxy.User != "" {
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(d.Proxy.User+":"+d.Proxy.Password)))
	}
	if err := req.Write(conn); err != nil {
		return nil, &ProxyError{Proxy: d.Proxy.String(), Op: "connect", Err: ctxErr(ctx, err)}
	}
	probeFrom(ctx).awaiting(d)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		if ctx.Err() != nil && d.healthy() {
			// A working proxy still waiting on the target.
			return nil, &UnreachableError{Proxy: d.Proxy.String(), Err: ctx.Err()}
		}
		return nil, &ProxyError{Proxy: d.Proxy.String(), Op: "connect", Err: ctxErr(ctx, err)}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if kind := targetFailure(resp.Header); kind != "" {
			return nil, &UnreachableError{Proxy: d.Proxy.String(), Status: resp.Status, Kind: kind}
		}
		return nil, &ProxyError{Proxy: d.Proxy.String(), Op: "connect", StatusCode: resp.StatusCode, Status: resp.Status}
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// ctxErr prefers the context's error (a timeout) to the I/O error it
// caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// bufferedConn reads what the CONNECT answer's reader buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Phases of a dial a Probe records.
const (
	phaseNone int32 = iota
	// phaseProxy: the target passed its check; the proxy is being reached.
	phaseProxy
	// phaseTunnel: the proxy opened the tunnel.
	phaseTunnel
	// phaseAwait: the proxy took the CONNECT and is opening the tunnel.
	phaseAwait
)

// Probe records how far the dial of one request got, so a request that
// gave up (its timeout) while the proxy was being reached is told apart
// from one that gave up talking to the target: the transport returns the
// request's own context error then, not the dial's.
type Probe struct {
	phase atomic.Int32
	proxy atomic.Pointer[string]
	// dialer is the Dialer whose CONNECT is awaited (phaseAwait).
	dialer atomic.Pointer[Dialer]
}

// awaiting records that d's CONNECT was sent and its answer is awaited.
func (p *Probe) awaiting(d *Dialer) {
	if p == nil {
		return
	}
	p.dialer.Store(d)
	p.phase.CompareAndSwap(phaseProxy, phaseAwait)
}

type probeKey struct{}

// WithProbe returns ctx carrying a new Probe for one request.
func WithProbe(ctx context.Context) (context.Context, *Probe) {
	p := &Probe{}
	return context.WithValue(ctx, probeKey{}, p), p
}

func probeFrom(ctx context.Context) *Probe {
	p, _ := ctx.Value(probeKey{}).(*Probe)
	return p
}

func (p *Probe) set(phase int32, proxy string) {
	if p == nil {
		return
	}
	if proxy != "" {
		p.proxy.Store(&proxy)
	}
	p.phase.Store(phase)
}

// Wrap returns err as a *ProxyError when the request failed while its
// dial was reaching the proxy (and err does not already say why); any
// other err is returned as it is.
func (p *Probe) Wrap(err error) error {
	var pe *ProxyError
	var ue *UnreachableError
	var blocked *netguard.BlockedError
	if p == nil || err == nil || errors.As(err, &pe) || errors.As(err, &ue) || errors.As(err, &blocked) {
		return err
	}
	switch p.phase.Load() {
	case phaseProxy:
	case phaseAwait:
		if d := p.dialer.Load(); d != nil && d.healthy() {
			// A working proxy was still opening the tunnel: the target
			// did not answer it in time.
			return err
		}
	default:
		return err
	}
	name := ""
	if s := p.proxy.Load(); s != nil {
		name = *s
	}
	return &ProxyError{Proxy: name, Op: "connect", Err: err}
}
