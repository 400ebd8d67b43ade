package secretbox_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/secretbox"
)

func key(t *testing.T) []byte {
	k, err := secretbox.GenerateKey()
	require.NoError(t, err)
	raw, err := secretbox.ParseKey(k)
	require.NoError(t, err)
	return raw
}

func TestRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := key(t), key(t)
	old, err := secretbox.New(oldKey)
	require.NoError(t, err)
	sealedOld, err := old.Seal([]byte("whsec_x"), []byte("row1"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(sealedOld, old.Prefix()))

	both, err := secretbox.New(newKey, oldKey)
	require.NoError(t, err)
	plain, err := both.Open(sealedOld, []byte("row1"))
	require.NoError(t, err, "an older key still opens")
	require.Equal(t, "whsec_x", string(plain))
	sealedNew, err := both.Seal(plain, []byte("row1"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(sealedNew, both.Prefix()), "the newest key seals")
	require.False(t, bytes.HasPrefix(sealedOld, both.Prefix()))

	onlyNew, err := secretbox.New(newKey)
	require.NoError(t, err)
	_, err = onlyNew.Open(sealedOld, []byte("row1"))
	require.ErrorIs(t, err, secretbox.ErrOpen, "a retired key's values need resealing first")
	_, err = onlyNew.Open(sealedNew, []byte("row2"))
	require.ErrorIs(t, err, secretbox.ErrOpen, "bound to its row")
}

// TestValuesSealedBeforeKeyIDs: nonce|ciphertext with no version or key
// ID still opens.
func TestValuesSealedBeforeKeyIDs(t *testing.T) {
	t.Parallel()
	k := key(t)
	block, err := aes.NewCipher(k)
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	legacy := aead.Seal(append([]byte(nil), nonce...), nonce, []byte("old secret"), []byte("id"))
	b, err := secretbox.New(key(t), k)
	require.NoError(t, err)
	plain, err := b.Open(legacy, []byte("id"))
	require.NoError(t, err)
	require.Equal(t, "old secret", string(plain))
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	a, _ := secretbox.GenerateKey()
	c, _ := secretbox.GenerateKey()
	keys, err := secretbox.ParseKeys(a + ", " + c)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	_, err = secretbox.ParseKeys(" , ")
	require.Error(t, err)
	_, err = secretbox.ParseKeys(a + ",bm90LWEta2V5")
	require.Error(t, err)
}
