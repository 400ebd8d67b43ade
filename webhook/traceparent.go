package webhook

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
)

// TraceParent is the W3C trace context (https://www.w3.org/TR/trace-context/)
// a delivery carried when the sender traces it: hookrelay sends its
// attempt's span as traceparent. Middleware parses it into Event.Trace so a
// receiver continues the sender's trace: with OpenTelemetry, extract it
// from the request headers with the W3C propagator as usual; without, log
// TraceID and pass Child on to the calls the handler makes. The package
// stays standard-library only.
type TraceParent struct {
	TraceID [16]byte
	// SpanID is the sender's span (the attempt), the parent of the
	// receiver's.
	SpanID [8]byte
	// Flags are the trace flags (bit 0: sampled).
	Flags byte
	// State is the tracestate header as sent (vendor data), "" when none.
	State string
}

// ParseTraceParent parses a traceparent header (and its tracestate); ok
// is false for an absent or malformed one (the receiver then starts its
// own trace). A version above 00 is read as 00, as the specification asks.
func ParseTraceParent(traceparent, tracestate string) (p TraceParent, ok bool) {
	v := strings.TrimSpace(traceparent)
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || (len(v) > 55 && v[55] != '-') {
		return TraceParent{}, false
	}
	version, okv := hexByte(v[0:2])
	if !okv || version == 0xff || (version == 0 && len(v) != 55) {
		return TraceParent{}, false
	}
	if !lowerHex(v[3:35]) || !lowerHex(v[36:52]) {
		return TraceParent{}, false
	}
	if _, err := hex.Decode(p.TraceID[:], []byte(v[3:35])); err != nil {
		return TraceParent{}, false
	}
	if _, err := hex.Decode(p.SpanID[:], []byte(v[36:52])); err != nil {
		return TraceParent{}, false
	}
	flags, okf := hexByte(v[53:55])
	if !okf || p.TraceID == [16]byte{} || p.SpanID == [8]byte{} {
		return TraceParent{}, false
	}
	p.Flags, p.State = flags, strings.TrimSpace(tracestate)
	return p, true
}

// IsValid reports whether p names a trace (the zero TraceParent does not).
func (p TraceParent) IsValid() bool { return p.TraceID != [16]byte{} && p.SpanID != [8]byte{} }

// Sampled reports whether the sender records the trace.
func (p TraceParent) Sampled() bool { return p.Flags&1 == 1 }

// TraceIDString is the trace ID in lower-case hex, "" for none (log it
// to find the delivery in the sender's traces).
func (p TraceParent) TraceIDString() string {
	if !p.IsValid() {
		return ""
	}
	return hex.EncodeToString(p.TraceID[:])
}

// String is p as a traceparent header value, "" for none.
func (p TraceParent) String() string {
	if !p.IsValid() {
		return ""
	}
	return "00-" + hex.EncodeToString(p.TraceID[:]) + "-" + hex.EncodeToString(p.SpanID[:]) + "-" + hex.EncodeToString([]byte{p.Flags})
}

// Child is a new span of the same trace under p, for a call the handler
// makes (set it with Inject): the trace goes on past the receiver.
func (p TraceParent) Child() TraceParent {
	c := p
	for c.SpanID == p.SpanID || c.SpanID == [8]byte{} {
		_, _ = rand.Read(c.SpanID[:])
	}
	return c
}

// Inject sets p as traceparent (and tracestate) on h; nothing for none.
func (p TraceParent) Inject(h http.Header) {
	if !p.IsValid() {
		return
	}
	h.Set("traceparent", p.String())
	if p.State != "" {
		h.Set("tracestate", p.State)
	}
}

func hexByte(s string) (byte, bool) {
	if !lowerHex(s) {
		return 0, false
	}
	var b [1]byte
	_, err := hex.Decode(b[:], []byte(s))
	return b[0], err == nil
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
