// Package docs_test checks the documentation: every link between README.md,
// CHANGELOG.md and the pages of docs/ resolves, anchors included.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	heading   = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	htmlID    = regexp.MustCompile(`<a id="([^"]+)"`)
	slugStrip = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// pages are the Markdown files whose links are checked.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md", "../CHANGELOG.md"}, docs...)
}

// prose is text without its fenced code blocks (a link there is code).
func prose(text string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// anchors are the fragment IDs GitHub gives a page's headings, and its
// explicit <a id> anchors.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range heading.FindAllStringSubmatch(prose(text), -1) {
		title := strings.NewReplacer("`", "", "*", "").Replace(h[1])
		slug := strings.ReplaceAll(slugStrip.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	for _, m := range htmlID.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// TestLinksResolve: every relative link of the README, the changelog and
// docs/ names a file that exists and, with a fragment, one of that page's
// headings or anchors.
func TestLinksResolve(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(prose(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", page, target, err)
				continue
			}
			checked++
			if frag == "" || info.IsDir() {
				continue
			}
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(body))[frag] {
				t.Errorf("%s links to %s: %s has no heading or anchor %q", page, target, path, frag)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d links checked", checked)
	}
}
