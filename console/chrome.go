package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/relais/relais/internal/auth"
)

// staticFiles are the console's assets, compiled into the binary: the
// console fetches nothing from elsewhere.
//
//go:embed static
var staticFiles embed.FS

// cssHref carries a digest of the stylesheet so browsers may cache it for a
// long time yet pick up a new version at once.
var cssHref = func() string {
	b, err := staticFiles.ReadFile("static/console.css")
	if err != nil {
		panic(err) // embedded at build time
	}
	sum := sha256.Sum256(b)
	return basePath + "/static/console.css?v=" + hex.EncodeToString(sum[:6])
}()

// iconHref is the console's icon, which browsers would otherwise look for
// at /favicon.ico (a 404 on every first page).
const iconHref = basePath + "/static/icon.svg"

var staticServer = http.StripPrefix(basePath, http.FileServerFS(staticFiles))

// serveStatic serves the embedded assets. The files never change within a
// binary and their links carry a digest, hence the long cache lifetime.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") {
		// No directory listings.
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	staticServer.ServeHTTP(w, r)
}

// refusedKey marks the context of a page rendered with an error status.
type refusedKey struct{}

// pageTitle is the document's title, which says first when the page
// answers a refusal or an error: a screen reader announces the title of
// a page reloaded on a refused form, and it read as the form's own (a11y
// QA, WCAG 2.4.2).
func pageTitle(ctx context.Context, ch chrome) string {
	if refused(ctx) {
		return T(ctx, "Error: %s · %s", ch.Title, ch.AppName)
	}
	return ch.Title + " · " + ch.AppName
}

// refused reports whether the page renders with an error status: its
// title says so, its message takes the focus, and it never reloads itself
// (a reload cannot mend it, and would read it out again and wipe a
// filter being corrected: verifier QA).
func refused(ctx context.Context) bool {
	r, _ := ctx.Value(refusedKey{}).(bool)
	return r
}

// chrome is what the layout shows around every page.
type chrome struct {
	Lang      string
	Title     string
	AppName   string
	CSSHref   string
	IconHref  string
	HomeHref  string
	SkipLabel string
	NavLabel  string
	Nav       []navLink
	LangLabel string
	Languages []langLink
	User      *userBox
	Search    *searchBox
	// Prefs links to the display settings, saying the current ones.
	PrefsHref, PrefsLabel, PrefsText string
	// PrefsLead is PrefsLabel as the hidden start of the link's text,
	// with the colon each language writes.
	PrefsLead string
	// Refresh, when positive, reloads the page every that many seconds
	// (a meta refresh: no script); pages asking for a reason never set it.
	Refresh int
	// Reload, on a page that reloads itself or would but for a pause,
	// says so with a one-click form that pauses or resumes it.
	Reload *reloadControl
	// Flash is what the previous form did, shown once.
	Flash flash
}

// reloadControl is what a live page says about reloading itself, with the
// button that pauses it (or resumes it, once paused).
type reloadControl struct {
	Text, Button       string
	Action, CSRF, Next string
	// Pause is the value the form posts: "1" pauses, "0" resumes.
	Pause  string
	Paused bool
}

// searchBox is the header's search form: an id or a business key.
type searchBox struct {
	Action, Label, Placeholder, Button, Value string
}

type navLink struct {
	Href    string
	Label   string
	TestID  string
	Current bool
}

type langLink struct {
	Href    string
	Label   string
	Code    string
	Current bool
}

type userBox struct {
	SignedInAs string
	SignOut    string
	Action     string
	CSRF       string
}

// languageNames are written in their own language, as language pickers do,
// so that someone who cannot read the current language still finds theirs;
// they are therefore the same in every catalog and not translated.
var languageNames = []struct{ code, name string }{{"en", "English"}, {"fr", "Français"}}

// chrome builds the layout's view model; section marks the current
// navigation entry ("occurrences", "definitions" or none).
// maxEchoedURI bounds the address a page writes back into its links and
// forms (the language switch, the reload control): past it, its path only.
const maxEchoedURI = 4096

