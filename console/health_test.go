package console_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/relais/relais/console"
	"github.com/relais/relais/internal/relaistest"
)

// TestHealthPage: per definition, open, held and failed counts, the queue
// lag of a definition with a waiting occurrence, and the last hour's
// completions and failures, the chart's numbers matching the table.
func TestHealthPage(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	r := b.mustGet("/console/health", 200)
	row := func(key string) map[string]string {
		out := map[string]string{}
		s := r.doc.Find(`[data-testid=health-row][data-key="` + key + `"]`)
		if s.Length() != 1 {
			t.Fatalf("no health row for %s", key)
		}
		for _, id := range []string{"health-open", "health-held", "health-failed", "health-lag", "health-completed", "health-failed-1h"} {
			out[id] = collapse(s.Find(`[data-testid=` + id + `]`).Text())
		}
		return out
	}
	for key, want := range map[string]map[string]string{
		"charge_card":        {"health-open": "0", "health-held": "2", "health-failed": "3", "health-lag": "—", "health-completed": "0", "health-failed-1h": "3"},
		"score_company":      {"health-open": "0", "health-held": "1", "health-failed": "1", "health-failed-1h": "1"},
		"console_vault":      {"health-open": "1", "health-held": "0", "health-failed": "1", "health-completed": "1", "health-failed-1h": "1"},
		"add_company_to_crm": {"health-open": "1", "health-held": "0", "health-failed": "0"},
	} {
		got := row(key)
		for id, v := range want {
			if got[id] != v {
				t.Errorf("%s %s = %q, want %q", key, id, got[id], v)
			}
		}
	}
	// Nothing polls add_company_to_crm: its lag is said to have no worker.
	if lag := row("add_company_to_crm")["health-lag"]; !regexp.MustCompile(`^\d+ (s|min) \(no worker\)$`).MatchString(lag) {
		t.Errorf("queue lag of a waiting occurrence = %q, want a duration, with no worker", lag)
	}
	// Held, failing or unserved definitions come first.
	first, _ := r.doc.Find(`[data-testid=health-row]`).First().Attr("data-key")
	if first != "charge_card" && first != "score_company" && first != "console_vault" && first != "add_company_to_crm" {
		t.Errorf("first row %s: definitions needing attention come first", first)
	}
	// The chart: one bar per status and 5-minute slot, its numbers in a
	// table, no inline style.
	chart := r.doc.Find(`svg[data-testid=chart]`)
	if n := chart.Find("rect.bar-ok, rect.bar-bad").Length(); n != 24 {
		t.Errorf("%d bars, want 24 (12 slots × 2)", n)
	}
	total := 0
	r.doc.Find(`[data-testid=chart-data] tbody tr`).Each(func(_ int, s *goquery.Selection) {
		if s.Find("td").Eq(1).Text() != "0" {
			total++
		}
	})
	if total == 0 || !strings.Contains(chart.Find("desc").Text(), "1 completed, 5 failed") {
		t.Errorf("chart data: %d slots with failures; desc %q", total, chart.Find("desc").Text())
	}
	scoped := b.mustGet("/console/health?definition=charge_card", 200)
	if got := scoped.doc.Find(`svg[data-testid=chart] desc`).Text(); !strings.Contains(got, "0 completed, 3 failed") {
		t.Errorf("scoped chart desc %q", got)
	}
	if got := text(scoped, "chart-unknown"); got != "" {
		t.Errorf("a known definition's chart is said unknown: %q", got)
	}
	// A mistyped key is refused as the lists refuse it, rather than draw
	// an idle hour; a definition without occurrences yet says so.
	if got := text(b.mustGet("/console/health?definition=charge_crad", 400), "filter-errors"); !strings.Contains(got, "“charge_crad”") || !strings.Contains(got, "“charge_card”") {
		t.Errorf("an unknown definition's chart: errors %q, want the key and the one meant", got)
	}
	if got := text(b.mustGet("/console/health?definition=console_unused", 200), "chart-unknown"); got != "Definition console_unused has no occurrence yet." {
		t.Errorf("a definition without occurrences: notice %q", got)
	}
	// Open counts three statuses: all of them in one, it links to that
	// status's list (the definition's whole list is mostly settled rows).
	if href, _ := r.doc.Find(`[data-testid=health-row][data-key="add_company_to_crm"] [data-testid=health-open]`).Attr("href"); href != "/console/occurrences?definition=add_company_to_crm&status=available" {
		t.Errorf("open links to %q", href)
	}
}

