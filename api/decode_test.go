package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
)

func TestDecodeEvent(t *testing.T) {
	t.Parallel()
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
		{"{\"type\":\"a.\xffb\",\"data\":{}}", "", 422, "type"},
		{"{\"type\":\"a.b\",\"data\":{\"x\":\"\xff\xfe\"}}", "", 422, "data"},
		{`{"type":"a.b","data":{},"id":"order.1"}`, "", 422, "id"},
		{`{"type":"a.b","data":{"n":1e999999}}`, "", 422, "data"},
		{`[{"type":"a.b","data":{}}]`, "", 422, "body"},
		{`"a.b"`, "", 422, "body"},
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
