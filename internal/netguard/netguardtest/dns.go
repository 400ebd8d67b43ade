// Package netguardtest holds test doubles for the address guard's tests and
// its users': a DNS server under the test's control.
package netguardtest

import (
	"context"
	"net"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// LoopbackResolver is a resolver whose DNS server (on 127.0.0.1, stopped
// when t ends) answers every A query with 127.0.0.1 and AAAA with nothing:
// any name "rebinds" to loopback.
func LoopbackResolver(t testing.TB) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dns server: %v", err)
	}
	t.Cleanup(func() { pc.Close() })
	go answerLoopback(pc)
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

// answerLoopback answers the queries on pc until it is closed.
func answerLoopback(pc net.PacketConn) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if q.Type == dnsmessage.TypeA {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
		}
		if msg, err := b.Finish(); err == nil {
			_, _ = pc.WriteTo(msg, from)
		}
	}
}