func (c *Console) chrome(r *http.Request, title, section string) chrome {
	ctx := r.Context()
	ch := chrome{
		Lang: langCode(ctx), Title: title, AppName: T(ctx, "Relais console"), CSSHref: cssHref, IconHref: iconHref, HomeHref: homePath,
		LangLabel: T(ctx, "Language"), SkipLabel: T(ctx, "Skip to content"),
	}
	here := r.URL.RequestURI()
	if r.Method != http.MethodGet {
		// A page answering a POST (a refused sign-in, a refused stop):
		// switching language goes to the GET page of the same path, which
		// shows the same form.
		here = r.URL.Path
		switch here {
		case basePath + "/sign-out":
			here = homePath
		case bulkPath:
			// The bulk page's GET takes its action and filter in the
			// query: without them it would be a 400.
			q := instanceFilterFrom(r.PostFormValue).criteria()
			q.Set("action", r.PostFormValue("action"))
			here = bulkPath + "?" + q.Encode()
		}
	}
	if len(here) > maxEchoedURI {
		// Not echoed into each language link (security QA: a 100 KB
		// search came back four times over); its path alone, as after a
		// POST.
		here = r.URL.Path
	}
	for _, l := range languageNames {
		ch.Languages = append(ch.Languages, langLink{Href: basePath + "/lang/" + l.code + "?next=" + url.QueryEscape(here),
			Label: l.name, Code: l.code, Current: l.code == ch.Lang})
	}
	if p, ok := auth.FromContext(ctx); ok {
		ch.NavLabel = T(ctx, "Main navigation")
		ch.HomeHref = homeFor(p.Role)
		if auth.Allowed(p.Role, auth.RoleOperator) {
			ch.Nav = append(ch.Nav,
				navLink{Href: healthPath, Label: T(ctx, "Health"), TestID: "nav-health", Current: section == "health"},
				navLink{Href: homePath, Label: T(ctx, "External tasks"), TestID: "nav-occurrences", Current: section == "occurrences"},
				navLink{Href: instancesPath, Label: T(ctx, "Instances"), TestID: "nav-instances", Current: section == "instances"})
		}
		// Every role that signs in reads processes (designers without
		// their counts).
		ch.Nav = append(ch.Nav, navLink{Href: processesPath, Label: T(ctx, "Processes"), TestID: "nav-processes", Current: section == "processes"})
		if auth.Allowed(p.Role, auth.RoleOperator) {
			ch.Nav = append(ch.Nav, navLink{Href: auditPath, Label: T(ctx, "Audit log"), TestID: "nav-audit", Current: section == "audit"})
			ch.Search = &searchBox{Action: searchPath, Label: T(ctx, "Find an instance or occurrence"),
				Placeholder: T(ctx, "id or business key"), Button: T(ctx, "Find")}
			if q := r.URL.Query().Get("q"); r.URL.Path == searchPath && len(q) <= maxSearch {
				ch.Search.Value = q
			}
		}
		ch.Nav = append(ch.Nav, navLink{Href: definitionsPath, Label: T(ctx, "Definitions"), TestID: "nav-definitions", Current: section == "definitions"})
		if auth.Allowed(p.Role, auth.RoleOperator) {
			ch.Nav = append(ch.Nav, navLink{Href: workersPath, Label: T(ctx, "Workers"), TestID: "nav-workers", Current: section == "workers"})
		}
		if p.Role == auth.RoleAdmin {
			ch.Nav = append(ch.Nav, navLink{Href: consumersPath, Label: T(ctx, "Consumers"), TestID: "nav-consumers", Current: section == "consumers"},
				navLink{Href: destinationsPath, Label: T(ctx, "Destinations"), TestID: "nav-destinations", Current: section == "destinations"},
				navLink{Href: tokensPath, Label: T(ctx, "Tokens"), TestID: "nav-tokens", Current: section == "tokens"},
				navLink{Href: revealsPath, Label: T(ctx, "Reveals"), TestID: "nav-reveals", Current: section == "reveals"})
		}
		ch.User = &userBox{SignedInAs: elided(ctx, T(ctx, "Signed in as %s (%s)", p.Name, roleLabel(ctx, p.Role)), p.Name),
			SignOut: T(ctx, "Sign out"), Action: basePath + "/sign-out", CSRF: currentOf(ctx).csrf}
		pr := prefsOf(ctx)
		zone := pr.zoneName(ctx)
		ch.PrefsHref = basePath + "/preferences?next=" + url.QueryEscape(here)
		ch.PrefsLabel = T(ctx, "Display settings")
		ch.PrefsLead = T(ctx, "Display settings: ")
		switch {
		case pr.refresh > 0 && currentOf(ctx).reloadPaused:
			ch.PrefsText = T(ctx, "Times in %s · reloading paused", zone)
		case pr.refresh > 0:
			ch.PrefsText = T(ctx, "Times in %s · reload every %d s", zone, pr.refresh)
		default:
			ch.PrefsText = T(ctx, "Times in %s · no auto-reload", zone)
		}
		if cur := currentOf(ctx); cur.id != "" && cur.hasFlash && r.Method == http.MethodGet {
			ch.Flash = c.sessions.takeFlash(ctx, cur.id, r.URL.Path, r.URL.Query())
		}
	}
	return ch
}

