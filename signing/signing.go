// Package signing builds the signature headers hookrelay sends on every
// attempt (docs/contract.md#3-headers-and-signatures): the Standard Webhooks trio and X-Webhook-Signature.
// It also parses and generates endpoint secrets. It holds no Temporal or
// database code.
package signing

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names sent on every attempt.
const (
	HeaderID         = "webhook-id"
	HeaderTimestamp  = "webhook-timestamp"
	HeaderSignature  = "webhook-signature"
	HeaderXSignature = "X-Webhook-Signature"
)

// SecretPrefix starts every HMAC endpoint secret; SigningKeyPrefix an
// Ed25519 signing key (hookrelay's own, never shown); PublicKeyPrefix its
// public key, which receivers verify v1a signatures with.
const (
	SecretPrefix     = "whsec_"
	SigningKeyPrefix = "whsk_"
	PublicKeyPrefix  = "whpk_"
)

// Signature schemes an endpoint is signed with.
const (
	// SchemeHMAC signs v1 (HMAC-SHA256) in webhook-signature and in
	// X-Webhook-Signature.
	SchemeHMAC = "hmac-sha256"
	// SchemeEd25519 signs v1a (Ed25519) in webhook-signature only: receivers
	// hold only the public key, which Standard Webhooks prefers.
	SchemeEd25519 = "ed25519"
)

// Secret sizes in bytes after base64 decoding.
const (
	MinSecretBytes     = 24
	MaxSecretBytes     = 64
	DefaultSecretBytes = 32
)

// Errors returned by ParseSecret.
var (
	ErrSecretPrefix = errors.New("secret must start with " + SecretPrefix)
	ErrSecretBase64 = errors.New("secret is not valid base64 after " + SecretPrefix)
	ErrSecretLength = fmt.Errorf("secret must decode to %d–%d bytes", MinSecretBytes, MaxSecretBytes)
)

// Key is one signing key: an HMAC secret or an Ed25519 private key, and an
// identifier that may be logged and stored (never the key itself).
type Key struct {
	ID     string
	Secret []byte
	// Private is set for an Ed25519 key (and Secret is then empty).
	Private ed25519.PrivateKey
}

// ParseKey decodes a stored key: "whsec_…" (HMAC) or "whsk_…" (Ed25519).
func ParseKey(id, s string) (Key, error) {
	if strings.HasPrefix(s, SigningKeyPrefix) {
		priv, err := ParseSigningKey(s)
		return Key{ID: id, Private: priv}, err
	}
	secret, err := ParseSecret(s)
	return Key{ID: id, Secret: secret}, err
}

// ParseSigningKey decodes "whsk_<base64 of the 32-byte Ed25519 seed>".
func ParseSigningKey(s string) (ed25519.PrivateKey, error) {
	rest, ok := strings.CutPrefix(s, SigningKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("signing key must start with %s", SigningKeyPrefix)
	}
	seed, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("signing key must be %s and the base64 of a %d-byte seed", SigningKeyPrefix, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// GenerateSigningKey returns a new Ed25519 signing key and its public key.
func GenerateSigningKey() (secret, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate signing key: %w", err)
	}
	return SigningKeyPrefix + base64.StdEncoding.EncodeToString(priv.Seed()), PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub), nil
}

// GenerateKey returns a new key of scheme: its secret (stored sealed) and,
// for Ed25519, the public key receivers verify with.
func GenerateKey(scheme string) (secret, public string, err error) {
	if scheme == SchemeEd25519 {
		return GenerateSigningKey()
	}
	secret, err = GenerateSecret()
	return secret, "", err
}

// Headers is the set of signature headers of one attempt.
type Headers struct {
	ID         string
	Timestamp  int64
	Signature  string // webhook-signature value
	XSignature string // X-Webhook-Signature value
}

// Map returns the headers as name → value; X-Webhook-Signature only when
// an HMAC key signed.
func (h Headers) Map() map[string]string {
	m := map[string]string{
		HeaderID:        h.ID,
		HeaderTimestamp: strconv.FormatInt(h.Timestamp, 10),
		HeaderSignature: h.Signature,
	}
	if h.XSignature != "" {
		m[HeaderXSignature] = h.XSignature
	}
	return m
}

// Sign signs body for event id at ts with every key, newest first (keys[0]
// is the current key, the rest previous keys still in their grace period).
func Sign(id string, ts time.Time, body []byte, keys []Key) (Headers, error) {
	if len(keys) == 0 {
		return Headers{}, errors.New("sign: no signing key")
	}
	unix := ts.Unix()
	tsStr := strconv.FormatInt(unix, 10)
	std := make([]string, 0, len(keys))
	x := make([]string, 0, len(keys)+1)
	x = append(x, "t="+tsStr)
	for _, k := range keys {
		if k.Private != nil {
			signed := append([]byte(id+"."+tsStr+"."), body...)
			std = append(std, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(k.Private, signed)))
			continue
		}
		std = append(std, "v1,"+base64.StdEncoding.EncodeToString(mac(k.Secret, id+"."+tsStr+".", body)))
		x = append(x, "v1="+hex.EncodeToString(mac(k.Secret, tsStr+".", body)))
	}
	h := Headers{ID: id, Timestamp: unix, Signature: strings.Join(std, " ")}
	if len(x) > 1 {
		h.XSignature = strings.Join(x, ",")
	}
	return h, nil
}

func mac(key []byte, prefix string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prefix))
	m.Write(body)
	return m.Sum(nil)
}

// ParseSecret decodes a "whsec_<base64>" secret into its HMAC key bytes.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, ErrSecretPrefix
	}
	if rest == "" {
		return nil, ErrSecretLength
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		// Accept unpadded and URL-safe forms some libraries print.
		if key, err = base64.RawStdEncoding.DecodeString(rest); err != nil {
			if key, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(rest, "=")); err != nil {
				return nil, ErrSecretBase64
			}
		}
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("%w (got %d)", ErrSecretLength, len(key))
	}
	return key, nil
}

// GenerateSecret returns a new random secret of DefaultSecretBytes bytes.
func GenerateSecret() (string, error) {
	b := make([]byte, DefaultSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}
