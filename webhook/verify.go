// Package webhook verifies webhooks on the receiving side: Standard Webhooks
// signatures (v1 HMAC-SHA256 and v1a Ed25519) and the X-Webhook-Signature
// header, over the raw body bytes, with a freshness window and several
// secrets for rotation. It depends on the standard library only.
package webhook

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a timestamp may be from now, either way.
const DefaultTolerance = 5 * time.Minute

// Bounds on what a verifier reads of a signature header, so that one
// request from a stranger costs at most a few Ed25519 checks per public
// key: senders send a signature per valid key (hookrelay at most two,
// during a rotation). v1 entries are not counted: each costs a decode and a
// compare per secret, the HMACs being computed once.
const (
	// MaxSignatureHeaderBytes is the longest signature header read; a
	// longer one is malformed, before any signature is checked.
	MaxSignatureHeaderBytes = 1024
	// MaxEd25519Signatures is the most v1a signatures one header may
	// carry (a sender rotating its key signs with two): each is checked
	// against every public key.
	MaxEd25519Signatures = 2
	// MaxChecksPerRequest bounds the passes over a request's body one
	// verification may make: one HMAC per secret tried, one Ed25519 check
	// per v1a signature and public key tried. Each reads the whole body
	// (about 2–3 ms a MiB), so a request with no valid signature costs at
	// most this many. A verifier whose keys would take more refuses the
	// request (ErrTooManyKeys) before reading it: with many tenants, name
	// the request's tenant (VerifyFor, Options.Tenant), so only its keys
	// (one or two during a rotation) are tried.
	MaxChecksPerRequest = 16
)

// Typed verification errors. Log them; answer the sender a generic 401.
var (
	ErrMissingHeader = errors.New("webhook: missing signature headers")
	ErrMalformed     = errors.New("webhook: malformed signature header")
	ErrStale         = errors.New("webhook: timestamp too old")
	ErrFuture        = errors.New("webhook: timestamp too far in the future")
	ErrNoMatch       = errors.New("webhook: no matching signature")
	ErrNoKeys        = errors.New("webhook: verifier has no secret or public key")
	// ErrTooManyKeys: checking the request against every key it could
	// match would take more than MaxChecksPerRequest passes over its body.
	ErrTooManyKeys = errors.New("webhook: too many keys to try for one request; name its tenant (VerifyFor, Options.Tenant)")
)

// Verifier checks signatures with any of its keys. Each key belongs to a
// tenant (a sender, or one of its apps); a receiver for many tenants holds
// them all and learns from Match which one signed.
type Verifier struct {
	secrets    []tenantKey
	publicKeys []tenantPublicKey
	// Tolerance is the freshness window. Defaults to DefaultTolerance.
	Tolerance time.Duration
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

type tenantKey struct {
	tenant string
	secret []byte
}

type tenantPublicKey struct {
	tenant string
	key    ed25519.PublicKey
}

// Match says which tenant's key verified a request.
type Match struct {
	// Tenant is the key's tenant ("" for keys added without one).
	Tenant string
}

// NewVerifier returns a verifier for "whsec_…" secrets (newest first) of
// one sender; AddTenantSecret adds others'.
func NewVerifier(secrets ...string) (*Verifier, error) {
	v := &Verifier{}
	for i, s := range secrets {
		if err := v.AddTenantSecret("", s); err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
	}
	return v, nil
}

// AddTenantSecret adds a "whsec_…" secret of tenant.
func (v *Verifier) AddTenantSecret(tenant, s string) error {
	key, err := parseKey(s, "whsec_")
	if err != nil {
		return err
	}
	v.secrets = append(v.secrets, tenantKey{tenant: tenant, secret: key})
	return nil
}

// AddPublicKey adds a "whpk_…" Ed25519 public key for v1a signatures.
func (v *Verifier) AddPublicKey(s string) error { return v.AddTenantPublicKey("", s) }

// AddTenantPublicKey adds a "whpk_…" Ed25519 public key of tenant.
func (v *Verifier) AddTenantPublicKey(tenant, s string) error {
	key, err := parseKey(s, "whpk_")
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	if len(key) != ed25519.PublicKeySize {
		return fmt.Errorf("public key: want %d bytes, got %d", ed25519.PublicKeySize, len(key))
	}
	v.publicKeys = append(v.publicKeys, tenantPublicKey{tenant: tenant, key: ed25519.PublicKey(key)})
	return nil
}

func parseKey(s, prefix string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" {
		return nil, fmt.Errorf("must be %s followed by base64", prefix)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("invalid base64: %w", err)
	}
	return key, nil
}

