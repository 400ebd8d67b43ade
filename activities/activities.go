// Package activities holds the delivery workflow's side effects: one signed
// HTTP attempt (SendSigned) and the delivery state changes the workflow
// decides (MarkDelivery). Both read and write Postgres through the store.
package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"hookrelay/internal/netguard"
	"hookrelay/signing"
	"hookrelay/store"
)

// Limits of one attempt.
const (
	// MaxResponseBytes is how much of a response body is read.
	MaxResponseBytes = 64 << 10
	// ExcerptBytes is how much of it is stored with the attempt.
	ExcerptBytes = 2 << 10
)

// SendRequest asks for one attempt of a delivery.
type SendRequest struct {
	DeliveryID string
	Cycle      int
	Number     int
	// Timeout bounds the whole request: connect, TLS, headers and body.
	Timeout time.Duration
}

// SendResult is the classified outcome of one attempt.
type SendResult struct {
	Number          int
	StartedAt       time.Time
	DurationMS      int64
	StatusCode      int // 0 when no response arrived
	Class           Class
	Error           string
	ResponseExcerpt string
	// RetryAfter is the parsed Retry-After hint of a 429, when present.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// MarkRequest records a state the workflow decided.
type MarkRequest struct {
	DeliveryID string
	Status     string
	Reason     string
	Cycle      int
}

// Store is what the activities need from Postgres.
type Store interface {
	LoadTarget(ctx context.Context, deliveryID string, now time.Time) (store.Target, error)
	RecordAttempt(ctx context.Context, a store.Attempt) error
	MarkDelivery(ctx context.Context, deliveryID, status, reason string, cycle int) error
}

var _ Store = (*store.Store)(nil)

// Activities holds the dependencies of the delivery activities. Register a
// value with the worker; workflows refer to methods of a nil *Activities.
type Activities struct {
	Store Store
	// HTTP sends attempts. It must not follow redirects (see NewHTTPClient).
	HTTP *http.Client
	// UserAgent is sent on every attempt.
	UserAgent string
	// Logger must never receive secrets or full signatures.
	Logger *slog.Logger
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// SendSigned makes one signed POST of a delivery and records it. Transport
// and HTTP failures are results, not errors; an error means the attempt
// could not be prepared or recorded (the workflow treats it as retryable).
func (a *Activities) SendSigned(ctx context.Context, req SendRequest) (SendResult, error) {
	started := a.now()
	t, err := a.Store.LoadTarget(ctx, req.DeliveryID, started)
	if err != nil {
		return SendResult{}, fmt.Errorf("send %s: %w", req.DeliveryID, err)
	}
	res := SendResult{Number: req.Number, StartedAt: started}
	if t.Inactive {
		res.Class = ClassEndpointDisabled
		res.Error = "endpoint disabled or deleted; nothing sent"
		return res, nil
	}
	if len(t.Keys) == 0 {
		return SendResult{}, fmt.Errorf("send %s: endpoint %s has no valid signing key", req.DeliveryID, t.EndpointID)
	}
	hdr, err := signing.Sign(t.EventID, started, t.Payload, t.Keys)
	if err != nil {
		return SendResult{}, fmt.Errorf("send %s: %w", req.DeliveryID, err)
	}
	keyIDs := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		keyIDs[i] = k.ID
	}

	a.post(ctx, t, hdr, req.Timeout, &res)
	res.DurationMS = a.now().Sub(started).Milliseconds()

	rec := store.Attempt{
		DeliveryID: req.DeliveryID, Cycle: req.Cycle, Number: req.Number,
		StartedAt: started, DurationMS: res.DurationMS, Class: string(res.Class),
		Error: res.Error, ResponseExcerpt: res.ResponseExcerpt, KeyIDs: keyIDs,
	}
	if res.StatusCode != 0 {
		code := res.StatusCode
		rec.StatusCode = &code
	}
	if err := a.Store.RecordAttempt(ctx, rec); err != nil {
		return SendResult{}, fmt.Errorf("send %s: %w", req.DeliveryID, err)
	}
	a.logger().Info("attempt",
		"delivery_id", req.DeliveryID, "event_id", t.EventID, "endpoint_id", t.EndpointID,
		"cycle", req.Cycle, "attempt", req.Number, "status_code", res.StatusCode,
		"class", res.Class, "duration_ms", res.DurationMS, "key_ids", keyIDs, "error", res.Error)
	return res, nil
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// post sends the request and fills the HTTP part of res.
func (a *Activities) post(ctx context.Context, t store.Target, hdr signing.Headers, timeout time.Duration, res *SendResult) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(t.Payload))
	if err != nil {
		res.Class, res.Error = ClassPermanent, "invalid endpoint URL: "+err.Error()
		return
	}
	for k, v := range t.Headers {
		httpReq.Header.Set(k, v)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("User-Agent", a.UserAgent)
	// Custom headers cannot name these (the API refuses them). The Standard
	// Webhooks names are sent in their documented lower case.
	for k, v := range hdr.Map() {
		if k == signing.HeaderXSignature {
			httpReq.Header.Set(k, v)
		} else {
			httpReq.Header[k] = []string{v}
		}
	}
	resp, err := a.HTTP.Do(httpReq)
	if err != nil {
		res.Class, res.Error = ClassifyError(err)
		return
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	res.StatusCode = resp.StatusCode
	res.ResponseExcerpt = excerpt(body)
	if readErr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The status line arrived but the body did not finish in time: the
		// receiver did not answer within the timeout.
		res.Class, res.Error = ClassRetryable, "timeout: response body not complete within the request timeout"
		return
	}
	res.Class = ClassifyStatus(resp.StatusCode)
	switch res.Class {
	case ClassThrottled:
		res.RetryAfter, res.HasRetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), a.now())
		res.Error = "HTTP 429 Too Many Requests"
	case ClassPermanent:
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			res.Error = fmt.Sprintf("HTTP %d redirect not followed (Location: %s); check the endpoint's URL", resp.StatusCode, truncate(resp.Header.Get("Location"), 200))
		} else {
			res.Error = fmt.Sprintf("HTTP %d; check the endpoint's configuration", resp.StatusCode)
		}
	case ClassGone:
		res.Error = "HTTP 410 Gone; endpoint disabled"
	case ClassRetryable:
		res.Error = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
}

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

// MarkDelivery records a state the workflow decided (new cycle, dead
// letter, canceled). It is idempotent, so Temporal may retry it freely.
func (a *Activities) MarkDelivery(ctx context.Context, req MarkRequest) error {
	if err := a.Store.MarkDelivery(ctx, req.DeliveryID, req.Status, req.Reason, req.Cycle); err != nil {
		return err
	}
	a.logger().Info("delivery state", "delivery_id", req.DeliveryID, "status", req.Status, "cycle", req.Cycle, "reason", req.Reason)
	return nil
}

// NewHTTPClient returns the attempt client: no redirects, no proxy,
// keep-alive connection reuse per endpoint host, and (when guarded) the
// private-address guard at dial time.
func NewHTTPClient(guarded bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = netguard.Dialer(guarded).DialContext
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
