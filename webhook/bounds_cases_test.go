package webhook_test

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/signing"
	"hookrelay/webhook"
)

// TestManyHMACSignaturesStillVerify: Standard Webhooks puts no bound on the
// signatures of webhook-signature (Svix signs with every secret still in
// its grace period); a v1 entry costs a decode and a compare per secret, so
// only the header's size and its v1a entries are bounded, and a header of
// five v1 signatures whose last one is valid verifies.
func TestManyHMACSignaturesStillVerify(t *testing.T) {
	secret, err := signing.GenerateSecret()
	require.NoError(t, err)
	v, err := webhook.NewVerifier(secret)
	require.NoError(t, err)
	v.Now = at(1614265330)
	key, err := signing.ParseKey("k", secret)
	require.NoError(t, err)
	body := []byte(`{"id":"evt_1"}`)
	signed, err := signing.Sign("msg_1", time.Unix(1614265330, 0), body, []signing.Key{key})
	require.NoError(t, err)
	var others []string
	for range 4 {
		sig := make([]byte, 32)
		_, _ = rand.Read(sig)
		others = append(others, "v1,"+base64.StdEncoding.EncodeToString(sig)) // other secrets of the sender
	}
	header := strings.Join(append(others, signed.Signature), " ")
	require.Less(t, len(header), webhook.MaxSignatureHeaderBytes)
	require.NoError(t, v.Verify(stdHeaders("msg_1", 1614265330, header), body))
}
