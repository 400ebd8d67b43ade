package activities

import (
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"hookrelay/internal/egress"
	"hookrelay/internal/netguard"
)

func excerpt(body []byte) string {
	if len(body) > ExcerptBytes {
		body = body[:ExcerptBytes]
		for len(body) > 0 && !utf8.Valid(body) {
			body = body[:len(body)-1]
		}
	}
	// Postgres text holds neither invalid UTF-8 nor NUL bytes.
	return strings.ReplaceAll(strings.ToValidUTF8(string(body), "\uFFFD"), "\x00", "\uFFFD")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// NewHTTPClient returns the attempt client: no redirects, no proxy,
// keep-alive connection reuse per endpoint host, and (when guarded) the
// private-address guard at dial time.
func NewHTTPClient(guarded bool) *http.Client {
	return NewHTTPClientWith(guarded, nil)
}

// NewHTTPClientWith is NewHTTPClient resolving names with resolver (nil:
// the system's).
func NewHTTPClientWith(guarded bool, resolver *net.Resolver) *http.Client {
	return NewHTTPClientVia(guarded, resolver, nil)
}

// NewHTTPClientVia is NewHTTPClientWith sending every request through
// the forward proxy p with CONNECT (nil: directly); the address guard
// then runs on each target before the CONNECT (see package egress).
// HTTP_PROXY and the like are never read.
func NewHTTPClientVia(guarded bool, resolver *net.Resolver, p *egress.Proxy) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = netguard.Dialer(guarded, resolver).DialContext
	if p != nil {
		tr.DialContext = (&egress.Dialer{Proxy: p, Guarded: guarded, Resolver: resolver}).DialContext
	}
	tr.MaxIdleConnsPerHost = 64
	tr.MaxIdleConns = 1024
	tr.IdleConnTimeout = 90 * time.Second
	tr.Proxy = nil
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
