package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProbe: 0 on a 2xx, 1 on any other answer or none, 2 on bad usage.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, probe([]string{srv.URL + "/healthz"}, &out, &errOut))
	require.Contains(t, out.String(), "200 OK")
	require.Equal(t, 1, probe([]string{srv.URL + "/readyz"}, &out, &errOut))
	require.Equal(t, 1, probe([]string{"http://127.0.0.1:1/healthz"}, &out, &errOut))
	require.Equal(t, 2, probe(nil, &out, &errOut))
}