// Verify checks the request's signature headers against body. Every format
// present must verify: webhook-id/-timestamp/-signature (Standard Webhooks)
// and X-Webhook-Signature; at least one must be present.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	_, err := v.VerifyTenant(h, body)
	return err
}

// VerifyTenant is Verify answering which tenant's key matched. When both
// header formats are present, both must verify with the same tenant's keys.
// Every key of the verifier may be tried, within MaxChecksPerRequest.
func (v *Verifier) VerifyTenant(h http.Header, body []byte) (Match, error) {
	return v.keys(v.secrets, v.publicKeys).verify(h, body)
}

// VerifyFor is VerifyTenant trying only tenant's keys: a receiver for many
// tenants that knows whose request this is (its URL names it) stays
// within MaxChecksPerRequest whatever the number of tenants.
func (v *Verifier) VerifyFor(tenant string, h http.Header, body []byte) (Match, error) {
	var secrets []tenantKey
	for _, s := range v.secrets {
		if s.tenant == tenant {
			secrets = append(secrets, s)
		}
	}
	var publicKeys []tenantPublicKey
	for _, pk := range v.publicKeys {
		if pk.tenant == tenant {
			publicKeys = append(publicKeys, pk)
		}
	}
	if len(secrets) == 0 && len(publicKeys) == 0 && (len(v.secrets) > 0 || len(v.publicKeys) > 0) {
		return Match{}, fmt.Errorf("%w: no key of tenant %q", ErrNoMatch, truncate(tenant))
	}
	return v.keys(secrets, publicKeys).verify(h, body)
}

// keySet is the keys one request is checked against, with the verifier's
// clock and tolerance.
type keySet struct {
	v          *Verifier
	secrets    []tenantKey
	publicKeys []tenantPublicKey
}

func (v *Verifier) keys(secrets []tenantKey, publicKeys []tenantPublicKey) keySet {
	return keySet{v: v, secrets: secrets, publicKeys: publicKeys}
}

