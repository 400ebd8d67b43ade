package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// DefaultMaxBody is the largest body Middleware reads.
const DefaultMaxBody = 1 << 20

// Event is a verified delivery: the raw body exactly as signed, and the
// identifiers from the headers. Parse Body only after verification.
type Event struct {
	ID        string
	Timestamp int64
	Body      []byte
	// Tenant is the tenant whose key verified the request: dedupe by
	// (Tenant, ID), since event IDs are unique per sender only.
	Tenant string
	// Trace is the W3C traceparent the request carried (the sender's
	// attempt span), the zero TraceParent when none: continue it (see
	// TraceParent). It is not covered by the signature.
	Trace TraceParent
}

type ctxKey struct{}

// FromContext returns the verified event Middleware stored.
func FromContext(ctx context.Context) (Event, bool) {
	e, ok := ctx.Value(ctxKey{}).(Event)
	return e, ok
}

// Options configures Middleware.
type Options struct {
	// MaxBody caps the body; larger requests get 413. Defaults to DefaultMaxBody.
	MaxBody int64
	// OnReject is told why a request was rejected (for logs and metrics;
	// the sender only ever sees a generic 401).
	OnReject func(r *http.Request, err error)
	// Busy, when set, is asked before anything is read: while it reports
	// true the request is answered 503 with its Retry-After, so the sender's
	// retries do the queueing (inbox.BacklogGuard is one).
	Busy func(r *http.Request) (retryAfter time.Duration, busy bool)
	// Tenant, when set, names the tenant a request is for (from its URL,
	// say): only that tenant's keys are tried (Verifier.VerifyFor), so a
	// receiver for many tenants stays within MaxChecksPerRequest. Nil, or
	// "" for a request, tries every key.
	Tenant func(r *http.Request) string
}

// Middleware verifies each request before next sees it: it caps the body,
// verifies the signature over the raw bytes (never re-encoded JSON), and
// hands the verified event on in the request context. Failures answer a
// generic 401 and never reveal the expected signature.
func Middleware(v *Verifier, opts Options, next http.Handler) http.Handler {
	maxBody := opts.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.Busy != nil {
			if after, busy := opts.Busy(r); busy {
				w.Header().Set("Retry-After", strconv.Itoa(max(1, int(after.Round(time.Second)/time.Second))))
				http.Error(w, "busy; retry later", http.StatusServiceUnavailable)
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var match Match
		if tenant := tenantOf(opts, r); tenant != "" {
			match, err = v.VerifyFor(tenant, r.Header, body)
		} else {
			match, err = v.VerifyTenant(r.Header, body)
		}
		if err != nil {
			if opts.OnReject != nil {
				opts.OnReject(r, err)
			}
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		ev := Event{ID: r.Header.Get("webhook-id"), Body: body, Tenant: match.Tenant}
		ev.Timestamp, _ = strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		ev.Trace, _ = ParseTraceParent(r.Header.Get("traceparent"), r.Header.Get("tracestate"))
		if ev.ID == "" {
			// X-Webhook-Signature alone carries no ID; take the envelope's.
			ev.ID = envelopeID(body)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, ev)))
	})
}

// envelopeID extracts "id" from a verified hookrelay envelope.
func envelopeID(body []byte) string {
	var env struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &env)
	return env.ID
}

// tenantOf is the tenant opts.Tenant names for r, "" for none.
func tenantOf(opts Options, r *http.Request) string {
	if opts.Tenant == nil {
		return ""
	}
	return opts.Tenant(r)
}
