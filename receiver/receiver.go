// Package receiver is hookrelay's reference receiver: the receiving half
// done right with the webhook and inbox packages (verify the raw body,
// dedupe by event ID in the same transaction as the business write, hand
// external side effects to the durable inbox, answer 2xx only after
// commit), plus failure injection for demos and acceptance tests.
package receiver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hookrelay/inbox"
	"hookrelay/metrics"
	"hookrelay/webhook"
)

// Failure modes.
const (
	// FailNone answers normally.
	FailNone = "none"
	// Fail502 answers 502 before doing anything.
	Fail502 = "502"
	// FailSleep commits the event, then sleeps past the sender's timeout
	// before answering (the sender sees a timeout and retries).
	FailSleep = "sleep"
	// FailRollback fails the business write: the transaction rolls back and
	// the answer is 500.
	FailRollback = "rollback"
)

// Config configures a Receiver.
type Config struct {
	// Secrets are whsec_ secrets, newest first; PublicKeys whpk_ keys. Either
	// may be "tenant=key": events are then deduped per tenant, since event IDs
	// are unique per sender only.
	Secrets, PublicKeys []string
	// Source names the sender in dedupe keys of keys without a tenant.
	// Defaults to "hookrelay".
	Source string
	// Pool is the receiver's own database.
	Pool *pgxpool.Pool
	// Fail is the injected failure; FailTimes how many deliveries of each
	// event ID it hits (0 = every one).
	Fail      string
	FailTimes int
	// Sleep is how long FailSleep waits. Defaults to 15s.
	Sleep time.Duration
	// MaxBacklog, when set, answers 503 with Retry-After while more side
	// effects than this wait in the inbox (inbox.BacklogGuard).
	MaxBacklog int
	// Handle overrides the side effect's work (tests slow it down).
	// Defaults to SideEffect.
	Handle func(ctx context.Context, t inbox.Task) error
	// ControlToken, when set, is the bearer token POST /control requires;
	// without it /control answers loopback clients only.
	ControlToken string
	Logger       *slog.Logger
}

// Stats are the receiver's counters.
type Stats struct {
	Received int `json:"received"`
	// Accepted: new events whose business effect committed.
	Accepted int `json:"accepted"`
	// Duplicates: authenticated repeats absorbed with 2xx.
	Duplicates int            `json:"duplicates"`
	Rejected   map[string]int `json:"rejected"`
	Injected   map[string]int `json:"injected"`
	// BusinessEffects and SideEffects are counted in the database.
	BusinessEffects int `json:"business_effects"`
	SideEffects     int `json:"side_effects"`
}

// Receiver handles webhooks.
type Receiver struct {
	cfg      Config
	guard    *inbox.BacklogGuard
	registry *prometheus.Registry
	metrics  *metrics.Receiver
	verifier *webhook.Verifier
	mu       sync.Mutex
	stats    Stats
	hits     map[string]int // failure injections per event ID
}

