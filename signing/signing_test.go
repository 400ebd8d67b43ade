package signing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/testvectors"
	"hookrelay/signing"
)

func key(t *testing.T, secret string) signing.Key {
	t.Helper()
	k, err := signing.ParseSecret(secret)
	require.NoError(t, err)
	return signing.Key{ID: "k", Secret: k}
}

func TestVectors(t *testing.T) {
	v, err := testvectors.Load()
	require.NoError(t, err)

	t.Run("standard webhooks v1", func(t *testing.T) {
		h, err := signing.Sign(v.Standard.ID, time.Unix(v.Standard.Timestamp, 0), []byte(v.Standard.Payload), []signing.Key{key(t, v.Standard.Secret)})
		require.NoError(t, err)
		require.Equal(t, v.Standard.Expected, h.Signature)
		require.Equal(t, v.Standard.ID, h.ID)
		require.Equal(t, v.Standard.Timestamp, h.Timestamp)
	})
	t.Run("x-webhook-signature", func(t *testing.T) {
		h, err := signing.Sign("any-id", time.Unix(v.X.Timestamp, 0), []byte(v.X.Payload), []signing.Key{key(t, v.X.Secret)})
		require.NoError(t, err)
		require.Equal(t, v.X.Expected, h.XSignature)
	})
	t.Run("rotation signs with both keys, newest first", func(t *testing.T) {
		keys := []signing.Key{key(t, v.Rotation.NewSecret), key(t, v.Rotation.PreviousSecret)}
		h, err := signing.Sign(v.Rotation.ID, time.Unix(v.Rotation.Timestamp, 0), []byte(v.Rotation.Payload), keys)
		require.NoError(t, err)
		require.Equal(t, v.Rotation.ExpectedStd, h.Signature)
		require.Equal(t, v.Rotation.ExpectedX, h.XSignature)
	})
	t.Run("invalid secrets", func(t *testing.T) {
		for _, s := range v.Standard.InvalidSecrets {
			_, err := signing.ParseSecret(s)
			require.Error(t, err, "secret %q", s)
		}
	})
}

func TestParseSecret(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"", signing.ErrSecretPrefix},
		{"whsec_", signing.ErrSecretLength},
		{"sk_abc", signing.ErrSecretPrefix},
		{"whsec_!!!notbase64!!!", signing.ErrSecretBase64},
		{"whsec_" + strings.Repeat("A", 28), signing.ErrSecretLength}, // 21 bytes
		{"whsec_" + strings.Repeat("A", 88), signing.ErrSecretLength}, // 66 bytes
		{"whsec_" + strings.Repeat("A", 32), nil},                     // 24 bytes
		{"whsec_" + strings.Repeat("A", 86) + "==", nil},              // 64 bytes
	} {
		_, err := signing.ParseSecret(tc.in)
		if tc.want == nil {
			require.NoError(t, err, tc.in)
			continue
		}
		require.ErrorIs(t, err, tc.want, tc.in)
	}
}

func TestGenerateSecret(t *testing.T) {
	a, err := signing.GenerateSecret()
	require.NoError(t, err)
	b, err := signing.GenerateSecret()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	k, err := signing.ParseSecret(a)
	require.NoError(t, err)
	require.Len(t, k, signing.DefaultSecretBytes)
}

func TestSignNeedsAKey(t *testing.T) {
	_, err := signing.Sign("id", time.Now(), nil, nil)
	require.Error(t, err)
}
