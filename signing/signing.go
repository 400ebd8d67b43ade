// Package signing builds the signature headers hookrelay sends on every
// attempt (CONTRACT §3): the Standard Webhooks trio and X-Webhook-Signature.
// It also parses and generates endpoint secrets. It holds no Temporal or
// database code.
package signing

import (
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

// SecretPrefix starts every endpoint secret.
const SecretPrefix = "whsec_"

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

// Key is one signing key: the decoded secret and an identifier that may be
// logged and stored (never the secret itself).
type Key struct {
	ID     string
	Secret []byte
}

// Headers is the set of signature headers of one attempt.
type Headers struct {
	ID         string
	Timestamp  int64
	Signature  string // webhook-signature value
	XSignature string // X-Webhook-Signature value
}

// Map returns the headers as name → value.
func (h Headers) Map() map[string]string {
	return map[string]string{
		HeaderID:         h.ID,
		HeaderTimestamp:  strconv.FormatInt(h.Timestamp, 10),
		HeaderSignature:  h.Signature,
		HeaderXSignature: h.XSignature,
	}
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
		std = append(std, "v1,"+base64.StdEncoding.EncodeToString(mac(k.Secret, id+"."+tsStr+".", body)))
		x = append(x, "v1="+hex.EncodeToString(mac(k.Secret, tsStr+".", body)))
	}
	return Headers{
		ID:         id,
		Timestamp:  unix,
		Signature:  strings.Join(std, " "),
		XSignature: strings.Join(x, ","),
	}, nil
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
