package api

import (
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
)

// TestOpenAPIMatchesRoutes: every served route is documented and every
// documented route is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	engine := s.Handler().(*gin.Engine)
	served := map[string]bool{}
	for _, r := range engine.Routes() {
		if r.Path == "/openapi.json" {
			continue
		}
		p := r.Path
		for _, seg := range strings.Split(p, "/") {
			if strings.HasPrefix(seg, ":") {
				p = strings.Replace(p, seg, "{"+seg[1:]+"}", 1)
			}
		}
		served[strings.ToLower(r.Method)+" "+p] = true
	}
	raw, err := json.Marshal(OpenAPI())
	require.NoError(t, err)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[method+" "+path] = true
		}
	}
	keys := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	require.Equal(t, keys(served), keys(documented))
	require.Contains(t, string(raw), `"#/components/schemas/Delivery"`)
}
