package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// receipt is one request a receiver saw.
type receipt struct {
	At        time.Time
	ID        string
	Timestamp int64
	Body      []byte
	Header    http.Header
	// StdValid and XValid: the signatures checked with the receiver's own
	// HMAC code against each secret it holds.
	StdValid, XValid bool
}

// probe is an httptest server whose n-th request (from 1) is answered
// by respond; it verifies both signature headers independently of
// hookrelay's signing package.
type probe struct {
	srv     *httptest.Server
	mu      sync.Mutex
	secrets [][]byte
	got     []receipt
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *probe {
	rc := &probe{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.handle))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *probe) URL() string { return rc.srv.URL + "/hook" }

// setSecrets replaces the secrets the receiver accepts.
func (rc *probe) setSecrets(secrets ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets = nil
	for _, s := range secrets {
		k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil {
			panic(err)
		}
		rc.secrets = append(rc.secrets, k)
	}
}

func (rc *probe) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := receipt{At: time.Now(), ID: r.Header.Get("webhook-id"), Body: body, Header: r.Header.Clone()}
	rec.Timestamp, _ = strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	rc.mu.Lock()
	rc.check(&rec)
	rc.got = append(rc.got, rec)
	n := len(rc.got)
	rc.mu.Unlock()
	if rc.respond == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	rc.respond(n, w, r)
}

// recheck verifies receipt i again with the receiver's current secrets.
func (rc *probe) recheck(i int) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec := rc.got[i]
	rec.StdValid, rec.XValid = false, false
	rc.check(&rec)
	return rec.StdValid && rec.XValid
}

// check sets rec's validity flags; rc.mu is held.
func (rc *probe) check(rec *receipt) {
	ts := rec.Header.Get("webhook-timestamp")
	body := rec.Body
	for _, k := range rc.secrets {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(rec.ID + "." + ts + "."))
		m.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		for _, sig := range strings.Fields(rec.Header.Get("webhook-signature")) {
			if hmac.Equal([]byte(sig), []byte(want)) {
				rec.StdValid = true
			}
		}
		m = hmac.New(sha256.New, k)
		m.Write([]byte(ts + "."))
		m.Write(body)
		wantX := "v1=" + hex.EncodeToString(m.Sum(nil))
		x := rec.Header.Get("X-Webhook-Signature")
		if strings.HasPrefix(x, "t="+ts+",") {
			for _, part := range strings.Split(x, ",")[1:] {
				if hmac.Equal([]byte(part), []byte(wantX)) {
					rec.XValid = true
				}
			}
		}
	}
}

func (rc *probe) receipts() []receipt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receipt(nil), rc.got...)
}

// byID counts receipts per event ID.
func (rc *probe) byID() map[string]int {
	out := map[string]int{}
	for _, r := range rc.receipts() {
		out[r.ID]++
	}
	return out
}

// firstFails answers 502 to the first request of each webhook ID to each
// URL that carries ?flaky=…, and 2xx otherwise; seen counts requests per
// URL query and ID.
func firstFails(t *testing.T) (rc *probe, seen func() map[string]int) {
	var mu sync.Mutex
	counts := map[string]int{}
	rc = newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		// Per endpoint (its query) and event: one event's requests to two
		// endpoints are counted apart.
		id := r.URL.RawQuery + " " + r.Header.Get("webhook-id")
		mu.Lock()
		counts[id]++
		n := counts[id]
		mu.Unlock()
		if r.URL.Query().Get("flaky") != "" && n == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	return rc, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}
