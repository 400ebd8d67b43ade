package webhook_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/signing"
	"hookrelay/webhook"
)

// hostile is a webhook-signature header of n well-formed v1a entries, none
// valid (one random Ed25519 signature repeated, shaped so that each check
// runs in full).
func hostile(n int) string {
	sig := make([]byte, ed25519.SignatureSize)
	_, _ = rand.Read(sig)
	sig[63] &= 0x0f // S below the group order: checked in full, not refused at a glance
	entry := "v1a," + base64.StdEncoding.EncodeToString(sig)
	return strings.TrimSpace(strings.Repeat(entry+" ", n))
}

// verifierWithKeys holds secrets secrets and publicKeys Ed25519 keys, and
// answers the signing keys.
func verifierWithKeys(t testing.TB, secrets, publicKeys int) (*webhook.Verifier, []string) {
	v := &webhook.Verifier{Now: at(1614265330)}
	for i := range secrets {
		s, err := signing.GenerateSecret()
		require.NoError(t, err)
		require.NoError(t, v.AddTenantSecret(fmt.Sprint("hmac-", i), s))
	}
	var priv []string
	for i := range publicKeys {
		sk, pk, err := signing.GenerateSigningKey()
		require.NoError(t, err)
		require.NoError(t, v.AddTenantPublicKey(fmt.Sprint("ed-", i), pk))
		priv = append(priv, sk)
	}
	return v, priv
}

// TestHostileSignatureHeaderFailsFast: a 1 MB header of 11,230 well-formed
// v1a entries is malformed before any signature is checked; a header of the
// most signatures allowed still verifies with its last entry.
func TestHostileSignatureHeaderFailsFast(t *testing.T) {
	v, priv := verifierWithKeys(t, 1, 10)
	h := stdHeaders("msg_1", 1614265330, hostile(11230))
	require.Greater(t, len(h.Get("webhook-signature")), 1_000_000)
	require.ErrorIs(t, v.Verify(h, []byte(`{}`)), webhook.ErrMalformed)
	h = stdHeaders("msg_1", 1614265330, hostile(webhook.MaxEd25519Signatures+1))
	require.ErrorIs(t, v.Verify(h, []byte(`{}`)), webhook.ErrMalformed)
	h = stdHeaders("msg_1", 1614265330, strings.Repeat("v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" ", 30))
	require.ErrorIs(t, v.Verify(h, []byte(`{}`)), webhook.ErrMalformed, "past 1 KiB")
	x := http.Header{}
	x.Set("X-Webhook-Signature", "t=1614265330"+strings.Repeat(",v1="+strings.Repeat("ab", 32), 5000))
	require.ErrorIs(t, v.Verify(x, []byte(`{}`)), webhook.ErrMalformed)

	key, err := signing.ParseKey("k", priv[9])
	require.NoError(t, err)
	body := []byte(`{"id":"evt_1"}`)
	signed, err := signing.Sign("msg_1", time.Unix(1614265330, 0), body, []signing.Key{key})
	require.NoError(t, err)
	sig := hostile(webhook.MaxEd25519Signatures-1) + " " + signed.Signature
	_, err = v.VerifyTenant(stdHeaders("msg_1", 1614265330, sig), body)
	require.ErrorIs(t, err, webhook.ErrTooManyKeys, "two v1a signatures against ten public keys: 20 checks, past the bound")
	m, err := v.VerifyFor("ed-9", stdHeaders("msg_1", 1614265330, sig), body)
	require.NoError(t, err, "the most v1a signatures allowed, the valid one last, against the named tenant's key")
	require.Equal(t, "ed-9", m.Tenant)
	_, err = v.VerifyFor("ed-8", stdHeaders("msg_1", 1614265330, sig), body)
	require.ErrorIs(t, err, webhook.ErrNoMatch, "another tenant's key does not verify it")
	_, err = v.VerifyFor("nobody", stdHeaders("msg_1", 1614265330, sig), body)
	require.ErrorIs(t, err, webhook.ErrNoMatch, "a tenant with no key")
}

// TestManyKeysCostABoundedNumberOfChecks: against 500 tenants' secrets, a
// malformed header is refused before any HMAC, a well-formed one with no
// tenant named is refused (ErrTooManyKeys) before any, and a request that
// names its tenant is checked against that tenant's secret alone.
func TestManyKeysCostABoundedNumberOfChecks(t *testing.T) {
	v, _ := verifierWithKeys(t, 500, 0)
	secret, err := signing.GenerateSecret()
	require.NoError(t, err)
	require.NoError(t, v.AddTenantSecret("mine", secret))
	key, err := signing.ParseKey("k", secret)
	require.NoError(t, err)
	body := make([]byte, 1<<20)
	signed, err := signing.Sign("msg_1", time.Unix(1614265330, 0), body, []signing.Key{key})
	require.NoError(t, err)
	require.ErrorIs(t, v.Verify(stdHeaders("msg_1", 1614265330, "v1,not-base64!"), body), webhook.ErrMalformed)
	require.ErrorIs(t, v.Verify(stdHeaders("msg_1", 1614265330, signed.Signature), body), webhook.ErrTooManyKeys)
	m, err := v.VerifyFor("mine", stdHeaders("msg_1", 1614265330, signed.Signature), body)
	require.NoError(t, err)
	require.Equal(t, "mine", m.Tenant)
	x := http.Header{}
	x.Set("X-Webhook-Signature", signed.XSignature)
	_, err = v.VerifyTenant(x, body)
	require.ErrorIs(t, err, webhook.ErrTooManyKeys, "X-Webhook-Signature too")
	m, err = v.VerifyFor("mine", x, body)
	require.NoError(t, err)
	require.Equal(t, "mine", m.Tenant)
}

// BenchmarkHostileSignatureHeader prints what one hostile request costs a
// verifier: the 1 MB header, and the worst header it reads in full (the
// most v1a signatures allowed, none valid), against 1 and 10 public keys.
func BenchmarkHostileSignatureHeader(b *testing.B) {
	for _, c := range []struct {
		name    string
		entries int
		keys    int
	}{{"1MB-11230-entries-10-keys", 11230, 10}, {"max-v1a-entries-1-key", webhook.MaxEd25519Signatures, 1}, {"max-v1a-entries-10-keys", webhook.MaxEd25519Signatures, 10}} {
		b.Run(c.name, func(b *testing.B) {
			v, _ := verifierWithKeys(b, 1, c.keys)
			h := stdHeaders("msg_1", 1614265330, hostile(c.entries))
			body := []byte(`{"id":"evt_1"}`)
			for b.Loop() {
				_ = v.Verify(h, body)
			}
		})
	}
}

// BenchmarkOneMiBRequestAgainstManyKeys prints what a 1 MiB request with
// no valid signature costs a verifier of 10 and of 500 tenants' secrets:
// every one tried (10: ten HMAC passes), none (500, no tenant named:
// refused before any pass), or the named tenant's alone (VerifyFor).
func BenchmarkOneMiBRequestAgainstManyKeys(b *testing.B) {
	body := make([]byte, 1<<20)
	forged := stdHeaders("msg_1", 1614265330, "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
	for _, keys := range []int{10, 500} {
		v, _ := verifierWithKeys(b, keys, 0)
		b.Run(fmt.Sprintf("%d-secrets-every-key", keys), func(b *testing.B) {
			for b.Loop() {
				_ = v.Verify(forged, body)
			}
		})
		b.Run(fmt.Sprintf("%d-secrets-tenant-named", keys), func(b *testing.B) {
			for b.Loop() {
				_, _ = v.VerifyFor("hmac-0", forged, body)
			}
		})
	}
}
