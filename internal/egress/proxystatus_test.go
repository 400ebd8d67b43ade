package egress

import (
	"net/http"
	"strings"
	"testing"
)

// TestTargetFailure: only a Proxy-Status error type that names the target
// blames it; the proxy's own types, none, or a header past its bounds do
// not.
func TestTargetFailure(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{`envoy; error=connection_refused`}, "connection_refused"},
		{[]string{`"squid"; error="connection_timeout"; details="…"`}, "connection_timeout"},
		{[]string{`edge; error=proxy_internal_error`}, ""},
		{[]string{`edge; error=destination_ip_prohibited`}, ""},
		{[]string{`inner; error=destination_unavailable, outer`}, "destination_unavailable"},
		{[]string{`a`, `b; received-status=503`}, ""},
		{[]string{strings.Repeat("p, ", 20) + "x; error=connection_refused"}, ""},
		{[]string{"x; error=connection_refused; details=\"" + strings.Repeat("a", 5000) + "\""}, ""},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add("Proxy-Status", v)
		}
		if got := targetFailure(h); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.values, got, tc.want)
		}
	}
}
