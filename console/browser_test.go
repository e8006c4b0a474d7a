package console_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// screenshotDir collects the browser tests' screenshots (gitignored) so a
// person can look at every page, in both languages and both widths, after
// a run.
const screenshotDir = "testdata/screenshots"

var installChromium sync.Once

// needChromium returns the browser's path, installing it when allowed (as
// root, on CI or with RELAIS_BROWSER_TESTS=1); otherwise it skips.
func needChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath
	}
	allowed := os.Getenv("CI") == "true" || os.Getenv("RELAIS_BROWSER_TESTS") == "1"
	if !allowed || os.Geteuid() != 0 {
		t.Skipf("%s is missing; run as root with CI=true or RELAIS_BROWSER_TESTS=1 to let the test install it (apt-get install -y chromium)", chromiumPath)
	}
	installChromium.Do(func() {
		install := func() ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "chromium")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		}
		if out, err := install(); err != nil {
			t.Logf("apt-get install chromium: %v\n%s\nretrying after apt-get update", err, out)
			if out, err := exec.Command("apt-get", "update").CombinedOutput(); err != nil {
				t.Logf("apt-get update: %v\n%s", err, out)
			}
			if out, err := install(); err != nil {
				t.Logf("apt-get install chromium: %v\n%s", err, out)
			}
		}
	})
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium could not be installed: %v", err)
	}
	return chromiumPath
}

// viewport is a screen the pages must fit.
type viewport struct {
	name          string
	width, height int64
}

var (
	desktop = viewport{"desktop", 1280, 900}
	phone   = viewport{"phone", 320, 640}
)

// tab is one headless Chromium tab with helpers that fail the test.
type tab struct {
	t      *testing.T
	ctx    context.Context
	prefix string
	step   int
	mu     sync.Mutex
	errors []string // logged errors and CSP violations since the last check
}

// openTab starts Chromium at vp's size; shots are named prefix-NN-name.
func openTab(t *testing.T, browserPath string, vp viewport, prefix string) *tab {
	t.Helper()
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Chromium now and then exits at start on a loaded machine (chromedp's
	// "chrome failed to start"): a fresh one is tried, twice at most, each
	// after a pause.
	var tb *tab
	for attempt := 1; ; attempt++ {
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(browserPath),
			chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("lang", "en-US"),
			chromedp.Flag("hide-scrollbars", true),
			chromedp.UserDataDir(t.TempDir()),
			chromedp.WindowSize(int(vp.width), int(vp.height)),
		)
		ctx, cancel := chromedp.NewContext(allocCtx)
		ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
		stop := func() { cancelTimeout(); cancel(); cancelAlloc() }
		tb = &tab{t: t, ctx: ctx, prefix: prefix}
		if err := chromedp.Listen(ctx, func(ev any) {
			tb.mu.Lock()
			defer tb.mu.Unlock()
			switch ev := ev.(type) {
			case *cdplog.EventEntryAdded:
				if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Source == cdplog.EntrySourceSecurity || ev.Entry.Source == cdplog.EntrySourceViolation {
					tb.errors = append(tb.errors, fmt.Sprintf("%s %s: %s (%s)", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
				}
			}
		}); err != nil {
			stop()
			t.Fatal(err)
		}
		_, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
		if err == nil {
			t.Cleanup(stop)
			break
		}
		stop()
		if attempt == 3 || !strings.Contains(err.Error(), "chrome failed to start") {
			t.Fatal(err)
		}
		t.Logf("Chromium did not start (attempt %d): %v", attempt, err)
		// The machine is busy starting the other tests' browsers: a
		// moment later, one more is likelier to start.
		time.Sleep(time.Duration(attempt) * time.Second)
	}
	tb.do("viewport", chromedp.EmulateViewport(vp.width, vp.height))
	return tb
}

func (b *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to path, expects its status, and checks the page: no
// sideways scrolling, no logged error or CSP violation.
func (b *tab) open(base, path string, status int) {
	b.t.Helper()
	res, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(base+path))
	if err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
	if int(res.Status) != status {
		b.t.Errorf("%s: status %d, want %d", path, res.Status, status)
	}
	b.check(path)
}

// click follows a link or submits a form and waits for the next page.
func (b *tab) click(what, selector string) {
	b.t.Helper()
	if _, err := chromedp.RunResponse(b.ctx, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible)); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	b.check(what)
}

// check fails on what the page must never do.
func (b *tab) check(where string) {
	b.t.Helper()
	over, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	if err != nil {
		b.t.Fatal(err)
	}
	if over > 0 {
		b.t.Errorf("%s: the page is %dpx wider than the screen", where, over)
	}
	// axe's scrollable-region-focusable (WCAG 2.1.1): what scrolls can be
	// scrolled with a keyboard, being focusable or holding what is.
	if got := b.eval(scrollableRegionsJS); got != "" {
		b.t.Errorf("%s: regions that scroll but take no keyboard focus: %s", where, got)
	}
	b.mu.Lock()
	errs := b.errors
	b.errors = nil
	b.mu.Unlock()
	for _, e := range errs {
		if strings.Contains(e, "favicon.ico") || strings.Contains(e, "the server responded with a status of 404") || strings.Contains(e, "the server responded with a status of 400") {
			continue // no favicon (the browser asks anyway); 404 and 400 pages are checked by status
		}
		b.t.Errorf("%s: %s", where, e)
	}
}

func (b *tab) text(selector string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(selector), chromedp.NodeVisible))
	if err != nil {
		b.t.Fatalf("text of %s: %v", selector, err)
	}
	return strings.TrimSpace(s)
}

