package console_test

import (
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// TestEveryPageIsLabelled is an axe-style check of every page, in both
// languages, as an operator and as an administrator (who sees reveal
// buttons): every form control has a label, every table a caption, every
// SVG a title, every image an alt text, every button and link a name; ids
// are unique; headings nest (checkHeadings); nothing carries an inline style (the CSP would drop it); the
// reveal buttons of one page have distinct names that start with their
// visible words (WCAG 2.5.3).
func TestEveryPageIsLabelled(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	checked := map[string]int{}
	for _, token := range []string{f.env.Operator, f.env.Admin} {
		for _, lang := range []string{"en", "fr"} {
			b := signedIn(t, f.env.URL, lang, token)
			pages := append(f.allPages(), page{"occurrence-sensitive", "/console/occurrences/" + f.completed})
			for _, p := range pages {
				r := b.get(p.path)
				if r.doc == nil {
					t.Fatalf("%s: not HTML (%d)", p.path, r.status)
				}
				where := lang + " " + p.name
				checkLabelled(t, where, r.doc, checked)
			}
			anon := newBrowser(t, f.env.URL, lang)
			checkLabelled(t, lang+" sign-in", anon.mustGet("/console/sign-in", 200).doc, checked)
		}
	}
	// The check saw what it is about.
	for _, what := range []string{"control", "table", "scroll-box", "svg", "svg-links", "reveal", "heading"} {
		if checked[what] == 0 {
			t.Errorf("no %s was checked: are the pages empty?", what)
		}
	}
}

func checkLabelled(t *testing.T, where string, doc *goquery.Document, checked map[string]int) {
	t.Helper()
	ids := map[string]bool{}
	doc.Find("[id]").Each(func(_ int, s *goquery.Selection) {
		id, _ := s.Attr("id")
		if ids[id] {
			t.Errorf("%s: id %q is used twice", where, id)
		}
		ids[id] = true
	})
	if lang, _ := doc.Find("html").Attr("lang"); lang == "" {
		t.Errorf("%s: <html> has no lang", where)
	}
	if doc.Find("a.skip-link[href='#main']").Length() != 1 || doc.Find("main#main").Length() != 1 {
		t.Errorf("%s: no skip link to the main content", where)
	}
	doc.Find("input, select, textarea").Each(func(_ int, s *goquery.Selection) {
		if typ, _ := s.Attr("type"); typ == "hidden" {
			return
		}
		checked["control"]++
		name, _ := s.Attr("name")
		if aria, _ := s.Attr("aria-label"); strings.TrimSpace(aria) != "" {
			return
		}
		if by, ok := s.Attr("aria-labelledby"); ok && by != "" {
			return
		}
		if s.ParentsFiltered("label").Length() > 0 {
			return
		}
		id, _ := s.Attr("id")
		label := doc.Find(`label[for="` + id + `"]`)
		if id == "" || label.Length() != 1 || strings.TrimSpace(label.Text()) == "" {
			t.Errorf("%s: the %s %q has no label", where, goquery.NodeName(s), name)
		}
	})
	doc.Find("table").Each(func(_ int, s *goquery.Selection) {
		checked["table"]++
		if c := s.ChildrenFiltered("caption"); c.Length() != 1 || strings.TrimSpace(c.Text()) == "" {
			html, _ := goquery.OuterHtml(s)
			t.Errorf("%s: a table has no caption: %.120s", where, html)
		}
	})
	// A box that may scroll sideways takes the focus, so that a keyboard
	// scrolls it (axe's scrollable-region-focusable, WCAG 2.1.1): a
	// region named by its table's caption or its chart's title.
	doc.Find(".table-wrap, .chart-wrap").Each(func(_ int, s *goquery.Selection) {
		checked["scroll-box"]++
		want := strings.TrimSpace(s.Find("caption").First().Text())
		if s.HasClass("chart-wrap") {
			want = strings.TrimSpace(s.Find("svg > title").First().Text())
		}
		if s.AttrOr("tabindex", "") != "0" || s.AttrOr("role", "") != "region" || want == "" || s.AttrOr("aria-label", "") != want {
			t.Errorf("%s: a %s box is not a focusable region named %q: tabindex %q, role %q, aria-label %q", where, s.AttrOr("class", ""), want,
				s.AttrOr("tabindex", ""), s.AttrOr("role", ""), s.AttrOr("aria-label", ""))
		}
	})
	doc.Find("svg").Each(func(_ int, s *goquery.Selection) {
		checked["svg"]++
		title := strings.TrimSpace(s.ChildrenFiltered("title").Text())
		aria, _ := s.Attr("aria-label")
		if title == "" && strings.TrimSpace(aria) == "" {
			t.Errorf("%s: an SVG has neither a title nor an aria-label", where)
		}
		// An image's children are presentational: an SVG holding links
		// is a group named by its title (axe's nested-interactive).
		role, _ := s.Attr("role")
		links := s.Find("a[href]").Length()
		switch {
		case links == 0 && role != "img":
			t.Errorf("%s: an SVG has role %q, want img", where, role)
		case links > 0 && role != "group":
			t.Errorf("%s: an SVG with %d links has role %q, want group (links inside an img are nested-interactive)", where, links, role)
		case links > 0:
			checked["svg-links"]++
			if by, _ := s.Attr("aria-labelledby"); by == "" || s.Find("#"+by).Length() != 1 || strings.TrimSpace(s.Find("#"+by).Text()) == "" {
				t.Errorf("%s: an SVG group is not named by its title (aria-labelledby %q)", where, by)
			}
		}
	})
	doc.Find("img").Each(func(_ int, s *goquery.Selection) {
		if _, ok := s.Attr("alt"); !ok {
			t.Errorf("%s: an image has no alt text", where)
		}
	})
	doc.Find("[style]").Each(func(_ int, s *goquery.Selection) {
		t.Errorf("%s: a %s carries an inline style, which the CSP forbids", where, goquery.NodeName(s))
	})
	doc.Find("button, a[href]").Each(func(_ int, s *goquery.Selection) {
		aria, _ := s.Attr("aria-label")
		if strings.TrimSpace(s.Text()) == "" && strings.TrimSpace(aria) == "" {
			html, _ := goquery.OuterHtml(s)
			t.Errorf("%s: a %s has no accessible name: %.120s", where, goquery.NodeName(s), html)
		}
	})
	checkHeadings(t, where, doc, checked)
	reveals := map[string]bool{}
	doc.Find(`[data-testid=reveal]`).Each(func(_ int, s *goquery.Selection) {
		checked["reveal"]++
		name, _ := s.Attr("aria-label")
		visible := strings.TrimSpace(s.Text())
		if !strings.HasPrefix(name, visible) || name == visible {
			t.Errorf("%s: reveal button %q named %q: the name must start with the visible words and name the field", where, visible, name)
		}
		if reveals[name] {
			t.Errorf("%s: two reveal buttons are both named %q", where, name)
		}
		reveals[name] = true
	})
}

// checkHeadings checks a page's outline as a screen reader lists it: one
// h1; no level skipped on the way down; within a section, every heading
// after its first is deeper (a revision's Inputs under its "Revision 1",
// not beside it).
func checkHeadings(t *testing.T, where string, doc *goquery.Document, checked map[string]int) {
	t.Helper()
	level := func(s *goquery.Selection) int { return int(goquery.NodeName(s)[1] - '0') }
	if n := doc.Find("h1").Length(); n != 1 {
		t.Errorf("%s: %d h1, want 1", where, n)
	}
	prev := 0
	doc.Find("h1, h2, h3, h4, h5, h6").Each(func(_ int, s *goquery.Selection) {
		checked["heading"]++
		if l := level(s); l > prev+1 {
			t.Errorf("%s: h%d %q follows an h%d", where, l, collapse(s.Text()), prev)
		}
		prev = level(s)
	})
	doc.Find("section").Each(func(_ int, sec *goquery.Selection) {
		hs := sec.Find("h1, h2, h3, h4, h5, h6")
		if hs.Length() < 2 {
			return
		}
		top := level(hs.First())
		hs.Slice(1, hs.Length()).Each(func(_ int, s *goquery.Selection) {
			if level(s) <= top {
				t.Errorf("%s: h%d %q sits beside its section's h%d %q, not under it", where, level(s), collapse(s.Text()), top, collapse(hs.First().Text()))
			}
		})
	})
}

// cssVars reads the custom properties of one :root block.
func cssVars(t *testing.T, block string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]{6})\s*;`).FindAllStringSubmatch(block, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// schemes returns the light (:root) and dark (prefers-color-scheme) colour
// variables of the stylesheet.
func schemes(t *testing.T) (light, dark map[string]string, css string) {
	t.Helper()
	data, err := os.ReadFile("static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	css = string(data)
	root := regexp.MustCompile(`(?s)\n:root \{(.*?)\n\}`).FindStringSubmatch(css)
	darkBlock := regexp.MustCompile(`(?s)@media \(prefers-color-scheme: dark\) \{\s*:root \{(.*?)\}`).FindStringSubmatch(css)
	if root == nil || darkBlock == nil {
		t.Fatal("the stylesheet has no :root block or no dark scheme")
	}
	return cssVars(t, root[1]), cssVars(t, darkBlock[1]), css
}

// luminance is WCAG 2's relative luminance of #rrggbb.
func luminance(hex string) float64 {
	var rgb [3]float64
	for i := range 3 {
		v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		c := float64(v) / 255
		if c <= 0.04045 {
			rgb[i] = c / 12.92
		} else {
			rgb[i] = math.Pow((c+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*rgb[0] + 0.7152*rgb[1] + 0.0722*rgb[2]
}

// contrast is WCAG 2's contrast ratio of two colours.
func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

func TestContrast(t *testing.T) {
	t.Parallel()
	if got := contrast("#000000", "#ffffff"); math.Abs(got-21) > 0.01 {
		t.Fatalf("contrast black/white = %.2f, want 21", got)
	}
	if got := contrast("#767676", "#ffffff"); math.Abs(got-4.54) > 0.01 {
		t.Fatalf("contrast #767676/white = %.2f, want 4.54", got)
	}
}

// TestColourContrastInBothSchemes computes the WCAG contrast of every
// colour pair the stylesheet draws text, controls and the focus ring with,
// in the light and the dark scheme: text 4.5:1 (AA), the focus ring, input
// borders and chart bars 3:1 against what surrounds them (1.4.11).
func TestColourContrastInBothSchemes(t *testing.T) {
	t.Parallel()
	light, dark, css := schemes(t)
	pairs := []struct {
		fg, bg string
		min    float64
		what   string
	}{
		{"fg", "bg", 4.5, "body text"},
		{"fg", "panel", 4.5, "text on panels and table heads"},
		{"muted", "bg", 4.5, "hints, labels, captions"},
		{"muted", "panel", 4.5, "hints on panels"},
		{"accent", "bg", 4.5, "links"},
		{"accent", "panel", 4.5, "links in the header"},
		{"on-accent", "accent", 4.5, "primary buttons"},
		{"on-danger", "bad", 4.5, "danger buttons"},
		{"ok", "ok-bg", 4.5, "completed badges"},
		{"warn", "warn-bg", 4.5, "reserved, running, deferred badges"},
		{"bad", "bad-bg", 4.5, "failed badges"},
		{"info", "info-bg", 4.5, "available badges"},
		{"held", "held-bg", 4.5, "held badges"},
		{"idle", "idle-bg", 4.5, "cancelled badges"},
		{"secret", "secret-bg", 4.5, "secret markers"},
		{"warn", "bg", 4.5, "sensitive classification"},
		{"secret", "bg", 4.5, "secret classification"},
		{"bad", "bg", 4.5, "breaking changes, long queue lag"},
		{"fg", "bad-bg", 4.5, "error notices"},
		{"fg", "ok-bg", 4.5, "success notices"},
		{"fg", "target", 4.5, "a revision linked to"},
		{"focus", "bg", 3, "focus ring on the page"},
		{"focus", "panel", 3, "focus ring in the header"},
		{"muted", "bg", 3, "input borders"},
		{"chart-ok", "bg", 3, "completion bars"},
		{"chart-bad", "bg", 3, "failure bars"},
		{"held", "held-bg", 3, "hold box border in graphs"},
		{"muted", "panel", 3, "task box border in graphs"},
		{"muted", "bg", 3, "end box border in graphs"},
	}
	for name, vars := range map[string]map[string]string{"light": light, "dark": dark} {
		for _, p := range pairs {
			fg, ok1 := vars[p.fg]
			bg, ok2 := vars[p.bg]
			if !ok1 || !ok2 {
				t.Errorf("%s scheme: --%s or --%s is not defined", name, p.fg, p.bg)
				continue
			}
			if c := contrast(fg, bg); c < p.min {
				t.Errorf("%s scheme, %s: --%s %s on --%s %s has contrast %.2f, want at least %.1f", name, p.what, p.fg, fg, p.bg, bg, c, p.min)
			}
		}
		if len(vars) != len(light) {
			t.Errorf("%s scheme defines %d colours, the light one %d: every colour needs both", name, len(vars), len(light))
		}
	}
	// The rules use them: a 3 px focus ring in --focus, no colour written
	// outside the variables (so that dark mode reaches everything).
	// A graph's boxes are outlined in --muted, 3:1 on their fill and the
	// page (--line, for decorative rules, was 1.4:1: boxes barely showed).
	if !regexp.MustCompile(`\.graph \.node rect \{[^}]*stroke: var\(--muted\)`).MatchString(css) {
		t.Error("a graph's boxes are not outlined in --muted")
	}
	if !regexp.MustCompile(`:focus-visible \{ outline: 3px solid var\(--focus\);`).MatchString(css) {
		t.Error("the focus ring is not 3px solid var(--focus)")
	}
	body := regexp.MustCompile(`(?s)\n:root \{.*?\n\}|(?s)@media \(prefers-color-scheme: dark\) \{\s*:root \{.*?\}\s*\}`).ReplaceAllString(css, "")
	if m := regexp.MustCompile(`#[0-9a-fA-F]{3,6}\b`).FindAllString(body, -1); len(m) > 0 {
		t.Errorf("colours written outside the scheme variables: %v", m)
	}
}

