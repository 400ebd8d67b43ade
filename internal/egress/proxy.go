package egress

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Proxy is a forward proxy reached with CONNECT.
type Proxy struct {
	// URL is the proxy: http://host:port or https://host:port (TLS to the
	// proxy). Its userinfo, if any, is dropped by Parse into User and
	// Password.
	URL *url.URL
	// User and Password are sent as Proxy-Authorization: Basic on CONNECT
	// when User is set. Defaults to none.
	User, Password string
	// TLS configures TLS to an https proxy. Defaults to the system's roots
	// and the proxy's host name.
	TLS *tls.Config
	// ConnectTimeout bounds reaching the proxy and its answer to CONNECT.
	// Defaults to ConnectTimeoutDefault.
	ConnectTimeout time.Duration
}

// ParseError is a proxy URL that cannot be used; it never holds the URL's
// credentials.
type ParseError struct {
	Reason string
}

func (e *ParseError) Error() string { return "egress proxy: " + e.Reason }

// Parse reads a proxy URL: http:// or https://, a host, an optional port
// (defaults to 80 or 443), no path, query or fragment. Credentials come
// from user and password when user is set, else from the URL's userinfo.
// Errors never repeat the URL (it may hold a password).
func Parse(raw, user, password string) (*Proxy, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &ParseError{Reason: "not a URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &ParseError{Reason: "scheme must be http or https"}
	}
	if u.Hostname() == "" {
		return nil, &ParseError{Reason: "no host"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, &ParseError{Reason: "port must be 1-65535"}
		}
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, &ParseError{Reason: "a proxy URL has no path, query or fragment"}
	}
	p := &Proxy{User: user, Password: password}
	if p.User == "" && u.User != nil {
		p.User = u.User.Username()
		p.Password, _ = u.User.Password()
	}
	p.URL = &url.URL{Scheme: u.Scheme, Host: u.Host}
	return p, nil
}

// HostPort is the proxy's host:port, the port defaulted by scheme.
func (p *Proxy) HostPort() string {
	if port := p.URL.Port(); port != "" {
		return p.URL.Host
	}
	if p.URL.Scheme == "https" {
		return net.JoinHostPort(p.URL.Hostname(), "443")
	}
	return net.JoinHostPort(p.URL.Hostname(), "80")
}

// String is the proxy's scheme and host:port, without credentials: the
// only form of it that may be logged or recorded.
func (p *Proxy) String() string { return p.URL.Scheme + "://" + p.HostPort() }

// ProxyError is a failure to use the egress proxy: it could not be
// reached (Op "dial"), TLS with it failed ("tls"), or it did not open the
// tunnel ("connect", with its StatusCode when it answered). It never holds
// credentials.
type ProxyError struct {
	// Proxy is Proxy.String().
	Proxy string
	Op    string
	// StatusCode is the proxy's answer to CONNECT, 0 when it gave none.
	StatusCode int
	// Status is that answer's status line (e.g. "407 Proxy Authentication Required").
	Status string
	Err    error
}

func (e *ProxyError) Error() string {
	switch {
	case e.StatusCode != 0:
		return fmt.Sprintf("egress proxy %s answered CONNECT with %s", e.Proxy, e.Status)
	case e.Err != nil:
		return fmt.Sprintf("egress proxy %s: %s: %v", e.Proxy, e.Op, e.Err)
	}
	return fmt.Sprintf("egress proxy %s: %s failed", e.Proxy, e.Op)
}

func (e *ProxyError) Unwrap() error { return e.Err }

// UnreachableError is a proxy's answer that it could not reach the target:
// a CONNECT refused with a Proxy-Status naming a failure of the target
// (Kind), or no answer within the request's timeout from a proxy that
// opened a tunnel within HealthyWindow. It is the target's failure, like a
// refused connection made directly. It never holds credentials.
type UnreachableError struct {
	// Proxy is Proxy.String().
	Proxy string
	// Status is the proxy's answer (e.g. "502 Bad Gateway"), "" when Err
	// (a timeout) says why; Kind is its Proxy-Status error type.
	Status, Kind string
	Err          error
}

func (e *UnreachableError) Error() string {
	if e.Status != "" {
		return fmt.Sprintf("egress proxy %s could not reach the target (CONNECT answered %s, Proxy-Status error=%s)", e.Proxy, e.Status, e.Kind)
	}
	return fmt.Sprintf("egress proxy %s could not reach the target: %v", e.Proxy, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