func (v keySet) verify(h http.Header, body []byte) (Match, error) {
	if len(v.secrets) == 0 && len(v.publicKeys) == 0 {
		return Match{}, ErrNoKeys
	}
	std := h.Get("webhook-signature") != "" || h.Get("webhook-id") != "" || h.Get("webhook-timestamp") != ""
	x := h.Get("X-Webhook-Signature") != ""
	if !std && !x {
		return Match{}, ErrMissingHeader
	}
	var tenants []string
	if std {
		t, err := v.verifyStandard(h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"), body)
		if err != nil {
			return Match{}, err
		}
		tenants = append(tenants, t)
	}
	if x {
		t, err := v.verifyX(h.Get("X-Webhook-Signature"), body)
		if err != nil {
			return Match{}, err
		}
		tenants = append(tenants, t)
	}
	if len(tenants) == 2 && tenants[0] != tenants[1] {
		return Match{}, ErrNoMatch
	}
	return Match{Tenant: tenants[0]}, nil
}

func (v keySet) checkTime(ts string) (int64, error) {
	return v.v.checkTime(ts)
}

func (v *Verifier) checkTime(ts string) (int64, error) {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sec < 0 {
		return 0, fmt.Errorf("%w: timestamp %q", ErrMalformed, truncate(ts))
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tol := v.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	n := now().Unix()
	switch {
	case sec < n-int64(tol/time.Second):
		return 0, ErrStale
	case sec > n+int64(tol/time.Second):
		return 0, ErrFuture
	}
	return sec, nil
}

// verifyStandard checks the Standard Webhooks headers: everything about
// the header first (its length, the timestamp, its entries), then at most
// MaxChecksPerRequest passes over the body, none when nothing in the header
// could match.
func (v keySet) verifyStandard(id, ts, sigs string, body []byte) (string, error) {
	if id == "" || ts == "" || sigs == "" {
		return "", ErrMissingHeader
	}
	if len(sigs) > MaxSignatureHeaderBytes {
		return "", fmt.Errorf("%w: webhook-signature longer than %d bytes", ErrMalformed, MaxSignatureHeaderBytes)
	}
	if _, err := v.checkTime(ts); err != nil {
		return "", err
	}
	var hmacs, ed [][]byte
	for _, part := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(part, ",")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		switch {
		case err != nil:
		case version == "v1" && len(raw) == sha256.Size:
			hmacs = append(hmacs, raw)
		case version == "v1a" && len(raw) == ed25519.SignatureSize:
			ed = append(ed, raw)
		}
	}
	if len(ed) > MaxEd25519Signatures {
		return "", fmt.Errorf("%w: webhook-signature carries more than %d v1a signatures", ErrMalformed, MaxEd25519Signatures)
	}
	if len(hmacs) == 0 && len(ed) == 0 {
		return "", ErrMalformed
	}
	checks := len(ed) * len(v.publicKeys)
	if len(hmacs) > 0 {
		checks += len(v.secrets)
	}
	if checks > MaxChecksPerRequest {
		return "", ErrTooManyKeys
	}
	signed := make([]byte, 0, len(id)+len(ts)+2+len(body))
	signed = append(append(append(append(signed, id...), '.'), ts...), '.')
	signed = append(signed, body...)
	if len(hmacs) > 0 {
		for _, s := range v.secrets {
			m := hmac.New(sha256.New, s.secret)
			m.Write(signed)
			want := m.Sum(nil)
			for _, got := range hmacs {
				if hmac.Equal(got, want) {
					return s.tenant, nil
				}
			}
		}
	}
	for _, sig := range ed {
		for _, pk := range v.publicKeys {
			if ed25519.Verify(pk.key, signed, sig) {
				return pk.tenant, nil
			}
		}
	}
	return "", ErrNoMatch
}

// verifyX checks X-Webhook-Signature: the header first, then one HMAC
// pass over the body per secret, at most MaxChecksPerRequest.
func (v keySet) verifyX(header string, body []byte) (string, error) {
	if len(header) > MaxSignatureHeaderBytes {
		return "", fmt.Errorf("%w: X-Webhook-Signature longer than %d bytes", ErrMalformed, MaxSignatureHeaderBytes)
	}
	parts := strings.Split(header, ",")
	var ts string
	var sigs [][]byte
	for _, part := range parts {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return "", ErrMalformed
		}
		switch k {
		case "t":
			ts = val
		case "v1":
			raw, err := hex.DecodeString(val)
			if err != nil || len(raw) != sha256.Size {
				continue
			}
			sigs = append(sigs, raw)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return "", ErrMalformed
	}
	if _, err := v.checkTime(ts); err != nil {
		return "", err
	}
	if len(v.secrets) > MaxChecksPerRequest {
		return "", ErrTooManyKeys
	}
	for _, s := range v.secrets {
		m := hmac.New(sha256.New, s.secret)
		m.Write([]byte(ts + "."))
		m.Write(body)
		w := m.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(sig, w) {
				return s.tenant, nil
			}
		}
	}
	return "", ErrNoMatch
}

func truncate(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}