// TestProcessVersionGraph: the graph names every node and the hold, draws
// error edges apart with their codes, counts each node's occurrences of
// that version, and uses no inline style (the CSP would drop it).
func TestProcessVersionGraph(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	r := b.mustGet("/console/processes/checkout/versions/1", 200)
	svg := r.doc.Find(`svg[data-testid=process-graph]`)
	var nodes []string
	svg.Find(`[data-testid=graph-node]`).Each(func(_ int, s *goquery.Selection) {
		n, _ := s.Attr("data-node")
		nodes = append(nodes, n)
	})
	if strings.Join(nodes, ",") != "charge,paid,refused,bloquée pour un opérateur" {
		t.Errorf("graph nodes %v", nodes)
	}
	// Error edges, one per target: the two codes that hold share one.
	if n := svg.Find("path.edge-error").Length(); n != 2 {
		t.Errorf("%d error edges, want 2 (503 and deadline to hold, the rest to refused)", n)
	}
	var labels []string
	svg.Find("text.edge-label").Each(func(_ int, s *goquery.Selection) { labels = append(labels, s.Text()) })
	for _, want := range []string{"approved", "declined", "deadline_exceeded", "destination_http_503", "toute autre erreur"} {
		if !slices.Contains(labels, want) {
			t.Errorf("edge labels %q lack %q", labels, want)
		}
	}
	charge := collapse(svg.Find(`[data-node=charge]`).Text())
	if !strings.Contains(charge, "en échec 3") || !strings.Contains(charge, "instances bloquées\u202f: 2") {
		t.Errorf("charge node %q: want its 3 failed occurrences, and the 2 instances held there", charge)
	}
	// The hold's box counts every incident of the version.
	if hold := collapse(svg.Find(`[data-node="bloquée pour un opérateur"]`).Text()); !strings.Contains(hold, "instances bloquées\u202f: 2") {
		t.Errorf("hold node %q: want the 2 held instances", hold)
	}
	var charged string
	r.doc.Find(`[data-testid=node-counts]`).Each(func(_ int, s *goquery.Selection) {
		if t := collapse(s.Text()); strings.Contains(t, "instances bloquées") {
			charged = t
		}
	})
	if !strings.Contains(charged, "instances bloquées 2") {
		t.Errorf("node table: no held count (%q)", charged)
	}
	if svg.Find("[style]").Length() != 0 || strings.Contains(r.body, "style=") {
		t.Error("the graph carries inline styles")
	}
	if r := b.get("/console/processes/checkout/versions/9"); r.status != http.StatusNotFound {
		t.Errorf("unknown version: %d", r.status)
	}
	// A version's address shortened to its process's leads to the latest.
	for _, path := range []string{"/console/processes/checkout", "/console/processes/checkout/versions"} {
		if r := b.get(path); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/processes/checkout/versions/1" {
			t.Errorf("GET %s: %d, Location %q; want 303 to version 1", path, r.status, r.header.Get("Location"))
		}
	}
	if r := b.get("/console/processes/no_such_process"); r.status != http.StatusNotFound {
		t.Errorf("unknown process: %d", r.status)
	}
}