func (b *tab) location() string {
	b.t.Helper()
	u, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return u
}

func (b *tab) eval(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// shot saves a full-page screenshot.
func (b *tab) shot(name string) {
	b.t.Helper()
	b.step++
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	file := filepath.Join(screenshotDir, fmt.Sprintf("%s-%02d-%s.png", b.prefix, b.step, name))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// shotViewport saves what the screen shows (not the whole page): the
// phone views the README uses.
func (b *tab) shotViewport(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, b.prefix+"-screen-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// signIn signs in through the form, in lang (switched with the switcher).
func (b *tab) signIn(base, lang, token string) {
	b.t.Helper()
	b.open(base, "/console/occurrences", 200)
	if lang == "fr" {
		b.click("switch to French", `[data-testid=lang-fr]`)
	}
	b.do("type the token", chromedp.SendKeys(chromedp.CSS(`#token`), token, chromedp.NodeVisible))
	b.click("sign in", `[data-testid=sign-in]`)
	if !strings.HasSuffix(b.location(), "/console/occurrences") {
		b.t.Fatalf("after sign-in: %s", b.location())
	}
}

// TestBrowserEveryPage opens every page of the console in headless
// Chromium, in English and French, on a laptop and on a 320 px phone (WCAG reflow): none
// scrolls sideways, none logs an error or a CSP violation (an inline style
// in an SVG would), lists turn into cards with the status first on the
// phone, focus shows a 3 px ring. Screenshots of each land in
// testdata/screenshots.
func TestBrowserEveryPage(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newIncidentFixture(t)
	for _, lang := range []string{"en", "fr"} {
		for _, vp := range []viewport{desktop, phone} {
			t.Run(lang+"-"+vp.name, func(t *testing.T) {
				b := openTab(t, browserPath, vp, "pages-"+lang+"-"+vp.name)
				b.signIn(f.env.URL, lang, f.env.Operator)
				only := os.Getenv("RELAIS_BROWSER_PAGES") // a name fragment, to look at some pages only
				for _, p := range f.allPages() {
					if only != "" && !strings.Contains(p.name, only) {
						continue
					}
					status := 200
					switch p.name {
					case "not-found", "search-nothing":
						status = 404
					case "occurrences-more-filters":
						status = 400
					}
					b.open(f.env.URL, p.path, status)
					if title := b.text(`[data-testid=page-title]`); title == "" {
						t.Errorf("%s: no title", p.name)
					}
					if got := b.eval(`document.documentElement.lang`); got != lang {
						t.Errorf("%s: lang %q", p.name, got)
					}
					b.shot(p.name)
					if vp == desktop && (strings.HasPrefix(p.name, "occurrences") || strings.HasPrefix(p.name, "instances")) {
						// A list fits the laptop's screen: no column is
						// hidden in a sideways scroll, whatever the keys.
						if got := b.eval(`[...document.querySelectorAll('.table-wrap')].filter(w => w.scrollWidth > w.clientWidth).map(w => w.querySelector('table').dataset.testid + ' ' + (w.scrollWidth - w.clientWidth) + 'px').join(', ')`); got != "" {
							t.Errorf("%s: a table is wider than its box: %s", p.name, got)
						}
					}
					// No value of a list is cut with an ellipsis (its
					// whole text out of a keyboard's reach): codes and
					// keys wrap.
					if got := b.eval(`[...document.querySelectorAll('table *')].filter(e => getComputedStyle(e).textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth).map(e => e.textContent).join(', ')`); got != "" {
						t.Errorf("%s: values cut at %d px: %s", p.name, vp.width, got)
					}
					// A filter form's fields neither overlap nor leave
					// their box.
					if got := b.eval(filterLayoutJS); got != "" {
						t.Errorf("%s: filters: %s", p.name, got)
					}
					if vp == phone && strings.HasPrefix(p.name, "definition") {
						// A definition's lists (its contracts, a diff's
						// breaking columns, releases) are cards too: a
						// sideways scroll hid the columns that matter
						// (console QA).
						if got := b.eval(`[...document.querySelectorAll('.table-wrap')].filter(w => w.scrollWidth > w.clientWidth + 1).map(w => w.querySelector('table').dataset.testid || w.querySelector('caption').textContent).join(', ')`); got != "" {
							t.Errorf("%s: tables scroll sideways on a phone: %s", p.name, got)
						}
						if got := b.eval(cutInCardsJS); got != "" {
							t.Errorf("%s: cut at the card's edge: %s", p.name, got)
						}
					}
					if vp == phone {
						b.shotViewport(p.name)
						if p.name == "occurrences" {
							b.do("scroll to the list", chromedp.ScrollIntoView(chromedp.CSS(`table.cards caption`)))
							b.shotViewport("occurrences-cards")
						}
					}
				}
				// The skip link comes first and shows when focused; focus
				// is a 3 px ring.
				b.open(f.env.URL, "/console/occurrences", 200)
				b.do("tab", chromedp.KeyEvent("\t"))
				if got := b.eval(`document.activeElement.dataset.testid + " " + getComputedStyle(document.activeElement).outlineWidth + " " + getComputedStyle(document.activeElement).outlineStyle`); got != "skip-link 3px solid" {
					t.Errorf("first Tab focuses %q, want the skip link with a 3px solid ring", got)
				}
				b.shot("focus-skip-link")
				// Dark mode follows the system's preference.
				if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
					Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{"/console/health", "/console/instances/" + f.pullHeld, "/console/processes/checkout/versions/1"} {
					b.open(f.env.URL, p, 200)
					if got := b.eval(`getComputedStyle(document.body).backgroundColor`); got != "rgb(17, 21, 27)" {
						t.Errorf("%s in dark mode: background %s, want the dark scheme's", p, got)
					}
					b.shot("dark")
				}
				if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
					t.Fatal(err)
				}
				if vp == phone {
					b.open(f.env.URL, "/console/occurrences", 200)
					got := b.eval(`(() => { const tr = document.querySelector('table.cards tbody tr');
						const cells = [...tr.children].filter(c => getComputedStyle(c).display !== 'none');
						const first = cells.reduce((a, c) => c.getBoundingClientRect().top < a.getBoundingClientRect().top ? c : a);
						return getComputedStyle(tr).display + ' ' + first.className; })()`)
					if got != "flex status-cell" {
						t.Errorf("on a phone a list row shows as %q, want a card (flex) with the status first", got)
					}
				}
			})
		}
	}
}

// TestBrowserActions does each operator action in the browser, in both
// languages: retry a held instance from its page, act on every held
// instance a filter matches, find an order by its business key, choose
// local times and auto-refresh.
func TestBrowserActions(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newIncidentFixture(t)
	held := map[string]string{"en": f.pullHeld}
	held["fr"], _ = f.holdScoring(t, "lead-fr")
	words := map[string]map[string]string{
		"en": {"retried": "Retried: the occurrence at node score is offered again.", "running": "running",
			"bulk": "Bulk stop applied to ", "found": "Process instances", "refresh": "This page reloads every 10 seconds."},
		"fr": {"retried": "Reprise\u202f: l’occurrence du nœud score est proposée de nouveau.", "running": "en cours",
			"bulk": "Action groupée (arrêt) appliquée à ", "found": "Instances de processus", "refresh": "Cette page se recharge toutes les 10 secondes."},
	}
	for _, lang := range []string{"en", "fr"} {
		for _, vp := range []viewport{desktop, phone} {
			t.Run(lang+"-"+vp.name, func(t *testing.T) {
				w := words[lang]
				b := openTab(t, browserPath, vp, "actions-"+lang+"-"+vp.name)
				b.signIn(f.env.URL, lang, f.env.Operator)
				if vp == desktop {
					// Retry, from the instance page.
					b.open(f.env.URL, "/console/instances/"+held[lang], 200)
					b.shot("held-instance")
					b.click("retry", `[data-testid=retry-instance]`)
					b.do("reason", chromedp.SendKeys(chromedp.CSS(`#action-reason`), "scorer redeployed", chromedp.NodeVisible))
					b.shot("retry-confirm")
					b.click("confirm retry", `[data-testid=confirm-retry]`)
					if got := b.text(`[data-testid=flash]`); !strings.HasPrefix(got, w["retried"]) {
						t.Errorf("after retry: %q", got)
					}
					if got := b.text(`[data-testid=instance-status]`); got != w["running"] {
						t.Errorf("status after retry: %q", got)
					}
					b.shot("retried")
				}

				// Bulk: stop every held checkout order (a fresh one each run).
				order := f.env.Must(201, "POST", "/api/v1/processes/checkout/instances", f.env.Operator, map[string]any{"business_key": "bulk-" + lang + "-" + vp.name,
					"inputs": map[string]any{"order_id": "o", "amount_cents": 1, "currency": "EUR", "card_token": "tok-12345678",
						"cardholder": map[string]any{"name": "n"}}}).JSON(t)["id"].(string)
				waitHeld(t, f, order)
				b.open(f.env.URL, "/console/instances?process=checkout&status=held&business_key=bulk-"+lang+"-"+vp.name, 200)
				b.do("open the bulk actions", chromedp.Click(chromedp.CSS(`[data-testid=bulk-actions] summary`), chromedp.NodeVisible))
				b.shot("bulk-offer")
				b.click("bulk stop", `[data-testid=bulk-stop]`)
				b.do("reason", chromedp.SendKeys(chromedp.CSS(`#bulk-reason`), "payments provider down", chromedp.NodeVisible))
				b.shot("bulk-confirm")
				b.click("confirm bulk", `[data-testid=bulk-submit]`)
				if got := b.text(`[data-testid=flash]`); !strings.HasPrefix(got, w["bulk"]+"1") {
					t.Errorf("after the bulk stop: %q", got)
				}
				b.shot("bulk-result")

				// Search by business key.
				b.do("search", chromedp.SendKeys(chromedp.CSS(`#search-q`), "order-1001", chromedp.NodeVisible))
				b.click("find", `[data-testid=search-submit]`)
				if !strings.Contains(b.location(), "/console/instances?business_key=order-1001") || b.text(`[data-testid=page-title]`) != w["found"] {
					t.Errorf("search went to %s", b.location())
				}
				b.shot("search")

				// Local time and auto-refresh.
				b.click("display settings", `[data-testid=prefs-link]`)
				b.do("zone", chromedp.SetValue(chromedp.CSS(`#pref-tz`), "+02:00"), chromedp.SetValue(chromedp.CSS(`#pref-refresh`), "10"))
				b.shot("preferences")
				b.click("save", `[data-testid=save-prefs]`)
				if got := b.text(`[data-testid=refresh-note]`); got != w["refresh"] {
					t.Errorf("refresh note %q", got)
				}
				if got := b.eval(`document.querySelector('meta[http-equiv=refresh]').content`); got != "10" {
					t.Errorf("meta refresh %q", got)
				}
				if got := b.text(`[data-testid=prefs-link]`); !strings.Contains(got, "UTC+02:00") {
					t.Errorf("settings link %q", got)
				}
				b.shot("local-times")
				b.open(f.env.URL, "/console/instances/"+f.pushHeld[1]+"/stop", 200)
				if got := b.eval(`String(document.querySelectorAll('meta[http-equiv=refresh]').length)`); got != "0" {
					t.Errorf("a confirmation page reloads itself (%s meta refresh)", got)
				}
				b.open(f.env.URL, "/console/occurrences/"+f.pushHeldOcc, 200)
				if got := b.text(`[data-testid=dates]`); !strings.Contains(got, "UTC+02:00") {
					t.Errorf("dates not in the chosen zone: %q", got)
				}
				b.shot("occurrence-local")
				// Back to UTC without refresh, for the other runs' screenshots.
				b.click("display settings", `[data-testid=prefs-link]`)
				b.do("zone", chromedp.SetValue(chromedp.CSS(`#pref-tz`), "UTC"), chromedp.SetValue(chromedp.CSS(`#pref-refresh`), "0"))
				b.click("save", `[data-testid=save-prefs]`)
			})
		}
	}
}

// scrollableRegionsJS lists the elements that scroll (sideways or down)
// and neither take the focus nor hold anything that does (empty when
// none): a keyboard could not scroll them.
const scrollableRegionsJS = `[...document.querySelectorAll('body *')].filter(e => {
	const s = getComputedStyle(e);
	const scrolls = (o, content, box) => (o === 'auto' || o === 'scroll') && content > box + 1;
	if (!scrolls(s.overflowX, e.scrollWidth, e.clientWidth) && !scrolls(s.overflowY, e.scrollHeight, e.clientHeight)) return false;
	if (e.tabIndex >= 0) return false;
	return !e.querySelector('a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])');
}).map(e => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).replace(/ /g, '.') : '') + (e.dataset.testid ? '[' + e.dataset.testid + ']' : '') + ' (' + (e.scrollWidth - e.clientWidth) + 'px: ' + e.textContent.trim().slice(0, 40) + ')').join(', ')`

// filterLayoutJS says which controls of a filter form overlap another or
// stick out of the form's box (empty when none does).
const filterLayoutJS = `(() => {
	const out = [];
	for (const form of document.querySelectorAll('form.filters')) {
		const box = form.querySelector('fieldset').getBoundingClientRect();
		const els = [...form.querySelectorAll('input:not([type=hidden]), select, button, .actions a, label, legend')].filter(e => e.checkVisibility());
		const name = e => e.id || e.dataset.testid || e.textContent.trim();
		for (const [i, a] of els.entries()) {
			const r = a.getBoundingClientRect();
			if (r.left < box.left - 0.5 || r.right > box.right + 0.5) out.push(name(a) + ' sticks out');
			for (const b of els.slice(i + 1)) {
				const q = b.getBoundingClientRect();
				if (a.contains(b) || b.contains(a)) continue;
				if (r.left < q.right - 0.5 && q.left < r.right - 0.5 && r.top < q.bottom - 0.5 && q.top < r.bottom - 0.5) out.push(name(a) + ' overlaps ' + name(b));
			}
		}
	}
	return out.join('; ');
})()`

func waitHeld(t *testing.T, f *fixture, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.status(t, id) != "held" {
		if time.Now().After(deadline) {
			t.Fatalf("instance %s never held", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBrowserLongKeysFitAPhone: a definition whose key is long (dotted,
// 100 characters) keeps its pages within a 320 px phone's width, their
// titles included, and shows the key whole: it wraps, in a heading as in a
// card, rather than hide its end behind an ellipsis or a sideways scroll.
func TestBrowserLongKeysFitAPhone(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	env := newFixture(t).env
	key := "crm.customers.add_company_to_the_customer_relationship_system.with_every_contact_verified_by_hand"
	env.Must(201, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, vaultWorking(100, []string{"ok", "ko"}))
	env.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", env.Designer, nil)
	// A business key as long: a list's card shows its start, whole once
	// opened.
	businessKey := "order." + strings.Repeat("with_every_contact_verified_", 3) + "by_hand"
	env.Must(201, "POST", "/api/v1/processes/vault_flow/instances", env.Operator, map[string]any{"business_key": businessKey,
		"inputs": map[string]any{"company": "Acme SA", "api_key": canarySecret, "contact": map[string]any{"name": canarySensitive}}})
	// An operator's reason is often a ticket's URL: its banner wraps it.
	stopped := env.Must(201, "POST", "/api/v1/processes/vault_flow/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"company": "Acme SA", "api_key": canarySecret, "contact": map[string]any{"name": canarySensitive}}}).JSON(t)["id"].(string)
	env.Must(200, "POST", "/api/v1/instances/"+stopped+"/stop", env.Operator, map[string]any{
		"reason": "See https://support.example.fr/servicedesk/customer/portal/12/INC-2026-004711?selectedTab=com.atlassian.servicedesk:activity-tab"})
	stoppedOcc := env.Must(200, "GET", "/api/v1/instances/"+stopped, env.Operator, nil).JSON(t)["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	// A worker id as long, of a consumer granted the key: the Workers and
	// Consumers pages cut both at a phone's width (QA, an accessibility
	// audit), out of sight and out of a keyboard's reach.
	consumer := env.Consumer("long-key-sync", key)
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"max_tasks": 1,
		"worker_id": "kyc-with_every_contact-verification-worker-eu-west-1", "subscriptions": []any{map[string]any{"definition": key}}})
	for _, lang := range []string{"en", "fr"} {
		b := openTab(t, browserPath, phone, "long-keys-"+lang)
		b.signIn(env.URL, lang, env.Admin)
		for _, page := range []string{"/console/definitions/" + key, "/console/instances", "/console/occurrences", "/console/workers", "/console/consumers"} {
			b.open(env.URL, page, 200)
			if cut := b.eval(scrollableRegionsJS); cut != "" {
				t.Errorf("%s %s: out of a keyboard's reach: %s", lang, page, cut)
			}
			hidden := b.eval(`(() => { const all = [...document.querySelectorAll('h1, h2, .wrap, .anywhere')].filter(e => e.textContent.includes('with_every_contact'));
				if (all.length === 0) return 'no element shows it';
				return all.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.tagName + '.' + e.className + ' ' + e.clientWidth + ' of ' + e.scrollWidth + ' px').join(', '); })()`)
			if hidden != "" {
				t.Errorf("%s %s: the key is not shown whole: %s", lang, page, hidden)
			}
			if page == "/console/instances" {
				b.do("scroll to the list", chromedp.ScrollIntoView(`[data-testid=instance-row]`))
				b.shotViewport("instances")
			}
		}
		b.open(env.URL, "/console/definitions/"+key, 200)
		b.shot("definition")
		b.open(env.URL, "/console/occurrences?definition="+key, 200)
		b.open(env.URL, "/console/instances/"+stopped, 200)
		b.shot("stopped-with-a-url")
		b.open(env.URL, "/console/occurrences/"+stoppedOcc, 200)
	}
}

// TestBrowserRevealFormOnAPhone: on a phone, the reveal form's reason has
// its label above it and takes the whole width, and its button is at
// least 24 px high (WCAG 2.5.8).
func TestBrowserRevealFormOnAPhone(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newFixture(t)
	b := openTab(t, browserPath, phone, "reveal-phone")
	b.signIn(f.env.URL, "fr", f.env.Admin)
	b.open(f.env.URL, "/console/occurrences/"+f.completed, 200)
	got := b.eval(`[...document.querySelectorAll('[data-testid=reveal-form]')].map(f => {
		const box = e => f.querySelector(e).getBoundingClientRect();
		const form = f.getBoundingClientRect(), label = box('label'), input = box('input[name=reason]'), button = box('button');
		const out = [];
		if (!(label.height > 0 && label.bottom <= input.top + 0.5)) out.push('label not above the field');
		if (Math.abs(input.width - form.width) > 1) out.push('field ' + input.width + 'px wide in a form ' + form.width + 'px wide');
		if (button.height < 24) out.push('button ' + button.height + 'px high');
		return out.join(', ');
	}).filter(s => s).join('; ')`)
	if got != "" {
		t.Errorf("reveal form on a phone: %s", got)
	}
	b.shot("reveal-form")
}

// TestBrowserRevealFormUnderItsValue: on a laptop too, the reveal form
// comes under the masked value it reveals: beside it, the value sat at the
// foot of the form's label, field and hint (console QA).
func TestBrowserRevealFormUnderItsValue(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newFixture(t)
	b := openTab(t, browserPath, desktop, "reveal-desktop")
	b.signIn(f.env.URL, "fr", f.env.Admin)
	b.open(f.env.URL, "/console/occurrences/"+f.completed, 200)
	got := b.eval(`[...document.querySelectorAll('[data-testid=reveal-form]')].map(f => {
		const value = f.parentElement.querySelector('[data-testid=masked]').getBoundingClientRect(), form = f.getBoundingClientRect();
		return value.bottom <= form.top + 0.5 ? '' : 'value ' + value.top + '–' + value.bottom + ', form from ' + form.top;
	}).filter(s => s).join('; ')`)
	if got != "" {
		t.Errorf("reveal form on a laptop: %s", got)
	}
}

// TestBrowserPhoneHeader: on a phone the header's links are targets at
// least 24 px high (WCAG 2.5.8), and the main navigation is one row that
// scrolls sideways, its focus ring inside its box, rather than three rows
// pushing the page's title down.
func TestBrowserPhoneHeader(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newFixture(t)
	for _, lang := range []string{"en", "fr"} {
		b := openTab(t, browserPath, phone, "header-"+lang)
		b.signIn(f.env.URL, lang, f.env.Admin)
		b.open(f.env.URL, "/console/occurrences", 200)
		small := b.eval(`[...document.querySelectorAll('.main-nav a, .lang a, a.prefs')].filter(a => a.getBoundingClientRect().height < 24).map(a => a.textContent.trim() + ' ' + a.getBoundingClientRect().height + 'px').join(', ')`)
		if small != "" {
			t.Errorf("%s: targets under 24 px high: %s", lang, small)
		}
		if rows := b.eval(`String(new Set([...document.querySelectorAll('.main-nav a')].map(a => Math.round(a.getBoundingClientRect().top))).size)`); rows != "1" {
			t.Errorf("%s: the navigation takes %s rows, want 1", lang, rows)
		}
		// The row overflows: a shade at its right edge says it scrolls.
		if got := b.eval(`(() => { const n = document.querySelector('.main-nav'); return n.scrollWidth > n.clientWidth && (getComputedStyle(n).backgroundImage.match(/linear-gradient/g) || []).length === 2 ? '' : 'scrolls ' + (n.scrollWidth > n.clientWidth) + ', background ' + getComputedStyle(n).backgroundImage; })()`); got != "" {
			t.Errorf("%s: the navigation row gives no cue that it scrolls: %s", lang, got)
		}
		b.shotViewport("header-start")
		b.do("focus the last link", chromedp.Focus(chromedp.CSS(`.main-nav a:last-child`)))
		ring := b.eval(`(() => { const a = document.activeElement, nav = a.closest('nav').getBoundingClientRect(), r = a.getBoundingClientRect();
			const out = 5; // the 3 px ring, 2 px off the link
			return r.top - out >= nav.top - 0.5 && r.bottom + out <= nav.bottom + 0.5 && r.right + out <= nav.right + 0.5 ? '' : 'ring cut: link ' + JSON.stringify(r) + ' in ' + JSON.stringify(nav); })()`)
		if ring != "" {
			t.Errorf("%s: the focused navigation link's %s", lang, ring)
		}
		b.shotViewport("header")
	}
}

// TestBrowserHealthChartOnAPhone: on a phone the Health chart keeps its
// drawn size, its labels readable (shrunk to the screen they were 6 px
// high), in a frame that scrolls sideways rather than widen the page and
// opens on its newest end.
func TestBrowserHealthChartOnAPhone(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newFixture(t)
	b := openTab(t, browserPath, phone, "chart-phone")
	b.signIn(f.env.URL, "en", f.env.Operator)
	b.open(f.env.URL, "/console/health", 200)
	got := b.eval(`(() => {
		const out = [], ticks = [...document.querySelectorAll('.chart .tick')];
		if (ticks.length === 0) return 'no tick';
		const low = ticks.filter(t => t.getBoundingClientRect().height < 10).map(t => t.textContent + ' ' + t.getBoundingClientRect().height + 'px');
		if (low.length) out.push('labels under 10 px high: ' + low.join(', '));
		const wrap = document.querySelector('.chart-wrap');
		if (wrap.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5) out.push('the frame is wider than the screen');
		if (document.documentElement.scrollWidth > document.documentElement.clientWidth) out.push('the page scrolls sideways');
		const chart = wrap.querySelector('.chart');
		if (chart.getBoundingClientRect().width <= wrap.clientWidth) out.push('the chart does not overflow its frame: the test shows nothing');
		if (chart.getBoundingClientRect().right > wrap.getBoundingClientRect().right + 1) out.push('the frame opens on the oldest end, the newest off-screen');
		return out.join('; ');
	})()`)
	if got != "" {
		t.Errorf("the Health chart on a phone: %s", got)
	}
	b.shotViewport("health-chart")
}

// TestBrowserGraphTextInsideItsBoxes: in a process version's graph, every
// line a box shows (its name, what it is, its counts) is drawn inside the
// box, in both languages, with a node's name of 58 characters too.
func TestBrowserGraphTextInsideItsBoxes(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newIncidentFixture(t)
	long := "verify_the_customer_api_key_with_the_vault_before_the_sync"
	p := vaultProcess()
	nodes := p["nodes"].(map[string]any)
	nodes[long] = nodes["sync"]
	delete(nodes, "sync")
	p["start"] = long
	f.env.Process("vault_long_names", p)
	for _, lang := range []string{"en", "fr"} {
		b := openTab(t, browserPath, desktop, "graph-"+lang)
		b.signIn(f.env.URL, lang, f.env.Operator)
		for _, path := range []string{"/console/processes/checkout/versions/1", "/console/processes/vault_long_names/versions/1"} {
			b.open(f.env.URL, path, 200)
			got := b.eval(`[...document.querySelectorAll('[data-testid=graph-node]')].flatMap(g => {
				const r = g.querySelector('rect').getBBox();
				return [...g.querySelectorAll('text')].filter(t => { const b = t.getBBox();
					return b.x < r.x - 0.5 || b.y < r.y - 0.5 || b.x + b.width > r.x + r.width + 0.5 || b.y + b.height > r.y + r.height + 0.5; })
					.map(t => g.dataset.node + ': "' + t.textContent + '"');
			}).join('; ')`)
			if got != "" {
				t.Errorf("%s %s: text outside its box: %s", lang, path, got)
			}
			b.shot("graph")
		}
	}
}

// TestBrowserNothingScrollsOutOfAKeyboardsReach opens, at the widths an
// audit found them (390 and 640 px), the pages whose boxes scrolled
// without taking the focus (the Health chart, a definition's field
// tables, a process version's digest, a 150-character input value):
// open (check) fails on any such region; a long value wraps, whole, in
// its cell rather than be cut at the table's edge.
func TestBrowserNothingScrollsOutOfAKeyboardsReach(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newFixture(t)
	long := "Globex-" + strings.Repeat("Industries", 14) + "-SA"
	inst := f.env.Must(201, "POST", "/api/v1/processes/crm_only/instances", f.env.Operator, map[string]any{
		"inputs": map[string]any{"name": long}}).JSON(t)["id"].(string)
	occ := f.env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, f.env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	// A failure whose message holds a long URL and a second line (a
	// stack trace): the summary wraps it and keeps its lines (console QA:
	// its end ran past the edge of a box that scrolled unseen).
	failedInst := f.env.Must(201, "POST", "/api/v1/processes/crm_only/instances", f.env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Initech"}}).JSON(t)["id"].(string)
	crm := f.env.Consumer("crm-sync", "add_company_to_crm")
	failed := ""
	for _, o := range f.env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", crm, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}, "max_tasks": 10}).JSON(t)["occurrences"].([]any) {
		id := o.(map[string]any)["id"].(string)
		if o.(map[string]any)["instance_id"] == failedInst {
			failed = id
			f.env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", crm, map[string]any{"worker_id": "w", "error_code": "CRM_DOWN", "retryable": false,
				"message": "HTTP 502 from https://crm.example/services/data/v59.0/query?q=" + strings.Repeat("SELECT_Id_FROM_Account", 20) + "\nat line two"})
		}
	}
	for _, vp := range []viewport{{"390", 390, 844}, {"640", 640, 900}} {
		b := openTab(t, browserPath, vp, "scroll-"+vp.name)
		b.signIn(f.env.URL, "en", f.env.Operator)
		for _, path := range []string{"/console/health", "/console/definitions/add_company_to_crm", "/console/definitions/console_vault?from=1&to=2",
			"/console/processes/crm_only/versions/1", "/console/instances/" + inst, "/console/occurrences/" + occ,
			"/console/instances/" + failedInst, "/console/occurrences/" + failed} {
			b.open(f.env.URL, path, 200)
			cut := b.eval(`[...document.querySelectorAll('table.values td')].filter(td => td.scrollWidth > td.clientWidth + 1 || td.getBoundingClientRect().right > document.documentElement.clientWidth).map(td => td.textContent.trim().slice(0, 30)).join(', ')`)
			if cut != "" {
				t.Errorf("%s at %s px: values cut at the table's edge: %s", path, vp.name, cut)
			}
		}
		if got := b.eval(`document.querySelector('[data-testid="error-message"]').innerText`); !strings.HasSuffix(got, "\nat line two") {
			t.Errorf("at %s px: the message's second line is not its own: %q", vp.name, got)
		}
		b.shot("long-value")
	}
}

// TestBrowserCellLinksAreTargets: on a 390 px phone, a consumer's two task
// links, stacked in their cell, and a destination's calls link are
// targets at least 24 × 24 px (axe's target-size, WCAG 2.5.8).
func TestBrowserCellLinksAreTargets(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newIncidentFixture(t)
	for _, lang := range []string{"en", "fr"} {
		b := openTab(t, browserPath, viewport{"390", 390, 844}, "targets-"+lang)
		b.signIn(f.env.URL, lang, f.env.Admin)
		for path, sel := range map[string]string{"/console/consumers": "[data-testid=consumer-reserved], [data-testid=consumer-tasks]",
			"/console/destinations": "[data-testid=destination-calls]"} {
			b.open(f.env.URL, path, 200)
			got := b.eval(`(() => { const links = [...document.querySelectorAll('` + sel + `')];
				if (links.length === 0) return 'no link';
				return links.map(a => a.getBoundingClientRect()).filter(r => r.width < 24 || r.height < 24).map(r => r.width.toFixed(1) + '×' + r.height.toFixed(1)).join(', '); })()`)
			if got != "" {
				t.Errorf("%s %s: links smaller than 24 × 24 px: %s", lang, path, got)
			}
		}
	}
}

// cutInCardsJS lists what a phone's cards cut: an element that runs past
// the right edge of its card (the reveal log's whole occurrence id was
// clipped at 390 px, console QA).
const cutInCardsJS = `[...document.querySelectorAll('table.cards tbody tr')].flatMap(tr => {
	const edge = tr.getBoundingClientRect().right + 1;
	return [...tr.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > edge).map(e => e.tagName.toLowerCase() + ' ' + e.textContent.trim().slice(0, 40));
}).join(', ')`

// TestBrowserAdminPages opens the pages only an administrator sees (the
// reveal log, tokens, consumers, destinations) on a 320 px phone, in
// French (the longer words), with a row in each: no page scrolls sideways
// and no card cuts what it shows.
func TestBrowserAdminPages(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newFixture(t)
	f.env.Must(201, "PUT", "/api/v1/destinations/payments.provider-with-a-long-name", f.env.Admin,
		map[string]any{"url": "https://payments.example/v1/charges/with/a/rather/long/path", "max_timeout": "PT5S"})
	admin := signedIn(t, f.env.URL, "fr", f.env.Admin)
	page := "/console/occurrences/" + f.completed
	admin.do("POST", page+"/reveal", url.Values{"csrf": {csrfOf(t, admin.mustGet(page, 200))}, "side": {"inputs"}, "field": {"/contact"}, "reason": {"ticket 42"}})
	if n := len(reveals(t, f, f.completed)); n != 1 {
		t.Fatalf("%d reveals recorded, want 1", n)
	}
	b := openTab(t, browserPath, phone, "admin-fr-phone")
	b.signIn(f.env.URL, "fr", f.env.Admin)
	for _, p := range []string{"/console/reveals", "/console/tokens", "/console/consumers", "/console/destinations"} {
		b.open(f.env.URL, p, 200)
		b.shot(strings.TrimPrefix(p, "/console/"))
		if b.eval(`String(document.querySelectorAll('table.cards tbody tr').length)`) == "0" {
			t.Errorf("%s: no row to look at", p)
		}
		if got := b.eval(cutInCardsJS); got != "" {
			t.Errorf("%s: cut at the card's edge: %s", p, got)
		}
	}
}
