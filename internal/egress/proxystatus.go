package egress

import (
	"net/http"
	"strings"
)

// Bounds of reading a Proxy-Status header: its bytes and its members.
const (
	proxyStatusMaxBytes   = 4 << 10
	proxyStatusMaxMembers = 16
)

// isTargetError reports whether an RFC 9209 error type says the target,
// not the proxy, failed: it could not be found, reached or kept connected.
// A proxy's own errors (proxy_internal_error, proxy_configuration_error,
// destination_ip_prohibited by its policy, …) are not.
func isTargetError(kind string) bool {
	switch kind {
	case "dns_error", "dns_timeout", "destination_not_found", "destination_unavailable", "destination_ip_unroutable",
		"connection_refused", "connection_terminated", "connection_timeout", "connection_read_timeout", "connection_write_timeout":
		return true
	}
	return false
}

// targetFailure is the error type of h's Proxy-Status (RFC 9209) when it
// names a failure of the target, "" otherwise (none, the proxy's own, or
// a header past its bounds). Quoted strings (a details parameter) are
// read as values, never as parameters.
func targetFailure(h http.Header) string {
	values := h.Values("Proxy-Status")
	n := 0
	for _, v := range values {
		n += len(v)
	}
	if n == 0 || n > proxyStatusMaxBytes {
		return ""
	}
	members := splitUnquoted(strings.Join(values, ","), ',')
	if len(members) > proxyStatusMaxMembers {
		return ""
	}
	for _, m := range members {
		params := splitUnquoted(m, ';')
		for _, p := range params[1:] {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if kind := strings.Trim(v, `"`); ok && k == "error" && isTargetError(kind) {
				return kind
			}
		}
	}
	return ""
}

// splitUnquoted splits s at each sep outside a quoted string (where a
// backslash escapes the next byte).
func splitUnquoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
