package api

import (
	"net"
	"net/http"
	"net/netip"
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
	// IngestRateDefault is how many events per second one app key may
	// publish, sustained.
	IngestRateDefault = 1000
	// IngestBurstDefault is how many events one app key may publish at
	// once, above the sustained rate.
	IngestBurstDefault = 2000
	// authWindow is the span failures are counted over.
	authWindow = time.Minute
	// maxTrackedClients bounds the failure table and the ingest buckets;
	// past it, the table starts over.
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

// retryAfter is the Retry-After value, in whole seconds (at least 1), until t.
func retryAfter(t, now time.Time) string {
	wait := t.Sub(now)
	return strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second)))
}

// tokenBuckets is a token bucket per key: rate tokens a second, at most
// burst stored, one taken per request.
type tokenBuckets struct {
	rate, burst float64
	mu          sync.Mutex
	m           map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// newTokenBuckets returns buckets of rate and burst; rate <= 0 never
// refuses.
func newTokenBuckets(rate, burst int) *tokenBuckets {
	return &tokenBuckets{rate: float64(rate), burst: float64(max(burst, 1))}
}

// take takes a token of key's bucket at now; when it has none it reports
// false and when the next one comes.
func (b *tokenBuckets) take(key string, now time.Time) (time.Time, bool) {
	if b.rate <= 0 {
		return now, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil || len(b.m) > maxTrackedClients {
		b.m = map[string]*bucket{}
	}
	k, ok := b.m[key]
	if !ok {
		k = &bucket{tokens: b.burst, at: now}
		b.m[key] = k
	}
	k.tokens = min(b.burst, k.tokens+now.Sub(k.at).Seconds()*b.rate)
	k.at = now
	if k.tokens < 1 {
		return now.Add(time.Duration((1 - k.tokens) / b.rate * float64(time.Second))), false
	}
	k.tokens--
	return now, true
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
// the same address, so one client cannot hold every connection. It counts
// TCP peers and cannot see X-Forwarded-For: behind a reverse proxy every
// producer's connection is the proxy's, so connections from the trusted
// proxies are not counted at all (the proxy bounds its own clients).
func LimitListener(l net.Listener, perClient int, trusted ...netip.Prefix) net.Listener {
	if perClient <= 0 {
		perClient = ConnsPerClientDefault
	}
	return &limitListener{Listener: l, per: perClient, trusted: trusted, open: map[string]int{}}
}

type limitListener struct {
	net.Listener
	per     int
	trusted proxies
	mu      sync.Mutex
	open    map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := clientHost(c.RemoteAddr())
		if a, ok := parseHop(host); ok && l.trusted.trusts(a) {
			return c, nil
		}
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
