package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/testvectors"
	"hookrelay/signing"
	"hookrelay/webhook"
)

func at(ts int64) func() time.Time { return func() time.Time { return time.Unix(ts, 0) } }

func stdHeaders(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestVectors(t *testing.T) {
	v, err := testvectors.Load()
	require.NoError(t, err)
	s := v.Standard
	ver, err := webhook.NewVerifier(s.Secret)
	require.NoError(t, err)
	ver.Now = at(s.Timestamp)
	body := []byte(s.Payload)

	require.NoError(t, ver.Verify(stdHeaders(s.ID, s.Timestamp, s.Expected), body))
	require.NoError(t, ver.Verify(stdHeaders(s.ID, s.Timestamp, s.MustPassMixed), body))
	for _, bad := range s.MustFail {
		require.Error(t, ver.Verify(stdHeaders(s.ID, s.Timestamp, bad), body), bad)
	}
	for _, bad := range s.InvalidSecrets {
		_, err := webhook.NewVerifier(bad)
		require.Error(t, err, bad)
	}

	t.Run("ed25519 v1a", func(t *testing.T) {
		e := v.Ed25519
		ver, err := webhook.NewVerifier()
		require.NoError(t, err)
		require.NoError(t, ver.AddPublicKey(e.PublicKey))
		ver.Now = at(e.Timestamp)
		require.NoError(t, ver.Verify(stdHeaders(e.ID, e.Timestamp, e.Expected), []byte(e.Payload)))
		require.ErrorIs(t, ver.Verify(stdHeaders(e.ID, e.Timestamp, e.Expected), []byte(e.Payload+" ")), webhook.ErrNoMatch)
	})
	t.Run("x-webhook-signature", func(t *testing.T) {
		x := v.X
		ver, err := webhook.NewVerifier(x.Secret)
		require.NoError(t, err)
		ver.Now = at(x.Timestamp)
		h := http.Header{}
		h.Set("X-Webhook-Signature", x.Expected)
		require.NoError(t, ver.Verify(h, []byte(x.Payload)))
	})
	t.Run("rotation: either secret accepts", func(t *testing.T) {
		r := v.Rotation
		for _, secret := range []string{r.NewSecret, r.PreviousSecret} {
			ver, err := webhook.NewVerifier(secret)
			require.NoError(t, err)
			ver.Now = at(r.Timestamp)
			h := stdHeaders(r.ID, r.Timestamp, r.ExpectedStd)
			h.Set("X-Webhook-Signature", r.ExpectedX)
			require.NoError(t, ver.Verify(h, []byte(r.Payload)))
		}
	})
}

// TestSeedDemo is the second seed's demo, case by case, against hookrelay's
// own signer.
func TestSeedDemo(t *testing.T) {
	secret, err := signing.GenerateSecret()
	require.NoError(t, err)
	retired, err := signing.GenerateSecret()
	require.NoError(t, err)
	key, _ := signing.ParseSecret(secret)
	oldKey, _ := signing.ParseSecret(retired)
	const now = 1_800_000_000
	payload := []byte(`{"type":"order.paid","order":"42"}`)
	sign := func(id string, ts int64, k []byte, body []byte) http.Header {
		h, err := signing.Sign(id, time.Unix(ts, 0), body, []signing.Key{{Secret: k}})
		require.NoError(t, err)
		out := http.Header{}
		for name, val := range h.Map() {
			out.Set(name, val)
		}
		return out
	}
	ver, err := webhook.NewVerifier(secret)
	require.NoError(t, err)
	ver.Now = at(now)

	evt2 := sign("evt_2", now, key, payload)
	tamperedID := sign("evt_2", now, key, payload)
	tamperedID.Set("webhook-id", "evt_3")
	malformed := sign("evt_6", now, key, payload)
	malformed.Set("webhook-signature", "v1,not-a-digest")
	malformed.Del("X-Webhook-Signature")
	forged := sign("evt_1", now, key, payload)
	forged.Set("webhook-signature", "v1,"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")

	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"fresh", sign("evt_1", now, key, payload), payload, nil},
		{"claimed duplicate with a bad signature", forged, payload, webhook.ErrNoMatch},
		{"tampered body", evt2, append(append([]byte{}, payload...), ' '), webhook.ErrNoMatch},
		{"tampered id", tamperedID, payload, webhook.ErrNoMatch},
		{"301 s old", sign("evt_4", now-301, key, payload), payload, webhook.ErrStale},
		{"301 s ahead", sign("evt_4", now+301, key, payload), payload, webhook.ErrFuture},
		{"300 s old is inside the window", sign("evt_4", now-300, key, payload), payload, nil},
		{"retired key", sign("evt_5", now, oldKey, payload), payload, webhook.ErrNoMatch},
		{"malformed digest", malformed, payload, webhook.ErrMalformed},
		{"no headers", http.Header{}, payload, webhook.ErrMissingHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ver.Verify(tc.h, tc.body)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.True(t, errors.Is(err, tc.want), "got %v, want %v", err, tc.want)
		})
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("msg_1", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "t=1614265330,v1=e962", []byte(`{"test": 1}`))
	f.Add("", "", "v1a,", ",,=,t=", []byte{})
	// Many entries: past the bounds, and within them.
	f.Add("msg_1", "1614265330", strings.Repeat("v1a,"+strings.Repeat("A", 86)+"== ", 50), "t=1614265330"+strings.Repeat(",v1=00", 50), []byte(`{}`))
	f.Add("msg_1", "1614265330", strings.Repeat("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= ", 4), "t=1614265330,v1=e962,v1=e962,v1=e962,v1=e962", []byte(`{"test": 1}`))
	ver, err := webhook.NewVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		f.Fatal(err)
	}
	ver.Now = at(1614265330)
	f.Fuzz(func(t *testing.T, id, ts, sig, x string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		h.Set("X-Webhook-Signature", x)
		if err := ver.Verify(h, body); err == nil && sig == "" && x == "" {
			t.Fatal("verified without any signature")
		}
	})
}

// TestVerifyTenant: a verifier holding several tenants' keys says which
// tenant signed.
func TestVerifyTenant(t *testing.T) {
	a, b := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_dGVzdC1zZWNyZXQtZm9yLXRlbmFudC1iISE="
	v := &webhook.Verifier{}
	require.NoError(t, v.AddTenantSecret("app-a", a))
	require.NoError(t, v.AddTenantSecret("app-b", b))
	for tenant, secret := range map[string]string{"app-a": a, "app-b": b} {
		key, err := signing.ParseSecret(secret)
		require.NoError(t, err)
		body := []byte(`{"id":"evt_1"}`)
		h, err := signing.Sign("evt_1", time.Now(), body, []signing.Key{{ID: "k", Secret: key}})
		require.NoError(t, err)
		hdr := http.Header{}
		for k, val := range h.Map() {
			hdr.Set(k, val)
		}
		m, err := v.VerifyTenant(hdr, body)
		require.NoError(t, err)
		require.Equal(t, tenant, m.Tenant)
	}
}
