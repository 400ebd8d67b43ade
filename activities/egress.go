package activities

import (
	"net"
	"net/http"
	"sync"

	"hookrelay/internal/egress"
	"hookrelay/store"
)

// Egress makes the clients of endpoints whose egress_proxy overrides the
// deployment's setting: one client (one connection pool) per distinct
// override, made on first use and kept, so connections through one proxy
// are never reused for another, or for a direct request.
type Egress struct {
	// Guarded applies the address guard (outside dev mode).
	Guarded bool
	// Resolver resolves names. Defaults to the system's.
	Resolver *net.Resolver

	mu      sync.Mutex
	clients map[string]*http.Client
}

// Client is the client for an override: egress.Direct, or a proxy URL
// without credentials (the API refuses others). An unusable stored URL
// is a *egress.ProxyError: the operator's fault.
func (e *Egress) Client(override string) (*http.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.clients[override]; ok {
		return c, nil
	}
	var p *egress.Proxy
	if override != egress.Direct {
		var err error
		if p, err = egress.Parse(override, "", ""); err != nil {
			return nil, &egress.ProxyError{Proxy: "(endpoint override)", Op: "parse", Err: err}
		}
	}
	c := NewHTTPClientVia(e.Guarded, e.Resolver, p)
	if e.clients == nil {
		e.clients = map[string]*http.Client{}
	}
	e.clients[override] = c
	return c, nil
}

// client is the client an attempt to t is sent with: its endpoint's
// override's when it has one (and Egress is set), else HTTP.
func (a *Activities) client(t store.Target) (*http.Client, error) {
	if t.EgressProxy == "" || a.Egress == nil {
		return a.HTTP, nil
	}
	return a.Egress.Client(t.EgressProxy)
}

// ParseProxy reads the deployment's --egress-proxy setting with its
// credentials: nil for "" (attempts go out directly). Errors never repeat
// the URL or the credentials.
func ParseProxy(raw, user, password string) (*egress.Proxy, error) {
	if raw == "" {
		return nil, nil
	}
	return egress.Parse(raw, user, password)
}
