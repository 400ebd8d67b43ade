package activities

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hookrelay/delivery"
	"hookrelay/internal/netguard"
)

// Class is the classification of one attempt (CONTRACT §4); the
// vocabulary is package delivery's.
type Class = delivery.Class

// Attempt classes.
const (
	ClassSuccess          = delivery.ClassSuccess
	ClassRetryable        = delivery.ClassRetryable
	ClassThrottled        = delivery.ClassThrottled
	ClassPermanent        = delivery.ClassPermanent
	ClassEndpointDisabled = delivery.ClassEndpointDisabled
)

// ClassifyStatus maps an HTTP status code to its class.
func ClassifyStatus(code int) Class {
	switch {
	case code >= 200 && code < 300:
		return ClassSuccess
	case code == http.StatusTooManyRequests:
		return ClassThrottled
	case code >= 500:
		return ClassRetryable
	default: // 1xx (unexpected final), 3xx, other 4xx
		return ClassPermanent
	}
}

// ClassifyError maps a transport error to its class and a short reason.
// Timeouts, refused or reset connections, DNS and TLS failures are
// retryable; a target refused by the address guard is permanent.
func ClassifyError(err error) (Class, string) {
	var blocked *netguard.BlockedError
	switch {
	case errors.As(err, &blocked):
		return ClassPermanent, blocked.Error()
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return ClassRetryable, "timeout: no complete response within the request timeout"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return ClassRetryable, "dns: " + dnsErr.Err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "connection refused"):
		return ClassRetryable, "connection refused"
	case strings.Contains(msg, "connection reset"), strings.Contains(msg, "EOF"):
		return ClassRetryable, "connection reset before a complete response"
	case strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"):
		return ClassRetryable, "tls: " + lastPart(msg)
	}
	return ClassRetryable, "transport: " + lastPart(msg)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func lastPart(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		return msg[i+2:]
	}
	return msg
}

// ParseRetryAfter parses a Retry-After value: delay seconds or an HTTP date.
// It reports false when the value is absent or unusable.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(365*24*time.Hour/time.Second) {
			secs = int64(365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}