// TestCodesAreNeverBrokenInside: codes, keys and ids may only wrap between
// words where they have room; the stylesheet lets a line break inside one
// only where it would otherwise be cut or scroll, and only in these rules:
// a long piece of a code.wrap (a list's error code, key or worker id,
// shown whole rather than cut with an ellipsis whose title no keyboard
// reaches: breakable marks its pieces longer than unbrokenRunes, the
// shorter ones wrap after their separators only), an input or
// output value (cut at the table's edge otherwise), a sentence naming a
// key (.anywhere: a consumer's grant, cut on a phone's card otherwise)
// and, on a phone, a heading's key (which scrolls sideways elsewhere).
func TestCodesAreNeverBrokenInside(t *testing.T) {
	t.Parallel()
	_, _, css := schemes(t)
	phone := regexp.MustCompile(`(?s)\n@media \(max-width: 40rem\) \{\n.*?\n\}\n`).FindString(css)
	if phone == "" {
		t.Fatal("no phone block (@media (max-width: 40rem)) in the stylesheet")
	}
	rest := strings.Replace(css, phone, "\n", 1)
	rest = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(rest, "")
	phone = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(phone, "")
	for _, bad := range []string{"overflow-wrap: anywhere", "word-break: break-all", "word-break: break-word", "hyphens: auto"} {
		for _, block := range []struct {
			css     string
			allowed []string
		}{{rest, []string{"code.wrap .long", "table.values td, table.values td code", ".anywhere"}}, {phone, []string{"h1, h2, h1 code, h2 code"}}} {
			for _, rule := range regexp.MustCompile(`[^{}]*\{[^}]*`+regexp.QuoteMeta(bad)+`[^}]*\}`).FindAllString(block.css, -1) {
				sel := strings.TrimSpace(rule[:strings.Index(rule, "{")])
				if !slices.Contains(block.allowed, sel) {
					t.Errorf("%q breaks %s inside", bad, sel)
				}
			}
		}
	}
	if !regexp.MustCompile(`code, \.id, \.key \{[^}]*overflow-wrap: normal; word-break: keep-all; hyphens: none;`).MatchString(css) {
		t.Error("code, .id and .key do not forbid breaks inside")
	}
	if !regexp.MustCompile(`code\.wrap \{[^}]*white-space: normal; overflow-wrap: break-word;`).MatchString(css) ||
		!regexp.MustCompile(`code\.wrap \.long \{[^}]*overflow-wrap: anywhere;`).MatchString(css) {
		t.Error("code.wrap does not wrap (after its separators, and within its long pieces): a list's codes would be cut or widen it")
	}
}

// TestLinkUnderlinesLeaveUnderscoresVisible: an underline drawn where an
// underscore's glyph is hides it (charge_card reads "charge card"): links
// draw theirs at least .25em below the baseline.
func TestLinkUnderlinesLeaveUnderscoresVisible(t *testing.T) {
	t.Parallel()
	_, _, css := schemes(t)
	m := regexp.MustCompile(`\na \{[^}]*text-underline-offset: ([0-9.]+)em;`).FindStringSubmatch(css)
	if m == nil {
		t.Fatal("links set no text-underline-offset")
	}
	if off, _ := strconv.ParseFloat(m[1], 64); off < .25 {
		t.Errorf("links' underline is %.2fem below the baseline, want at least .25em (under an underscore)", off)
	}
}
