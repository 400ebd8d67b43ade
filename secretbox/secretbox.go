// Package secretbox seals secrets at rest (endpoint signing secrets, custom
// header values) with AES-256-GCM. A Box holds one or more keys: the newest
// seals, every one opens, so the sealing key can be rotated (see Reseal in
// package store and `hookrelay rotate-secret-key`).
package secretbox

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a sealing key in bytes.
const KeySize = 32

// Sealed values start with Version and the 8-byte ID of the key that sealed
// them. Values sealed before key IDs existed have neither; every key is
// tried on them.
const (
	Version   = 1
	KeyIDSize = 8
)

// ErrOpen: no key of the box opens the value (a wrong or retired
// HOOKRELAY_SECRET_KEY, or a value bound to another row).
var ErrOpen = errors.New("no sealing key opens the value")

// Box seals with its newest key and opens with any of its keys.
type Box struct {
	keys []boxKey // newest first
}

type boxKey struct {
	id   [KeyIDSize]byte
	aead cipher.AEAD
}

// New returns a Box sealing with key and opening with key and older keys
// (newest first).
func New(key []byte, older ...[]byte) (*Box, error) {
	b := &Box{}
	for _, k := range append([][]byte{key}, older...) {
		if len(k) != KeySize {
			return nil, fmt.Errorf("secret key must be %d bytes, got %d", KeySize, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("aes: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("gcm: %w", err)
		}
		b.keys = append(b.keys, boxKey{id: KeyID(k), aead: aead})
	}
	return b, nil
}

// KeyID identifies a key without revealing it: the first bytes of its
// SHA-256.
func KeyID(key []byte) [KeyIDSize]byte {
	sum := sha256.Sum256(key)
	var id [KeyIDSize]byte
	copy(id[:], sum[:KeyIDSize])
	return id
}

// ParseKey decodes a base64 sealing key.
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("secret key is not base64: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key must decode to %d bytes, got %d", KeySize, len(key))
	}
	return key, nil
}

// ParseKeys decodes a comma-separated list of base64 keys, newest first, as
// HOOKRELAY_SECRET_KEY holds them during a rotation.
func ParseKeys(s string) ([][]byte, error) {
	var out [][]byte
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, err := ParseKey(part)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, errors.New("no secret key given")
	}
	return out, nil
}

// Open parses HOOKRELAY_SECRET_KEY (see ParseKeys) into a Box.
func Open(s string) (*Box, error) {
	keys, err := ParseKeys(s)
	if err != nil {
		return nil, err
	}
	return New(keys[0], keys[1:]...)
}

// GenerateKey returns a new random key, base64-encoded.
func GenerateKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Prefix is how every value the newest key seals starts: Version and its
// key ID. A stored value without it needs sealing again.
func (b *Box) Prefix() []byte {
	return append([]byte{Version}, b.keys[0].id[:]...)
}

// Seal encrypts plaintext with the newest key; aad binds it to its row
// (e.g. the secret's ID) so sealed values cannot be swapped between rows.
func (b *Box) Seal(plaintext, aad []byte) ([]byte, error) {
	k := b.keys[0]
	n := k.aead.NonceSize()
	out := make([]byte, 1+KeyIDSize+n, 1+KeyIDSize+n+len(plaintext)+k.aead.Overhead())
	copy(out, b.Prefix())
	nonce := out[1+KeyIDSize:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return k.aead.Seal(out, nonce, plaintext, aad), nil
}

// Open decrypts a value produced by Seal (with any of the box's keys) with
// the same aad; it fails with ErrOpen.
func (b *Box) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) > 1+KeyIDSize && sealed[0] == Version {
		for _, k := range b.keys {
			if bytes.Equal(sealed[1:1+KeyIDSize], k.id[:]) {
				if out, ok := open(k.aead, sealed[1+KeyIDSize:], aad); ok {
					return out, nil
				}
			}
		}
	}
	// Sealed before key IDs: try every key on the whole value.
	for _, k := range b.keys {
		if out, ok := open(k.aead, sealed, aad); ok {
			return out, nil
		}
	}
	return nil, ErrOpen
}

func open(aead cipher.AEAD, sealed, aad []byte) ([]byte, bool) {
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return nil, false
	}
	out, err := aead.Open(nil, sealed[:n], sealed[n:], aad)
	return out, err == nil
}
