package temporalconn_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/internal/temporalconn"
)

// TestOneListOfSearchAttributes: docs/operations.md lists exactly the
// attributes the workflows set (and setup-temporal registers, in compose
// too), with their types.
func TestOneListOfSearchAttributes(t *testing.T) {
	var want []string
	for _, a := range temporalconn.Required() {
		want = append(want, a.Name+":"+a.TypeName())
	}
	require.Contains(t, want, "HookrelayDeliveries:KeywordList")

	readme, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	table := regexp.MustCompile(`(?s)<!-- search-attributes:begin[^>]*-->\n(.*?)<!-- search-attributes:end -->`).FindSubmatch(readme)
	require.NotNil(t, table, "README has the search-attributes table")
	var listed []string
	for _, row := range regexp.MustCompile("\\| `(\\w+)` \\| (\\w+) \\|").FindAllSubmatch(table[1], -1) {
		listed = append(listed, string(row[1])+":"+string(row[2]))
	}
	require.Equal(t, want, listed, "README")
}

func TestNamespaceErrorSaysWhatToRun(t *testing.T) {
	req := temporalconn.Required()
	err := &temporalconn.NamespaceError{Address: "temporal:7233", Namespace: "prod", Missing: req[:2], Mistyped: req[2:3]}
	msg := err.Error()
	require.Contains(t, msg, `Temporal namespace "prod" at temporal:7233 lacks search attributes hookrelay sets: HookrelayApp (Keyword), HookrelayDeliveries (KeywordList), HookrelayEndpoint (Keyword)`)
	require.Contains(t, msg, "temporal operator search-attribute create --namespace prod --name HookrelayDeliveries --type KeywordList")
	require.Contains(t, msg, "temporal operator search-attribute remove --namespace prod --name HookrelayEndpoint")
	require.NotContains(t, msg, "HookrelayState", "only what is wrong")

	gone := (&temporalconn.NamespaceError{Namespace: "prod", NotFound: true}).Error()
	require.Contains(t, gone, `Temporal namespace "prod" does not exist: run `+"`hookrelay setup-temporal`")
	for _, a := range req {
		require.Contains(t, gone, a.CreateCommand("prod"))
	}
}

func TestClientOptions(t *testing.T) {
	opts, err := temporalconn.Settings{Address: "127.0.0.1:7233", Namespace: "n"}.ClientOptions(nil)
	require.NoError(t, err)
	require.Nil(t, opts.ConnectionOptions.TLS, "plain by default")
	require.Nil(t, opts.Credentials)

	opts, err = temporalconn.Settings{Address: "ns.acct.tmprl.cloud:7233", APIKey: "key"}.ClientOptions(nil)
	require.NoError(t, err)
	require.NotNil(t, opts.ConnectionOptions.TLS, "an API key turns TLS on")
	require.Equal(t, "ns.acct.tmprl.cloud", opts.ConnectionOptions.TLS.ServerName)
	require.NotNil(t, opts.Credentials)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(dir+"/ca.pem", []byte("not a certificate"), 0o600))
	_, err = temporalconn.Settings{Address: "t:7233", CAFile: dir + "/ca.pem"}.ClientOptions(nil)
	require.ErrorContains(t, err, "no PEM certificate")
	_, err = temporalconn.Settings{Address: "t:7233", CertFile: dir + "/missing.pem", KeyFile: dir + "/missing-key.pem"}.ClientOptions(nil)
	require.ErrorContains(t, err, "client certificate")
	opts, err = temporalconn.Settings{Address: "t:7233", TLS: true, ServerName: "temporal.internal"}.ClientOptions(nil)
	require.NoError(t, err)
	require.Equal(t, "temporal.internal", opts.ConnectionOptions.TLS.ServerName)
}
