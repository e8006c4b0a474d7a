package console_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"

	_ "github.com/relais/relais/locales"
)

// catalogFile is the part of a messages.gotext.json file the tests read.
type catalogFile struct {
	Language string `json:"language"`
	Messages []struct {
		ID          json.RawMessage `json:"id"`
		Message     string          `json:"message"`
		Translation json.RawMessage `json:"translation"`
	} `json:"messages"`
}

func readCatalog(t *testing.T, lang string) catalogFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "locales", lang, "messages.gotext.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c catalogFile
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", lang, err)
	}
	return c
}

// translated reports whether a translation is a non-empty string, or a
// plural select whose every case is non-empty.
func translated(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s) != ""
	}
	var sel struct {
		Select struct {
			Feature string                     `json:"feature"`
			Cases   map[string]json.RawMessage `json:"cases"`
		} `json:"select"`
	}
	if json.Unmarshal(raw, &sel) != nil || sel.Select.Feature != "plural" || len(sel.Select.Cases) == 0 {
		return false
	}
	if _, ok := sel.Select.Cases["other"]; !ok {
		return false
	}
	for _, c := range sel.Select.Cases {
		var msg struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(c, &s) == nil {
			msg.Msg = s
		} else if json.Unmarshal(c, &msg) != nil {
			return false
		}
		if strings.TrimSpace(msg.Msg) == "" {
			return false
		}
	}
	return true
}

// TestEveryMessageHasAFrenchTranslation reads the catalogs people edit:
// every message needs a non-empty French translation, and both languages
// list the same messages.
func TestEveryMessageHasAFrenchTranslation(t *testing.T) {
	t.Parallel()
	en, fr := readCatalog(t, "en"), readCatalog(t, "fr")
	if len(fr.Messages) < 100 {
		t.Fatalf("the French catalog has %d messages: is it generated?", len(fr.Messages))
	}
	ids := func(c catalogFile) []string {
		var out []string
		for _, m := range c.Messages {
			out = append(out, m.Message)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(ids(en), ids(fr)) {
		t.Errorf("en and fr catalogs list different messages: run tools/gen-locales")
	}
	for _, m := range fr.Messages {
		if !translated(m.Translation) {
			t.Errorf("no French translation for %q", m.Message)
		}
	}
	for _, m := range en.Messages {
		if !translated(m.Translation) {
			t.Errorf("no English text for %q", m.Message)
		}
	}
}

// renderer satisfies the catalog's renderer; it only lets a message be
// looked up and executed.
type renderer struct{}

func (renderer) Render(string) {}
func (renderer) Arg(int) any   { return 1 }

// TestEveryMessageLiteralIsInTheCompiledCatalog scans the console's sources
// for T(ctx, "literal", ...) calls, the way gotext extracts them, and looks
// each up in the generated catalog: a message added without running
// tools/gen-locales (or without a French translation) fails here even if
// no test renders the page that shows it. It also fails on a T call whose
// message is not a literal, which gotext cannot extract.
func TestEveryMessageLiteralIsInTheCompiledCatalog(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	keys := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "T" || len(call.Args) < 2 {
				return true
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: T called with a message that is not a literal", fset.Position(call.Pos()))
				return true
			}
			key, _ := strconv.Unquote(lit.Value)
			keys[key] = fset.Position(call.Pos()).String()
			return true
		})
	}
	if len(keys) < 100 {
		t.Fatalf("found %d messages: is the scan broken?", len(keys))
	}
	cat := message.DefaultCatalog
	for _, tag := range []language.Tag{language.English, language.French} {
		for key, pos := range keys {
			if err := cat.Context(tag, renderer{}).Execute(key); errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("%s: %q has no %s entry in locales/catalog.go: run tools/gen-locales and translate it", pos, key, tag)
			}
		}
	}
}

// TestFrenchTypography: French puts a narrow no-break space (U+202F)
// before : ; ? and !, which a plain space lets a line break separate from
// its word. Every French translation must use it, and nothing else, there;
// a colon inside a time or a URL (no space after it) is not punctuation.
func TestFrenchTypography(t *testing.T) {
	t.Parallel()
	var texts []string
	var collect func(raw json.RawMessage)
	collect = func(raw json.RawMessage) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			texts = append(texts, s)
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			for _, v := range m {
				collect(v)
			}
		}
	}
	for _, m := range readCatalog(t, "fr").Messages {
		collect(m.Translation)
	}
	if len(texts) < 100 {
		t.Fatalf("read %d French texts: is the catalog there?", len(texts))
	}
	for _, s := range texts {
		r := []rune(s)
		for i, c := range r {
			if !strings.ContainsRune(":;?!", c) {
				continue
			}
			followedBySpace := i+1 == len(r) || unicode.IsSpace(r[i+1]) || strings.ContainsRune("\"»”)", r[i+1])
			if c == ':' && !followedBySpace {
				continue // 14:05, https://
			}
			if i == 0 || r[i-1] != '\u202f' {
				t.Errorf("French %q: %q at %d is not preceded by a narrow no-break space (U+202F)", s, c, i)
			}
		}
	}
	// A number grouped with a plain space (1 000) may break across lines:
	// French groups digits with a no-break space, as number() does.
	grouped := regexp.MustCompile(`\d \d{3}\b`)
	for _, s := range texts {
		if g := grouped.FindString(s); g != "" {
			t.Errorf("French %q: %q groups digits with a plain space, not a no-break space", s, g)
		}
	}
	for _, m := range readCatalog(t, "en").Messages {
		var s string
		if json.Unmarshal(m.Translation, &s) == nil && strings.ContainsRune(s, '\u202f') {
			t.Errorf("English %q carries a narrow no-break space", s)
		}
	}
}