// TestDisplayPreferences: times show in the zone chosen, on every page;
// auto-refresh reloads lists and detail pages only, never a page with a
// form; anything not offered falls back to UTC and no refresh.
func TestDisplayPreferences(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	page := b.mustGet("/console/preferences?next="+url.QueryEscape("/console/instances/"+f.pullHeld), 200)
	action, form := formOf(t, page, "prefs-form")
	form.Set("tz", "+05:30")
	form.Set("refresh", "5")
	r := b.do("POST", action, form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/instances/"+f.pullHeld {
		t.Fatalf("save: %d %q", r.status, r.header.Get("Location"))
	}
	inst := b.mustGet("/console/instances/"+f.pullHeld, 200)
	if got := text(inst, "instance-summary"); !strings.Contains(got, "UTC+05:30") {
		t.Errorf("times not in UTC+05:30: %q", got)
	}
	if got, _ := inst.doc.Find(`meta[http-equiv=refresh]`).Attr("content"); got != "5" {
		t.Errorf("meta refresh %q, want 5", got)
	}
	for _, p := range []string{"/console/instances/" + f.pullHeld + "/retry", "/console/instances/bulk?action=stop&process=checkout", "/console/preferences"} {
		if n := b.mustGet(p, 200).doc.Find(`meta[http-equiv=refresh]`).Length(); n != 0 {
			t.Errorf("%s reloads itself: a form would lose what was typed", p)
		}
	}
	// Nor does a list refusing its filter: a reload cannot mend it, and
	// would read its error out again and wipe the filter being corrected.
	if bad := b.mustGet("/console/occurrences?instance=xyz", 400); bad.doc.Find(`meta[http-equiv=refresh]`).Length() != 0 || count(bad, "reload-form") != 0 {
		t.Error("a list refusing its filter reloads itself")
	}
	// A place: its name in the settings' summary, each time with the
	// offset of its day (the fixture's times are today's: Paris is UTC+01:00
	// or UTC+02:00 depending on the season).
	form.Set("tz", "Europe/Paris")
	b.do("POST", action, form)
	paris := b.mustGet("/console/instances/"+f.pullHeld, 200)
	if got := text(paris, "instance-summary"); !strings.Contains(got, "UTC+01:00") && !strings.Contains(got, "UTC+02:00") {
		t.Errorf("times not in Paris's offset: %q", got)
	}
	if got := paris.body; !strings.Contains(got, "Times in Paris") {
		t.Error("the settings' summary does not name Europe/Paris")
	}
	if opt := b.mustGet("/console/preferences", 200).doc.Find(`option[value="Europe/Paris"]`); opt.Length() != 1 || !opt.Is("[selected]") {
		t.Errorf("Europe/Paris offered and selected: %d", opt.Length())
	}
	// Forged values: UTC, no refresh.
	form.Set("tz", "+01:17")
	form.Set("refresh", "1")
	b.do("POST", action, form)
	again := b.mustGet("/console/instances/"+f.pullHeld, 200)
	if got := text(again, "instance-summary"); strings.Contains(got, "UTC+") || !strings.Contains(got, "UTC") {
		t.Errorf("an offset not offered was kept: %q", got)
	}
	if again.doc.Find(`meta[http-equiv=refresh]`).Length() != 0 {
		t.Error("a refresh period not offered was kept")
	}
}

