package activities

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"hookrelay/delivery"
	"hookrelay/internal/egress"
	"hookrelay/internal/netguard"
)

// Class is the classification of one attempt (docs/contract.md#4-retries-and-classes); the
// vocabulary is package delivery's.
type Class = delivery.Class

// Attempt classes.
const (
	ClassSuccess          = delivery.ClassSuccess
	ClassRetryable        = delivery.ClassRetryable
	ClassThrottled        = delivery.ClassThrottled
	ClassPermanent        = delivery.ClassPermanent
	ClassEndpointDisabled = delivery.ClassEndpointDisabled
	ClassEndpointPaused   = delivery.ClassEndpointPaused
	ClassRateLimited      = delivery.ClassRateLimited
	ClassEndpointBusy     = delivery.ClassEndpointBusy
	ClassProxy            = delivery.ClassProxy
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

// ClassifyError maps a transport error to its class and a short reason,
// by error type. Timeouts, refused or reset connections, DNS and TLS failures
// are retryable; a target refused by the address guard is permanent; a
// failure to reach the egress proxy or to open its tunnel is ClassProxy,
// unless the proxy works and could not reach the target
// (*egress.UnreachableError: the endpoint's failure, retryable).
func ClassifyError(err error) (Class, string) {
	var (
		blocked     *netguard.BlockedError
		proxyErr    *egress.ProxyError
		unreachable *egress.UnreachableError
		dnsErr      *net.DNSError
		certErr     *tls.CertificateVerificationError
		unknownCA   x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		alert       tls.AlertError
		record      tls.RecordHeaderError
		netErr      net.Error
	)
	switch {
	case errors.As(err, &blocked):
		return ClassPermanent, blocked.Error()
	case errors.As(err, &proxyErr):
		return ClassProxy, proxyErr.Error()
	case errors.As(err, &unreachable) && unreachable.Status != "":
		// A working proxy could not reach the target: the endpoint's
		// failure, as a refused connection made directly would be.
		return ClassRetryable, unreachable.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ClassRetryable, "timeout: no complete response within the request timeout"
	case errors.As(err, &dnsErr):
		return ClassRetryable, "dns: " + dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassRetryable, "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClassRetryable, "connection reset before a complete response"
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalidErr),
		errors.As(err, &alert), errors.As(err, &record):
		return ClassRetryable, "tls: " + lastPart(err.Error())
	}
	return ClassRetryable, "transport: " + lastPart(err.Error())
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
