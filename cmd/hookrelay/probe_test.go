package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
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

// TestVersion: `hookrelay version` prints the version CHANGELOG.md's latest
// release names and the User-Agent carries.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"version"}, nil, &out, &errOut))
	require.Equal(t, "hookrelay "+api.Version+"\n", out.String())
	changelog, err := os.ReadFile("../../CHANGELOG.md")
	require.NoError(t, err)
	require.Contains(t, string(changelog), "## ["+api.Version+"] - ")
}
