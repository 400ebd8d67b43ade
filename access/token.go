package access

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// TokenPrefix starts every portal link token.
const TokenPrefix = "hrpl_"

// TokenError says why a portal link token was refused.
type TokenError struct {
	// Reason is "malformed", "signature" or "expired".
	Reason string
}

func (e *TokenError) Error() string { return "portal link token refused: " + e.Reason }

// Signer signs and checks portal link tokens: the link's ID and expiry,
// HMAC-SHA256'd with a key derived from the server's secret key, so a token
// cannot be forged, altered or extended. A token names its link; the link's
// row makes it single-use.
type Signer struct {
	key []byte
}

// NewSigner derives the signing key from secret (the server's secret key).
func NewSigner(secret []byte) Signer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("hookrelay portal link v1"))
	return Signer{key: m.Sum(nil)}
}

// Sign returns the token for link id, valid until exp.
func (s Signer) Sign(id string, exp time.Time) string {
	body := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(body, uint64(exp.Unix()))
	body = append(body, id...)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(s.mac(body))
}

// Verify returns the link ID token names when its signature holds and it
// has not expired at now.
func (s Signer) Verify(token string, now time.Time) (string, error) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	enc, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", &TokenError{Reason: "malformed"}
	}
	body, err1 := base64.RawURLEncoding.DecodeString(enc)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || len(body) <= 8 {
		return "", &TokenError{Reason: "malformed"}
	}
	if !hmac.Equal(mac, s.mac(body)) {
		return "", &TokenError{Reason: "signature"}
	}
	if exp := time.Unix(int64(binary.BigEndian.Uint64(body[:8])), 0); !now.Before(exp) {
		return "", &TokenError{Reason: "expired"}
	}
	return string(body[8:]), nil
}

func (s Signer) mac(body []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(body)
	return m.Sum(nil)
}

// String never shows the key.
func (s Signer) String() string { return fmt.Sprintf("access.Signer(%d-byte key)", len(s.key)) }
