package egress

import (
	"net/http"
	"testing"
)

// TestProxyStatusQuotedDetails: RFC 9209's details is an sf-string
// (quoted, free text): text inside it that reads "error=<target type>" is
// never taken for the member's error parameter, so a proxy that reports
// its own failure (proxy_internal_error, destination_ip_prohibited) is not
// blamed on the endpoint.
func TestProxyStatusQuotedDetails(t *testing.T) {
	for _, v := range []string{
		`edge; error=proxy_internal_error; details="upstream said; error=connection_refused"`,
		`edge; error=destination_ip_prohibited; details="policy x, rule y; error=dns_error"`,
	} {
		h := http.Header{}
		h.Add("Proxy-Status", v)
		if got := targetFailure(h); got != "" {
			t.Errorf("%s: blamed the target (%q); the proxy named its own error", v, got)
		}
	}
}