// TestPauseReloading: a page that reloads itself empties what was typed
// but not applied and moves the focus to the top, so every such page
// offers a one-click Pause (a CSRF-checked POST that returns to the same
// page); paused, pages of the session render without their meta refresh
// and say so with a Resume button, which brings reloading back. The
// return path must be a console page.
func TestPauseReloading(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	reloadEvery(t, b, "5")
	list := "/console/occurrences?definition=console_vault&status=failed"
	page := b.mustGet(list, 200)
	if got, _ := page.doc.Find(`meta[http-equiv=refresh]`).Attr("content"); got != "5" {
		t.Fatalf("meta refresh %q, want 5", got)
	}
	if got := text(page, "reload-toggle"); got != "Pause reloading" {
		t.Errorf("the reloading page's button says %q, want Pause reloading", got)
	}
	action, form := formOf(t, page, "reload-form")
	if form.Get("csrf") == "" {
		t.Error("the pause form carries no CSRF token")
	}
	r := b.do("POST", action, form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != list {
		t.Fatalf("pause: %d to %q, want 303 back to %s", r.status, r.header.Get("Location"), list)
	}
	// The page it lands on says so, focused as an action's outcome is
	// (the button's new label, far down, was all a keyboard's user saw).
	if got := text(b.mustGet(list, 200), "flash"); got != "Reloading paused: this page stays as it is until you resume." {
		t.Errorf("after pausing, the page says %q", got)
	}
	for _, p := range []string{list, "/console/instances/" + f.completedInst, "/console/health"} {
		paused := b.mustGet(p, 200)
		if n := paused.doc.Find(`meta[http-equiv=refresh]`).Length(); n != 0 {
			t.Errorf("%s reloads itself while paused", p)
		}
		if got := text(paused, "reload-form"); got != "Reloading paused — Resume" {
			t.Errorf("%s paused says %q, want Reloading paused — Resume", p, got)
		}
		if got := text(paused, "prefs-link"); !strings.Contains(got, "reloading paused") {
			t.Errorf("%s: the settings link says %q while paused", p, got)
		}
	}
	action, form = formOf(t, b.mustGet(list, 200), "reload-form")
	if r := b.do("POST", action, form); r.status != http.StatusSeeOther || r.header.Get("Location") != list {
		t.Fatalf("resume: %d to %q", r.status, r.header.Get("Location"))
	}
	if got := text(b.mustGet(list, 200), "flash"); got != "Reloading resumed." {
		t.Errorf("after resuming, the page says %q", got)
	}
	if got, _ := b.mustGet(list, 200).doc.Find(`meta[http-equiv=refresh]`).Attr("content"); got != "5" {
		t.Errorf("resumed, meta refresh %q, want 5", got)
	}
	// Saving the display settings (choosing a period) ends a pause.
	b.do("POST", action, withField(form, "pause", "1"))
	reloadEvery(t, b, "10")
	if got, _ := b.mustGet(list, 200).doc.Find(`meta[http-equiv=refresh]`).Attr("content"); got != "10" {
		t.Errorf("after saving the settings, meta refresh %q, want 10", got)
	}
	// Only back to a console page.
	for _, next := range []string{"https://evil.example/console/occurrences", "//evil.example/console", "/api/v1/occurrences", "/console/sign-in", ""} {
		r := b.do("POST", action, withField(form, "next", next))
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/occurrences" {
			t.Errorf("next %q: %d to %q, want the console's home", next, r.status, r.header.Get("Location"))
		}
	}
	// Without reloading, there is nothing to pause.
	reloadEvery(t, b, "0")
	if n := count(b.mustGet(list, 200), "reload-form"); n != 0 {
		t.Errorf("a page that never reloads offers %d pause forms", n)
	}
}

// withField is a copy of form with name set to value.
func withField(form url.Values, name, value string) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = slices.Clone(v)
	}
	out.Set(name, value)
	return out
}

// TestHealthChartTellsFailuresByMoreThanColour: failure bars are hatched
// (an SVG pattern) and outlined, completions solid, and the legend shows
// both, its words visible: a reader who cannot tell red from green tells
// them apart (WCAG 1.4.1).
func TestHealthChartTellsFailuresByMoreThanColour(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	r := signedIn(t, f.env.URL, "en", f.env.Operator).mustGet("/console/health", 200)
	chart := r.doc.Find(`svg[data-testid=chart]`)
	if chart.Find(`defs pattern#chart-failed-hatch`).Length() != 1 {
		t.Fatal("the chart defines no hatching pattern")
	}
	bad, ok := chart.Find("rect.bar-bad"), chart.Find("rect.bar-ok")
	if bad.Length() == 0 || bad.FilterFunction(func(_ int, s *goquery.Selection) bool { return s.AttrOr("fill", "") != "url(#chart-failed-hatch)" }).Length() != 0 {
		t.Errorf("failure bars are not all hatched (%d bars)", bad.Length())
	}
	if ok.FilterFunction(func(_ int, s *goquery.Selection) bool { _, has := s.Attr("fill"); return has }).Length() != 0 {
		t.Error("completion bars are hatched too")
	}
	legend := r.doc.Find(`.legend`)
	if got := collapse(legend.Text()); got != "Completed Failed" || legend.Find(".visually-hidden").Length() != 0 || legend.Find(".swatch.ok").Length() != 1 || legend.Find(".swatch.bad").Length() != 1 {
		t.Errorf("legend %q: want its two swatches and visible words", got)
	}
	_, _, css := schemes(t)
	if !regexp.MustCompile(`\.swatch\.bad \{[^}]*repeating-linear-gradient\(`).MatchString(css) {
		t.Error("the legend's failure swatch is not hatched as its bars are")
	}
	if regexp.MustCompile(`\.chart \.bar-bad \{[^}]*fill:`).MatchString(css) {
		t.Error("the stylesheet fills failure bars, over their hatching")
	}
}

