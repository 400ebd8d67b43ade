package access

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTripAndRefusals(t *testing.T) {
	s := NewSigner([]byte("secret one"))
	now := time.Unix(1_800_000_000, 0)
	tok := s.Sign("pl_01ABC", now.Add(time.Hour))
	id, err := s.Verify(tok, now)
	if err != nil || id != "pl_01ABC" {
		t.Fatalf("Verify = %q, %v", id, err)
	}
	reason := func(tok string, at time.Time, signer Signer) string {
		_, err := signer.Verify(tok, at)
		var te *TokenError
		if !errors.As(err, &te) {
			t.Fatalf("Verify(%q) = %v, want a *TokenError", tok, err)
		}
		return te.Reason
	}
	// A changed ID or expiry keeps a valid encoding but breaks the MAC.
	forged := s.Sign("pl_OTHER", now.Add(time.Hour))
	spliced := strings.SplitN(forged, ".", 2)[0] + "." + strings.SplitN(tok, ".", 2)[1]
	cases := map[string]struct {
		tok    string
		at     time.Time
		signer Signer
		want   string
	}{
		"expired":      {tok, now.Add(time.Hour), s, "expired"},
		"other key":    {tok, now, NewSigner([]byte("secret two")), "signature"},
		"spliced body": {spliced, now, s, "signature"},
		"flipped mac":  {tok[:len(tok)-2] + flip(tok[len(tok)-2:]), now, s, "signature"},
		"no prefix":    {strings.TrimPrefix(tok, TokenPrefix), now, s, "malformed"},
		"no dot":       {strings.ReplaceAll(tok, ".", ""), now, s, "malformed"},
		"not base64":   {TokenPrefix + "!!.!!", now, s, "malformed"},
		"empty":        {"", now, s, "malformed"},
		"short body":   {TokenPrefix + "AAAA.AAAA", now, s, "malformed"},
	}
	for name, c := range cases {
		if got := reason(c.tok, c.at, c.signer); got != c.want {
			t.Errorf("%s: reason %q, want %q", name, got, c.want)
		}
	}
	if strings.Contains(s.String(), string(s.key)) {
		t.Error("String shows the key")
	}
}

func flip(s string) string {
	if s == "AA" {
		return "BB"
	}
	return "AA"
}

func TestPrincipal(t *testing.T) {
	admin := Principal{Kind: KindKey, Role: RoleAdmin}
	app := Principal{Kind: KindKey, Role: RoleApp, AppID: "app_1"}
	view := Principal{Kind: KindPortal, Role: RoleApp, AppID: "app_1", Capabilities: []Capability{CapView}, EndpointIDs: []string{"ep_1"}}
	if !admin.ReachesApp("app_2") || !app.ReachesApp("app_1") || app.ReachesApp("app_2") || (Principal{}).ReachesApp("") {
		t.Error("ReachesApp")
	}
	if !app.Can(CapResend) || view.Can(CapResend) || !view.Can(CapView) {
		t.Error("Can")
	}
	if !app.SeesEndpoint("ep_9") || !view.SeesEndpoint("ep_1") || view.SeesEndpoint("ep_9") {
		t.Error("SeesEndpoint")
	}
	caps, err := ParseCapabilities([]string{"resend", "resend"})
	if err != nil || len(caps) != 2 || caps[0] != CapView || caps[1] != CapResend {
		t.Errorf("ParseCapabilities = %v, %v", caps, err)
	}
	if _, err := ParseCapabilities([]string{"admin"}); err == nil {
		t.Error("unknown capability accepted")
	}
}
