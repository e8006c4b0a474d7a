// Package docs_test checks the project's Markdown: every relative link in
// the README and under docs/ names a file that exists and, when it has a
// fragment, a heading of that file. The README and the pages it sends to
// are split by subject; a section moved from one to the other must not
// leave links that land on the top of the wrong page.
package docs_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files checked, relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "examples/README.md", "bench/README.md"}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	if len(docs) < 3 {
		t.Fatalf("docs/ holds %d pages: the check would prove nothing", len(docs))
	}
	return files
}

var (
	// link is an inline Markdown link or image: [text](target) or
	// ![alt](target "title").
	link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// heading is an ATX heading outside code blocks.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	fence   = regexp.MustCompile("^\\s*(```|~~~)")
)

// TestRelativeLinksResolve fails for every link to a missing file or to a
// heading its target does not have.
func TestRelativeLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := map[string]bool{}
		if b, err := os.ReadFile(filepath.Join("..", file)); err == nil {
			for _, h := range headings(string(b)) {
				a[h] = true
			}
		}
		anchors[file] = a
		return a
	}
	checked := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range outsideCode(string(b)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, fragment, _ := strings.Cut(target, "#")
				resolved := page
				if file != "" {
					unescaped, err := url.PathUnescape(file)
					if err != nil {
						t.Errorf("%s:%d: link %q: %v", page, n+1, target, err)
						continue
					}
					resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), unescaped)))
					if strings.HasPrefix(resolved, "../") {
						t.Errorf("%s:%d: link %q leaves the repository", page, n+1, target)
						continue
					}
					if _, err := os.Stat(filepath.Join("..", resolved)); err != nil {
						t.Errorf("%s:%d: link %q: no file %s", page, n+1, target, resolved)
						continue
					}
				}
				checked++
				if fragment == "" || !strings.HasSuffix(resolved, ".md") {
					continue
				}
				if !anchorsOf(resolved)[fragment] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", page, n+1, target, resolved, fragment)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d relative links: the pattern must be missing most of them", checked)
	}
}

// outsideCode returns the lines of a Markdown text, those inside fenced
// code blocks blanked (a shell comment is not a heading, a snippet's
// brackets are not a link); the line numbers are kept.
func outsideCode(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fence.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// headings returns the anchors GitHub gives a Markdown text's headings:
// lower case, punctuation dropped, spaces made hyphens, a repeated one
// suffixed -1, -2…
func headings(text string) []string {
	seen := map[string]int{}
	var out []string
	for _, l := range outsideCode(text) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, n))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	return out
}

func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Relais against River (`bench/`)":                "relais-against-river-bench",
		"Completed protocol (DESIGN §11)":                "completed-protocol-design-11",
		"Where Relais deliberately differs from Camunda": "where-relais-deliberately-differs-from-camunda",
		"Camunda 7 facade":                               "camunda-7-facade",
		"Stream or long poll":                            "stream-or-long-poll",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