// New prepares the database (inbox tables, the demo business table) and
// returns a Receiver.
func New(ctx context.Context, cfg Config) (*Receiver, error) {
	if cfg.Pool == nil {
		return nil, errors.New("receiver: a database is required")
	}
	if cfg.Source == "" {
		cfg.Source = "hookrelay"
	}
	if cfg.Fail == "" {
		cfg.Fail = FailNone
	}
	switch cfg.Fail {
	case FailNone, Fail502, FailSleep, FailRollback:
	default:
		return nil, fmt.Errorf("receiver: unknown failure mode %q (none, 502, sleep, rollback)", cfg.Fail)
	}
	if cfg.Sleep <= 0 {
		cfg.Sleep = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	v := &webhook.Verifier{}
	for _, s := range cfg.Secrets {
		tenant, key := splitTenant(s, "whsec_")
		if err := v.AddTenantSecret(tenant, key); err != nil {
			return nil, fmt.Errorf("receiver: secret: %w", err)
		}
	}
	for _, pk := range cfg.PublicKeys {
		tenant, key := splitTenant(pk, "whpk_")
		if err := v.AddTenantPublicKey(tenant, key); err != nil {
			return nil, fmt.Errorf("receiver: %w", err)
		}
	}
	if err := inbox.Migrate(ctx, cfg.Pool); err != nil {
		return nil, err
	}
	if _, err := cfg.Pool.Exec(ctx, `
		CREATE TABLE IF NOT EXISTS receiver_orders (source text NOT NULL, event_id text NOT NULL, type text NOT NULL,
		  received_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (source, event_id));
		ALTER TABLE receiver_orders ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT 'hookrelay';
		CREATE TABLE IF NOT EXISTS receiver_side_effects (idempotency_key text PRIMARY KEY, done_at timestamptz NOT NULL DEFAULT now());`); err != nil {
		return nil, fmt.Errorf("receiver tables: %w", err)
	}
	reg := metrics.NewRegistry()
	return &Receiver{cfg: cfg, verifier: v, guard: &inbox.BacklogGuard{Pool: cfg.Pool, MaxWaiting: cfg.MaxBacklog},
		registry: reg, metrics: metrics.NewReceiver(reg, cfg.Pool), stats: Stats{Rejected: map[string]int{}, Injected: map[string]int{}}, hits: map[string]int{}}, nil
}

// splitTenant splits "tenant=key" (key starting with prefix); a key
// without a tenant has tenant "".
func splitTenant(s, prefix string) (tenant, key string) {
	if t, k, ok := strings.Cut(s, "="); ok && strings.HasPrefix(k, prefix) {
		return t, k
	}
	return "", s
}

// Handler serves POST /webhook, GET /stats and POST /control
// ({"fail","fail_times"} to change the injected failure at run time; see
// Config.ControlToken for who may call it).
func (r *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	// A request may name its tenant (?tenant=), so a receiver of many
	// tenants tries only that one's keys (webhook.MaxChecksPerRequest).
	opts := webhook.Options{OnReject: r.reject, Tenant: func(req *http.Request) string { return req.URL.Query().Get("tenant") }}
	if r.cfg.MaxBacklog > 0 {
		opts.Busy = r.guard.Busy
	}
	mux.Handle("POST /webhook", r.count(webhook.Middleware(r.verifier, opts, http.HandlerFunc(r.handle))))
	mux.HandleFunc("GET /stats", r.serveStats)
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /control", r.control)
	return mux
}

func (r *Receiver) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.stats.Received++
		r.mu.Unlock()
		next.ServeHTTP(w, req)
	})
}

func (r *Receiver) reject(_ *http.Request, err error) {
	reason := metrics.RejectReason(err)
	r.metrics.Rejected(err)
	r.mu.Lock()
	r.stats.Rejected[reason]++
	r.mu.Unlock()
	// The reason is logged; the sender only gets a generic 401.
	r.cfg.Logger.Warn("webhook rejected", "reason", reason)
}

// inject reports whether this delivery of eventID gets the failure.
func (r *Receiver) inject(eventID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Fail == FailNone || (r.cfg.FailTimes > 0 && r.hits[eventID] >= r.cfg.FailTimes) {
		return FailNone
	}
	r.hits[eventID]++
	r.stats.Injected[r.cfg.Fail]++
	return r.cfg.Fail
}

