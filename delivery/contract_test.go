package delivery_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContractLinksResolve: every reference to a section of
// docs/contract.md, in code or docs, names a heading that exists, so a
// reader can follow it; nothing cites the contract by a number alone.
func TestContractLinksResolve(t *testing.T) {
	raw, err := os.ReadFile("../docs/contract.md")
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, h := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(raw), -1) {
		a := strings.ToLower(h[1])
		a = regexp.MustCompile(`[^a-z0-9 -]`).ReplaceAllString(a, "")
		anchors[strings.ReplaceAll(a, " ", "-")] = true
	}
	link := regexp.MustCompile(`docs/contract\.md#([a-z0-9-]+)`)
	found := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".." || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		require.NotContains(t, string(b), "CONTRACT "+"§", path)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			found++
			require.True(t, anchors[m[1]], "%s links to docs/contract.md#%s, which is no heading", path, m[1])
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, found, 10)
}