// TestHealthPageInFrench: the chart's sentence agrees each count with its
// noun (1 terminée, 2 terminées) and every bar's title puts a narrow
// no-break space before its colon.
func TestHealthPageInFrench(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	r := b.mustGet("/console/health?definition=console_vault", 200)
	chart := r.doc.Find(`svg[data-testid=chart]`)
	if got, want := chart.Find("desc").Text(), "Dans la dernière heure\u202f: 1 terminée, 1 en échec."; !strings.HasPrefix(got, want) {
		t.Errorf("chart desc %q, want %q…", got, want)
	}
	titles := chart.Find("rect title")
	if titles.Length() == 0 {
		t.Fatal("no bar titles")
	}
	titles.Each(func(_ int, s *goquery.Selection) {
		if title := s.Text(); !strings.Contains(title, "\u202f: ") || strings.Contains(title, " : ") || strings.Contains(title, "0 terminées") {
			t.Errorf("bar title %q, want “slot\u202f: n terminée(s)”", title)
		}
	})
}

// A version too large to draw legibly is not laid out (it takes more than
// linear time, and a drawing thousands of boxes wide shows nothing): the
// page says so, and its table still lists every node.
func TestLargeProcessVersionIsNotDrawn(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	doc := relaistest.CRMProcess(nil)
	nodes := doc["nodes"].(map[string]any)
	crm := nodes["crm"].(map[string]any)
	for i := range console.MaxGraphNodes {
		n := maps.Clone(crm)
		next := fmt.Sprintf("n%03d", i+1)
		if i+1 == console.MaxGraphNodes {
			next = "done"
		}
		n["routes"] = map[string]any{"created": next, "existing": "known"}
		nodes[fmt.Sprintf("n%03d", i)] = n
	}
	crm["routes"] = map[string]any{"created": "n000", "existing": "n000"}
	f.env.Process("long_chain", doc)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	r := b.mustGet("/console/processes/long_chain/versions/1", 200)
	if r.doc.Find(`svg[data-testid=process-graph]`).Length() != 0 || count(r, "graph-too-big") != 1 {
		t.Errorf("a version of %d nodes is drawn, or nothing says why not", len(nodes))
	}
	if got := r.doc.Find(`[data-testid=nodes] tbody tr`).Length(); got != len(nodes) {
		t.Errorf("the node table lists %d nodes, want %d", got, len(nodes))
	}
}

// A list that fits one page has no pager: an empty navigation landmark
// only misleads a screen reader.
func TestOnePageListsHaveNoPager(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Admin)
	for _, path := range []string{"/console/definitions", "/console/processes", "/console/tokens", "/console/workers"} {
		if r := b.mustGet(path, 200); count(r, "pager") != 0 || r.doc.Find("nav.pager").Length() != 0 {
			t.Errorf("%s fits one page and still has a pager", path)
		}
	}
}

// TestHealthSaysWhenNoWorkerServes: a definition whose occurrences wait
// with no live worker says so on its row, linking to its workers, and
// needs attention; once a worker polls, the note goes.
func TestHealthSaysWhenNoWorkerServes(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", crm)
	for _, name := range []string{"Acme", "Globex"} {
		env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": name}})
	}
	for i, lang := range []string{"en", "fr"} {
		r := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/health", 200)
		note := r.doc.Find(`[data-testid=health-row][data-key="` + crm + `"] [data-testid=no-worker]`)
		if got, want := collapse(note.Text()), []string{"(no worker)", "(aucun exécutant)"}[i]; got != want {
			t.Errorf("%s: no-worker note %q, want %q", lang, got, want)
		}
		if href, _ := note.Attr("href"); href != "/console/workers?definition="+crm {
			t.Errorf("%s: the note links to %q, want the definition's workers", lang, href)
		}
	}
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "poller-1", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm}}})
	r := signedIn(t, env.URL, "en", env.Operator).mustGet("/console/health", 200)
	if n := r.doc.Find(`[data-testid=no-worker]`).Length(); n != 0 {
		t.Errorf("%d no-worker notes with a poller live, want none", n)
	}
}