// liveChrome is chrome for a page that may reload itself: lists and
// detail pages. A reload empties a filter field or the search box being
// typed in and sends the focus back to the top, and no script can tell
// that someone is typing: every such page offers a button that pauses
// reloading (for the session) in one click. A reason being typed must not
// be lost at all, so pages asking for one stay still.
func (c *Console) liveChrome(r *http.Request, title, section string) chrome {
	ch := c.chrome(r, title, section)
	ctx := r.Context()
	n := prefsOf(ctx).refresh
	if n <= 0 || ch.User == nil || r.Method != http.MethodGet {
		return ch
	}
	cur := currentOf(ctx)
	next := r.URL.RequestURI()
	if len(next) > maxEchoedURI {
		next = r.URL.Path
	}
	rc := &reloadControl{Action: reloadPath, CSRF: cur.csrf, Next: next}
	if cur.reloadPaused {
		rc.Paused, rc.Pause = true, "0"
		rc.Text = T(ctx, "Reloading paused")
		// TRANSLATORS: the button that resumes a paused auto-reload, after "Reloading paused —".
		rc.Button = T(ctx, "Resume")
	} else {
		ch.Refresh = n
		rc.Pause = "1"
		rc.Text = T(ctx, "This page reloads every %d seconds.", n)
		rc.Button = T(ctx, "Pause reloading")
	}
	ch.Reload = rc
	return ch
}

// still keeps a live page from reloading itself: it asks for a reason
// (a reveal's), or it answers a POST, which a reload would not show again.
func (ch *chrome) still() { ch.Refresh, ch.Reload = 0, nil }

// shortIDText is the end of an id, which tells ids made together apart:
// "…9c1e4f2a".
func shortIDText(id string) string {
	if len(id) <= 9 {
		return id
	}
	return "…" + id[len(id)-8:]
}

// breakable is s as HTML, escaped, with a line-break opportunity (<wbr>)
// after each separator of its words (_ . - @ : /): a code that must wrap
// (code.wrap) wraps there first, destination_|http_503 rather than
// destination_ht|tp_503, and within a piece only when it is longer than
// unbrokenRunes. A code of at most wholeRunes never breaks: a short key,
// charge_card, broken as charge_|card in a laptop's squeezed column read
// as two (operator QA). A <wbr> adds no character to what is read or
// copied.
func breakable(s string) string {
	if utf8.RuneCountInString(s) <= wholeRunes {
		return html.EscapeString(s)
	}
	var b strings.Builder
	segment := func(part string) {
		if utf8.RuneCountInString(part) > unbrokenRunes {
			b.WriteString(`<span class="long">` + html.EscapeString(part) + `</span>`)
			return
		}
		b.WriteString(html.EscapeString(part))
	}
	start := 0
	for i, r := range s {
		if strings.ContainsRune("_.-@:/", r) && i+1 < len(s) {
			segment(s[start : i+1])
			b.WriteString("<wbr>")
			start = i + 1
		}
	}
	segment(s[start:])
	return b.String()
}

// unbrokenRunes is the longest piece of a code, between its separators,
// that never breaks (a node's name, "charge", cut as "charg" and "e" by a
// squeezed column reads as two words): a longer one (a 150-character id)
// may break anywhere, in a span of class long, rather than widen a phone's
// page.
const unbrokenRunes = 16

// wholeRunes is the longest code shown whole, never broken: a short key
// or node name keeps its column a little wider rather than wrap.
const wholeRunes = 14

// clipRunes is the longest value a list shows whole (three lines of a
// laptop's column): longer business keys and worker ids (up to 200
// characters) show their start, the whole value a click or a key away.
const clipRunes = 64

// clipStart is the start of s and an ellipsis when s is longer than
// clipRunes; cut is false when s shows whole.
func clipStart(s string) (start string, cut bool) {
	r := []rune(s)
	if len(r) <= clipRunes {
		return s, false
	}
	return string(r[:clipRunes/2]) + "…", true
}

// describedBy is the aria-describedby of a form field: its hint, and the
// error about it when there is one, so that a screen reader reads both
// where the field is.
func describedBy(hint string, hasError bool, errorID string) string {
	if hasError {
		return hint + " " + errorID
	}
	return hint
}

// ariaBool is a boolean ARIA attribute's value: ARIA reads an empty
// aria-invalid as false, so the value is always written.
func ariaBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
