package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
)

// TestFilterWithNULIsA422: CEL accepts a NUL character in a string
// literal, Postgres text refuses it: the save must be the 422 naming
// "filter", not a 500.
func TestFilterWithNULIsA422(t *testing.T) {
	t.Parallel()
	st, app, admin := tenant(t, "filternul")
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true}).Handler()
	rec := send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/endpoints", map[string]any{"url": "http://127.0.0.1:9/h", "filter": "type == 'a\x00b'"})
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code, rec.Body.String())
}