// TestHealthHeldLinksToItsInstances: a definition's held count links to
// the instances held at its nodes, as many as it says, and a bulk action
// from that list carries the filter.
func TestHealthHeldLinksToItsInstances(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	r := b.mustGet("/console/health", 200)
	checked := 0
	r.doc.Find(`[data-testid=health-row]`).Each(func(_ int, row *goquery.Selection) {
		key, _ := row.Attr("data-key")
		held := row.Find(`[data-testid=health-held]`)
		n, err := strconv.Atoi(collapse(held.Text()))
		if err != nil || n == 0 {
			return
		}
		checked++
		href, _ := held.Attr("href")
		list := b.mustGet(href, 200)
		if got := count(list, "instance-row"); got != n {
			t.Errorf("%s: %d held, its link %s lists %d", key, n, href, got)
		}
		api := f.env.Must(200, "GET", "/api/v1/instances?held_at="+key, f.env.Operator, nil).JSON(t)["items"].([]any)
		if len(api) != n {
			t.Errorf("%s: %d held, GET /instances?held_at= lists %d", key, n, len(api))
		}
		bulk, _ := list.doc.Find(`[data-testid=bulk-abandon]`).Attr("href")
		if _, form := formOf(t, b.mustGet(bulk, 200), "bulk-form"); form.Get("held_at") != key || form.Get("confirm_count") != strconv.Itoa(n) {
			t.Errorf("%s: the bulk abandon from that list carries %v, want held_at and a count of %d", key, form, n)
		}
	})
	if checked < 2 {
		t.Fatalf("%d definitions with held instances checked, want at least 2 (the fixture holds some at two)", checked)
	}
}

// A process version's page shows what its instances start with and what
// feeds each node: a designer read neither anywhere but the document.
func TestProcessVersionShowsInputsAndBindings(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	for _, lang := range []string{"en", "fr"} {
		b := newBrowser(t, f.env.URL, lang)
		b.signIn(f.env.Designer)
		r := b.mustGet("/console/processes/scoring/versions/1", 200)
		inputs := r.doc.Find(`[data-testid=process-inputs] [data-testid=field-row]`)
		if inputs.Length() != 1 || inputs.AttrOr("data-field", "") != "crm_id" {
			t.Errorf("%s: process inputs %q, want the crm_id field", lang, collapse(inputs.Text()))
		}
		bindings := collapse(r.doc.Find(`[data-node=score] [data-testid=node-bindings]`).Text())
		for _, want := range []string{"crm_id ← input.crm_id", `country = "FR"`} {
			if !strings.Contains(bindings, want) {
				t.Errorf("%s: score's bindings %q lack %q", lang, bindings, want)
			}
		}
		if end := collapse(r.doc.Find(`[data-node=done] [data-testid=node-bindings]`).Text()); end != "—" {
			t.Errorf("%s: an end node's bindings %q, want none", lang, end)
		}
	}
}

// An operator's action on this replica shows on the health page opened
// next, not a few seconds later (on-call QA: 24 held still shown once all
// were abandoned).
func TestHealthFollowsAnActionAtOnce(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	held := func() string {
		return collapse(b.mustGet("/console/health", 200).doc.Find(`[data-testid=health-row][data-key="charge_card"] [data-testid=health-held]`).Text())
	}
	if got := held(); got != "2" {
		t.Fatalf("charge_card held %q before, want 2", got)
	}
	res := f.env.Must(200, "POST", "/api/v1/instances/actions", f.env.Operator, map[string]any{"action": "abandon", "reason": "PSP down for good",
		"filter": map[string]any{"status": "held", "held_at": "charge_card"}, "confirm_count": 2}).JSON(t)
	if res["applied_count"] != 2.0 {
		t.Fatalf("bulk abandon: %v", res)
	}
	if got := held(); got != "0" {
		t.Errorf("charge_card held %q right after the abandon, want 0", got)
	}
}

