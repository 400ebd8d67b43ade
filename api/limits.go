package api

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Defaults of the API server's protection against abusive clients.
const (
	// AuthFailuresPerMinuteDefault is how many failed authentications one
	// client address may make per minute before it is answered 429.
	AuthFailuresPerMinuteDefault = 120
	// HeaderTimeoutDefault bounds how long a client may take to send its
	// request headers (slowloris).
	HeaderTimeoutDefault = 5 * time.Second
	// BodyTimeout is how long, past the header timeout, a request body may
	// take to arrive.
	BodyTimeout = 30 * time.Second
	// IdleTimeoutDefault closes kept-alive connections idle this long.
	IdleTimeoutDefault = 60 * time.Second
	// ConnsPerClientDefault bounds one client address's open connections.
	ConnsPerClientDefault = 128
	// authWindow is the span failures are counted over.
	authWindow = time.Minute
	// maxTrackedClients bounds the failure table; past it, it starts over.
	maxTrackedClients = 10000
)

// authLimiter counts failed authentications per client address in fixed
// one-minute windows.
type authLimiter struct {
	limit int
	mu    sync.Mutex
	seen  map[string]*authWindowCount
}

type authWindowCount struct {
	start time.Time
	n     int
}

// blocked reports whether addr is over its limit now, and until when.
func (l *authLimiter) blocked(addr string, now time.Time) (time.Time, bool) {
	if l.limit <= 0 {
		return time.Time{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.seen[addr]
	if !ok || now.Sub(w.start) >= authWindow {
		return time.Time{}, false
	}
	return w.start.Add(authWindow), w.n >= l.limit
}

// fail records a failed authentication from addr.
func (l *authLimiter) fail(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil || len(l.seen) > maxTrackedClients {
		l.seen = map[string]*authWindowCount{}
	}
	w, ok := l.seen[addr]
	if !ok || now.Sub(w.start) >= authWindow {
		w = &authWindowCount{start: now}
		l.seen[addr] = w
	}
	w.n++
}

// retryAfter is the Retry-After value, in whole seconds, until t.
func retryAfter(t, now time.Time) string {
	return strconv.Itoa(max(1, int(t.Sub(now).Round(time.Second)/time.Second)))
}

// ServerOptions configure the HTTP server the API runs in.
type ServerOptions struct {
	// HeaderTimeout bounds reading a request's headers. Defaults to
	// HeaderTimeoutDefault.
	HeaderTimeout time.Duration
	// IdleTimeout closes idle kept-alive connections. Defaults to
	// IdleTimeoutDefault.
	IdleTimeout time.Duration
	// ConnsPerClient bounds one client address's open connections. Defaults
	// to ConnsPerClientDefault.
	ConnsPerClient int
}

// NewHTTPServer returns the server for handler with slow-client bounds: a
// header timeout, a read timeout (header timeout + BodyTimeout) and an idle
// timeout. Serve it on LimitListener.
func NewHTTPServer(handler http.Handler, o ServerOptions) *http.Server {
	header := o.HeaderTimeout
	if header <= 0 {
		header = HeaderTimeoutDefault
	}
	idle := o.IdleTimeout
	if idle <= 0 {
		idle = IdleTimeoutDefault
	}
	return &http.Server{Handler: handler, ReadHeaderTimeout: header, ReadTimeout: header + BodyTimeout, IdleTimeout: idle}
}

// LimitListener closes, at once, a connection past perClient open ones from
// the same address, so one client cannot hold every connection.
func LimitListener(l net.Listener, perClient int) net.Listener {
	if perClient <= 0 {
		perClient = ConnsPerClientDefault
	}
	return &limitListener{Listener: l, per: perClient, open: map[string]int{}}
}

type limitListener struct {
	net.Listener
	per  int
	mu   sync.Mutex
	open map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := clientHost(c.RemoteAddr())
		l.mu.Lock()
		if l.open[host] >= l.per {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
}

func clientHost(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return a.String()
}

type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
