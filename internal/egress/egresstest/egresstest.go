// Package egresstest is a small forward proxy for tests: it answers
// CONNECT on 127.0.0.1, optionally over TLS and behind Basic credentials,
// and records every CONNECT it was asked for.
package egresstest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Options vary a Proxy.
type Options struct {
	// User and Password, when User is set, must come in
	// Proxy-Authorization: Basic; else the proxy answers 407.
	User, Password string
	// TLS serves the proxy over TLS (an https:// proxy URL) with a
	// self-signed certificate for 127.0.0.1; RootCAs trusts it.
	TLS bool
	// Answer, when set, is the status every CONNECT gets (no tunnel), with
	// no Proxy-Status: the proxy's own failure.
	Answer int
	// Bare leaves Proxy-Status out of the 502 a CONNECT gets when the
	// target cannot be reached (a proxy that does not implement RFC 9209).
	Bare bool
}

// Proxy is a running CONNECT proxy.
type Proxy struct {
	opts    Options
	ln      net.Listener
	rootCAs *x509.CertPool

	mu       sync.Mutex
	connects []string
	auths    []string
	conns    map[net.Conn]struct{}
}

// Start starts a proxy on 127.0.0.1.
func Start(opts Options) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{opts: opts, ln: ln, conns: map[net.Conn]struct{}{}}
	if opts.TLS {
		cert, pool, err := selfSigned()
		if err != nil {
			ln.Close()
			return nil, err
		}
		p.rootCAs = pool
		p.ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	}
	go p.serve()
	return p, nil
}

// URL is the proxy's URL (without credentials).
func (p *Proxy) URL() string {
	if p.opts.TLS {
		return "https://" + p.Addr()
	}
	return "http://" + p.Addr()
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// RootCAs trusts a TLS proxy's certificate.
func (p *Proxy) RootCAs() *x509.CertPool { return p.rootCAs }

// Connects lists the CONNECT targets asked for, in order.
func (p *Proxy) Connects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.connects...)
}

// Auths lists the Proxy-Authorization values received, in order.
func (p *Proxy) Auths() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auths...)
}

// Close stops the proxy: new connections are refused and open tunnels cut.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	p.track(c, true)
	defer p.track(c, false)
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	answer := func(code int) {
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", code, http.StatusText(code))
	}
	if req.Method != http.MethodConnect {
		answer(http.StatusMethodNotAllowed)
		return
	}
	auth := req.Header.Get("Proxy-Authorization")
	p.mu.Lock()
	p.connects = append(p.connects, req.Host)
	p.auths = append(p.auths, auth)
	p.mu.Unlock()
	if p.opts.User != "" && auth != "Basic "+base64.StdEncoding.EncodeToString([]byte(p.opts.User+":"+p.opts.Password)) {
		fmt.Fprintf(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"egresstest\"\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if p.opts.Answer != 0 {
		answer(p.opts.Answer)
		return
	}
	up, err := net.DialTimeout("tcp", req.Host, 5*time.Second)
	if err != nil {
		if p.opts.Bare {
			answer(http.StatusBadGateway)
			return
		}
		// RFC 9209: the target refused the connection.
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nProxy-Status: egresstest; error=connection_refused\r\nContent-Length: 0\r\n\r\n")
		return
	}
	p.track(up, true)
	defer p.track(up, false)
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, up)
		c.Close()
		close(done)
	}()
	_, _ = io.Copy(up, br)
	up.Close()
	<-done
}

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egresstest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{netip.MustParseAddr("127.0.0.1").AsSlice()},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}
