package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"hookrelay/internal/egress"
	"hookrelay/internal/netguard"
	"hookrelay/signing"
	"hookrelay/store"
)

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
	client, err := a.client(t)
	if err != nil {
		res.Class, res.Error = ClassifyError(err)
		return
	}
	ctx, probe := egress.WithProbe(ctx)
	resp, err := client.Do(httpReq.WithContext(ctx))
	if err != nil {
		res.Class, res.Error = ClassifyError(probe.Wrap(err))
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
		if resp.StatusCode == http.StatusGone {
			res.Error = "HTTP 410 Gone; the endpoint was disabled"
		} else if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			res.Error = fmt.Sprintf("HTTP %d redirect not followed (Location: %s); check the endpoint's URL", resp.StatusCode, truncate(resp.Header.Get("Location"), 200))
		} else {
			res.Error = fmt.Sprintf("HTTP %d; check the endpoint's configuration", resp.StatusCode)
		}
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

// NewHTTPClient returns the attempt client: no redirects, no proxy,
// keep-alive connection reuse per endpoint host, and (when guarded) the
// private-address guard at dial time.
func NewHTTPClient(guarded bool) *http.Client {
	return NewHTTPClientWith(guarded, nil)
}

// NewHTTPClientWith is NewHTTPClient resolving names with resolver (nil:
// the system's).
func NewHTTPClientWith(guarded bool, resolver *net.Resolver) *http.Client {
	return NewHTTPClientVia(guarded, resolver, nil)
}

// NewHTTPClientVia is NewHTTPClientWith sending every request through
// the forward proxy p with CONNECT (nil: directly); the address guard
// then runs on each target before the CONNECT (see package egress).
// HTTP_PROXY and the like are never read.
func NewHTTPClientVia(guarded bool, resolver *net.Resolver, p *egress.Proxy) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = netguard.Dialer(guarded, resolver).DialContext
	if p != nil {
		tr.DialContext = (&egress.Dialer{Proxy: p, Guarded: guarded, Resolver: resolver}).DialContext
	}
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