// A list filtered by an error code that finds nothing says codes match
// exactly (on-call QA: psp_down found nothing, silently, for PSP_DOWN).
func TestAnErrorCodeFilterSaysItIsExact(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	for _, page := range []string{"/console/occurrences?error_code=scorer_down", "/console/instances?error_code=scorer_down"} {
		if got := text(b.mustGet(page, 200), "empty"); !strings.Contains(got, "An error code is matched exactly, capitals included.") {
			t.Errorf("%s: %q", page, got)
		}
	}
	// Running instances carry no error code yet: where their failures
	// are is said (on-call QA: the right code read as a typo).
	if got := text(b.mustGet("/console/instances?error_code=scorer_down", 200), "empty"); !strings.HasSuffix(got, "A running instance has no error code yet: occurrences that failed with it and wait for their retry are listed under External tasks, filtered by that code.") {
		t.Errorf("instances by an error code: %q, want where running instances' failures are", got)
	}
	if got := text(b.mustGet("/console/instances?status=held&error_code=scorer_down", 200), "empty"); strings.Contains(got, "running instance") {
		t.Errorf("held instances by an error code: %q, want nothing said of running ones", got)
	}
	if got := text(b.mustGet("/console/instances/bulk?action=retry&status=held&error_code=scorer_down", 200), "bulk-nothing"); !strings.HasSuffix(got, "An error code is matched exactly, capitals included.") {
		t.Errorf("bulk retry of scorer_down: %q", got)
	}
	if got := text(b.mustGet("/console/occurrences?status=failed&definition=add_company_to_crm", 200), "empty"); strings.Contains(got, "error code") {
		t.Errorf("no error code filter, yet: %q", got)
	}
}

// An outage retried with backoff holds and fails nothing yet: the health
// page counts the occurrences waiting out a retry delay, says when the
// next is due and lists them from its count (on-call QA: the page showed nothing while every attempt failed).
func TestHealthCountsWaitingRetries(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	env := f.env
	f.addSlowScoring(t)
	occID := f.waitScoring(t, "PT1H")[0]
	instanceID := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)["instance_id"].(string)

	b := signedIn(t, env.URL, "en", env.Operator)
	page := b.mustGet("/console/health", 200)
	retrying := func(key string) string {
		return collapse(page.doc.Find(`[data-testid=health-row][data-key=` + key + `] [data-testid=health-retrying]`).Text())
	}
	if got := retrying("charge_card"); got != "0" {
		t.Errorf("waiting for a retry of a definition whose failures hold: %q, want 0", got)
	}
	// The time with its day when that is tomorrow (a run an hour before
	// midnight: "at Dec 8, 00:06 UTC").
	if got := retrying("score_company"); !regexp.MustCompile(`^1 \(next attempt in (59 min|1 h), at ([A-Z][a-z]{2} [0-9]+, )?[0-9]{2}:[0-9]{2} UTC\)$`).MatchString(got) {
		t.Errorf("waiting for a retry = %q, want 1 with the next attempt in an hour", got)
	}
	// The count lists their instances, which lead to the occurrences
	// with their next attempts, and offer to bring the retries forward.
	link := page.doc.Find(`[data-testid=health-row][data-key=score_company] [data-testid=health-retrying] a`)
	href, _ := link.Attr("href")
	list := b.mustGet(href, 200)
	if got := count(list, "instance-row"); got != 1 || !strings.Contains(list.body, instanceID) {
		t.Errorf("the count's link %s lists %d instances, want the one whose retry waits", href, got)
	}
	occs, _ := list.doc.Find(`[data-testid=retrying-occurrences]`).Attr("href")
	if o := b.mustGet(occs, 200); count(o, "occurrence-row") != 1 || !strings.Contains(o.body, occID) || !strings.Contains(o.body, "next attempt") {
		t.Errorf("the list's link %s lists %d occurrences, want %s alone with its next attempt", occs, count(o, "occurrence-row"), occID)
	}
	if label := collapse(list.doc.Find(`[data-testid=bulk-retry]`).Text()); label != "Retry now every instance whose retry waits…" {
		t.Errorf("bulk retry offered as %q", label)
	}
	if count(list, "bulk-abandon") != 0 {
		t.Error("an abandon offered over running instances")
	}
	fr := signedIn(t, env.URL, "fr", env.Operator).mustGet("/console/health", 200)
	if got := collapse(fr.doc.Find(`[data-testid=health-row][data-key=score_company] [data-testid=health-retrying]`).Text()); !regexp.MustCompile(`^1 \(prochaine tentative dans .*, à ([0-9]+ [^ ]+, )?[0-9]{2}:[0-9]{2} UTC\)$`).MatchString(got) {
		t.Errorf("French: %q", got)
	}
}
