package bench

import (
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"hookrelay/webhook"
)

// sink is the receivers' shared record of first receipts.
type sink struct {
	mu       sync.Mutex
	first    map[string]time.Time
	dups     int
	rejected int
	// failFirst is the percentage of deliveries (picked by their
	// webhook-id) whose first request is answered 502; failed holds those
	// answered so.
	failFirst int
	failed    map[string]bool
}

// failsFirst reports whether the request of delivery id is answered 502:
// it is the first of one of the failFirst percent.
func (s *sink) failsFirst(id string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(h.Sum32()%100) >= s.failFirst || s.failed[id] {
		return false
	}
	if s.failed == nil {
		s.failed = map[string]bool{}
	}
	s.failed[id] = true
	return true
}

func (s *sink) record(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.first[id]; ok {
		s.dups++
		return
	}
	s.first[id] = at
}

// withoutFailures runs fn with no request answered 502 (the baseline,
// which sends once and never retries).
func (s *sink) withoutFailures(fn func()) {
	s.mu.Lock()
	p := s.failFirst
	s.failFirst = 0
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.failFirst = p
		s.mu.Unlock()
	}()
	fn()
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.first)
}

func (s *sink) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.first, s.failed = map[string]time.Time{}, nil
	s.dups, s.rejected = 0, 0
}

// receiverSet is K HTTP receivers that verify every signature.
type receiverSet struct {
	sink      *sink
	servers   []*http.Server
	urls      []string
	verifiers []atomic.Pointer[webhook.Verifier]
}

// serve serves h on a free loopback port until the server is closed and
// returns its base URL.
func serve(h http.Handler) (*http.Server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l) //nolint:errcheck // ends when the server is closed
	return srv, "http://" + l.Addr().String(), nil
}

func startReceivers(k int, s *sink) (*receiverSet, error) {
	rs := &receiverSet{sink: s, verifiers: make([]atomic.Pointer[webhook.Verifier], k)}
	for i := 0; i < k; i++ {
		srv, url, err := serve(rs.handler(i))
		if err != nil {
			return nil, err
		}
		rs.servers = append(rs.servers, srv)
		rs.urls = append(rs.urls, url+"/hook")
	}
	return rs, nil
}

func (rs *receiverSet) handler(i int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(r.Body)
		v := rs.verifiers[i].Load()
		if v == nil || v.Verify(r.Header, body) != nil {
			rs.sink.mu.Lock()
			rs.sink.rejected++
			rs.sink.mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if rs.sink.failsFirst(r.Header.Get("webhook-id")) {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		rs.sink.record(r.Header.Get("webhook-id"), now)
		w.WriteHeader(http.StatusNoContent)
	})
}

func (rs *receiverSet) stop() {
	for _, s := range rs.servers {
		_ = s.Close()
	}
}

// Run executes a full bench.