func (r *Receiver) handle(w http.ResponseWriter, req *http.Request) {
	ev, _ := webhook.FromContext(req.Context())
	r.metrics.Verified()
	mode := r.inject(ev.ID)
	if mode == Fail502 {
		http.Error(w, "bad gateway (injected)", http.StatusBadGateway)
		return
	}
	var env struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(ev.Body, &env); err != nil {
		http.Error(w, "body is not a JSON envelope", http.StatusBadRequest)
		return
	}
	fresh, err := r.accept(req.Context(), ev, env.Type, mode == FailRollback)
	if err != nil {
		r.cfg.Logger.Warn("webhook not accepted; the sender will retry", "event_id", ev.ID, "trace_id", ev.Trace.TraceIDString(), "err", err)
		http.Error(w, "not accepted", http.StatusInternalServerError)
		return
	}
	r.metrics.Event(!fresh)
	r.mu.Lock()
	if fresh {
		r.stats.Accepted++
	} else {
		r.stats.Duplicates++
	}
	r.mu.Unlock()
	if mode == FailSleep {
		// Accepted and committed; the answer comes too late for the sender.
		select {
		case <-time.After(r.cfg.Sleep):
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// accept commits the dedupe row, the business row and the side-effect task
// in one transaction. It reports false for an absorbed duplicate.
func (r *Receiver) accept(ctx context.Context, ev webhook.Event, typ string, failWrite bool) (bool, error) {
	tx, err := r.cfg.Pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after commit
	source := r.cfg.Source
	if ev.Tenant != "" {
		source = ev.Tenant
	}
	if err := inbox.Accept(ctx, tx, source, ev.ID); errors.Is(err, inbox.ErrDuplicate) {
		return false, tx.Commit(ctx)
	} else if err != nil {
		return false, err
	}
	if failWrite {
		return false, errors.New("business write failed (injected); rolled back")
	}
	if _, err := tx.Exec(ctx, `INSERT INTO receiver_orders (source, event_id, type) VALUES ($1, $2, $3)`, source, ev.ID, typ); err != nil {
		return false, fmt.Errorf("business write: %w", err)
	}
	if err := inbox.Enqueue(ctx, tx, inbox.Task{Source: source, EventID: ev.ID, Kind: "notify", Payload: ev.Body}); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// SideEffect is the demo's external side effect: the "external system"
// honours the idempotency key, so a retried task has one effect.
func (r *Receiver) SideEffect(ctx context.Context, t inbox.Task) error {
	_, err := r.cfg.Pool.Exec(ctx, `INSERT INTO receiver_side_effects (idempotency_key) VALUES ($1) ON CONFLICT DO NOTHING`, t.IdempotencyKey())
	return err
}

// Worker returns the inbox worker running SideEffect.
func (r *Receiver) Worker() *inbox.Worker {
	handle := r.cfg.Handle
	if handle == nil {
		handle = r.SideEffect
	}
	return &inbox.Worker{Pool: r.cfg.Pool, Logger: r.cfg.Logger, Handle: func(ctx context.Context, t inbox.Task) error {
		err := handle(ctx, t)
		r.metrics.TaskRun(err)
		return err
	}}
}

// Stats returns the counters, with effects counted in the database.
func (r *Receiver) Stats(ctx context.Context) (Stats, error) {
	r.mu.Lock()
	st := r.stats
	st.Rejected = clone(r.stats.Rejected)
	st.Injected = clone(r.stats.Injected)
	r.mu.Unlock()
	err := r.cfg.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM receiver_orders), (SELECT count(*) FROM receiver_side_effects)`).
		Scan(&st.BusinessEffects, &st.SideEffects)
	if err != nil {
		return st, fmt.Errorf("count effects: %w", err)
	}
	return st, nil
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (r *Receiver) serveStats(w http.ResponseWriter, req *http.Request) {
	st, err := r.Stats(req.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// controlAllowed: with a token, the bearer token (compared in constant
// time); without one, a loopback client only.
func (r *Receiver) controlAllowed(req *http.Request) bool {
	if r.cfg.ControlToken != "" {
		got, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		return ok && subtle.ConstantTimeCompare([]byte(got), []byte(r.cfg.ControlToken)) == 1
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func (r *Receiver) control(w http.ResponseWriter, req *http.Request) {
	if !r.controlAllowed(req) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	var c struct {
		Fail      string `json:"fail"`
		FailTimes int    `json:"fail_times"`
	}
	if err := json.NewDecoder(req.Body).Decode(&c); err != nil {
		http.Error(w, "want {\"fail\":\"none|502|sleep|rollback\",\"fail_times\":n}", http.StatusBadRequest)
		return
	}
	switch c.Fail {
	case FailNone, Fail502, FailSleep, FailRollback:
	default:
		http.Error(w, "unknown failure mode", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.cfg.Fail, r.cfg.FailTimes = c.Fail, c.FailTimes
	r.hits = map[string]int{}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
