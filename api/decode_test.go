package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
)

func TestDecodeEvent(t *testing.T) {
	big := `{"type":"a.b","data":{"x":"` + strings.Repeat("a", outbox.MaxPayloadBytes) + `"}}`
	for _, tc := range []struct {
		body, key string
		status    int
		field     string
	}{
		{`{"type":"payment.succeeded","data":{}}`, "", 0, ""},
		{`{"type":"payment.succeeded","data":{},"id":"k1"}`, "k1", 0, ""},
		{`{"type":"payment.succeeded","data":{},"id":"k1"}`, "k2", 422, "id"},
		{`{"data":{}}`, "", 422, "type"},
		{`{"type":"Payment","data":{}}`, "", 422, "type"},
		{`{"type":5,"data":{}}`, "", 422, "type"},
		{`{"type":"a.b"}`, "", 422, "data"},
		{`{"type":"a.b","data":"x"}`, "", 422, "data"},
		{`{"type":"a.b","data":{},"created":"yesterday"}`, "", 422, "created"},
		{`{"type":"a.b","data":{},"extra":1}`, "", 422, "extra"},
		{`{"type":"a.b","data":{}} {}`, "", 400, ""},
		{`{"type":`, "", 400, ""},
		{big, "", 413, "data"},
	} {
		_, p := decodeEvent([]byte(tc.body), tc.key)
		if tc.status == 0 {
			require.Nil(t, p, tc.body)
			continue
		}
		require.NotNil(t, p, tc.body[:min(len(tc.body), 60)])
		require.Equal(t, tc.status, p.Status, tc.body[:min(len(tc.body), 60)])
		if tc.field != "" {
			require.Equal(t, []string{tc.field}, p.Fields)
		}
	}
}

// FuzzIngestJSON: any body either decodes to a valid event whose envelope
// fields are set, or gets a 4xx naming what is wrong; never a panic.
func FuzzIngestJSON(f *testing.F) {
	for _, s := range []string{`{"type":"payment.succeeded","data":{"a":1}}`, `{"id":"x","type":"a.b","data":{},"created":"2026-11-30T10:00:00Z"}`, `[]`, `{"data":null}`, `"`} {
		f.Add([]byte(s), "")
	}
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		ev, p := decodeEvent(body, key)
		if p != nil {
			if p.Status < 400 || p.Status >= 500 {
				t.Fatalf("status %d for %q", p.Status, body)
			}
			return
		}
		if ev.Type == "" || !json.Valid(ev.Data) || !bytes.HasPrefix(ev.Data, []byte("{")) || ev.APIVersion == "" {
			t.Fatalf("accepted an invalid event %+v from %q", ev, body)
		}
		if key != "" && ev.ID != key {
			t.Fatalf("idempotency key ignored")
		}
	})
}
