package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

// FuzzIngest drives request bytes through the API's ingest route into
// Postgres: a 2xx leaves frozen bytes that are valid UTF-8 JSON holding a
// valid envelope; a 4xx leaves nothing stored; nothing else is answered.
func FuzzIngest(f *testing.F) {
	for _, s := range []string{
		`{"type":"payment.succeeded","data":{"a":1}}`, `{"id":"x","type":"a.b","data":{},"created":"2026-11-30T10:00:00Z"}`,
		`[]`, `{"data":null}`, `"`, "{\"type\":\"a.b\",\"data\":{\"x\":\"\xff\"}}", `{"type":"a.b","data":{"n":1e999999}}`,
		`{"type":"a.b","data":{"s":"\u00e9\ud83d\ude00"}}`, `{"type":"a.b","id":"a.b","data":{}}`,
	} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	st, app, key := tenant(f, "fuzz")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	events := func(t *testing.T) int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n))
		return n
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := events(t)
		req := httptest.NewRequest(http.MethodPost, "/v1/apps/"+app.ID+"/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusAccepted || rec.Code == http.StatusOK:
			var out struct{ ID string }
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
			ev, err := st.GetEvent(ctx, app.ID, out.ID)
			require.NoError(t, err)
			require.True(t, utf8.Valid(ev.Payload) && json.Valid(ev.Payload), "frozen %q", ev.Payload)
			var env struct {
				ID, Type, Created, APIVersion string `json:",omitempty"`
				Data                          json.RawMessage
			}
			require.NoError(t, json.Unmarshal(ev.Payload, &env))
			require.Equal(t, out.ID, env.ID)
			require.NotEmpty(t, env.Type)
			require.True(t, bytes.HasPrefix(env.Data, []byte("{")), "data is an object")
		case rec.Code >= 400 && rec.Code < 500:
			require.Equal(t, before, events(t), "a %d stored something", rec.Code)
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
