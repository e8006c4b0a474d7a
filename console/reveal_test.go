package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

// revealForms returns side+field of every reveal form of a page, and fails
// when one sits on a row that is not masked as sensitive.
func revealForms(t *testing.T, r response) []string {
	t.Helper()
	var got []string
	r.doc.Find(`[data-testid=reveal-form]`).Each(func(_ int, s *goquery.Selection) {
		side, _ := s.Find(`input[name=side]`).Attr("value")
		field, _ := s.Find(`input[name=field]`).Attr("value")
		csrf, _ := s.Find(`input[name=csrf]`).Attr("value")
		if csrf == "" {
			t.Errorf("reveal form for %s %s without CSRF token", side, field)
		}
		if marker := s.Closest("td").Find(`[data-testid=masked]`).Text(); !strings.Contains(marker, "sensitive") && !strings.Contains(marker, "sensible") {
			t.Errorf("reveal form for %s %s on a row showing %q", side, field, marker)
		}
		// The dots are for eyes: a screen reader read "bullet bullet
		// bullet" before the words (QA, an accessibility audit).
		if dots := s.Closest("td").Find(`[data-testid=masked] > [aria-hidden=true]`).Text(); dots != "•••" {
			t.Errorf("reveal form for %s %s: the marker's dots are not hidden from screen readers (%q)", side, field, dots)
		}
		got = append(got, side+" "+field)
	})
	return got
}

// reveals returns the audit records of an occurrence, through the API.
func reveals(t *testing.T, f *fixture, occ string) []any {
	t.Helper()
	return f.env.Must(200, "GET", "/api/v1/audit/reveals?occurrence="+occ, f.env.Admin, nil).JSON(t)["items"].([]any)
}

func TestRevealControlsOnlyForAdminsOnSensitiveRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := signedIn(t, f.env.URL, "en", f.env.Admin)
	r := admin.mustGet("/console/occurrences/"+f.completed, 200)
	got := revealForms(t, r)
	want := []string{"inputs /contact", "outputs /note"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("reveal forms %v; want %v (sensitive rows only, none on secret rows)", got, want)
	}
	r.doc.Find(`[data-testid=value-row]`).Each(func(_ int, s *goquery.Selection) {
		if strings.Contains(s.Find(`[data-testid=masked]`).Text(), "secret") && s.Find(`form`).Length() > 0 {
			t.Errorf("a secret row %q has a form", s.AttrOr("data-field", ""))
		}
	})
	if label := text(r, "reveal"); !strings.Contains(label, "Reveal — this is recorded") {
		t.Errorf("reveal button %q", label)
	}
	// The reason's label shows: a placeholder is cut on a phone and goes
	// once one types.
	r.doc.Find(`[data-testid=reveal-reason]`).Each(func(_ int, s *goquery.Selection) {
		id, _ := s.Attr("id")
		label := r.doc.Find(`label[for="` + id + `"]`)
		visible := collapse(label.Clone().Children().Remove().End().Text())
		if id == "" || label.Length() != 1 || label.HasClass("visually-hidden") || visible != "Why (recorded with the reveal)" {
			t.Errorf("reason field %q: label %q shown %q, want a visible label", id, collapse(label.Text()), visible)
		}
		// Its accessible name says which value, set apart from the reason.
		if name := label.Text(); !strings.HasPrefix(name, "Why (recorded with the reveal) — ") {
			t.Errorf("reason field %q: accessible name %q, want the label, a spaced dash and the field", id, name)
		}
		if _, ok := s.Attr("placeholder"); ok {
			t.Errorf("reason field %q still has a placeholder", id)
		}
		// The reason outlives retention: said where it is typed.
		described, _ := s.Attr("aria-describedby")
		if hint := collapse(r.doc.Find("#" + id + "-hint").Text()); !strings.Contains(described, id+"-hint") || !strings.Contains(hint, "write no customer data in it") {
			t.Errorf("reason field %q described by %q, hint %q; want the hint that it is kept", id, described, hint)
		}
		if _, ok := s.Attr("aria-label"); ok {
			t.Errorf("reason field %q is named by aria-label, not its visible label", id)
		}
	})
	action, _ := r.doc.Find(`[data-testid=reveal-form]`).First().Attr("action")
	method, _ := r.doc.Find(`[data-testid=reveal-form]`).First().Attr("method")
	// No fragment: a browser ignores autofocus when the address points at
	// an element, and the refused reason or the revealed value must take
	// the focus (it scrolls into view with it).
	if action != "/console/occurrences/"+f.completed+"/reveal" || method != "post" {
		t.Errorf("reveal form: %s %s", method, action)
	}
	if got := revealForms(t, admin.mustGet("/console/occurrences/"+f.available, 200)); len(got) != 1 || got[0] != "inputs /contact" {
		t.Errorf("reveal forms of an occurrence without outputs: %v", got)
	}
	// The instance page lays out the same values but reveals nothing.
	if n := count(admin.mustGet("/console/instances/"+f.completedInst, 200), "reveal-form"); n != 0 {
		t.Errorf("%d reveal forms on the instance page", n)
	}
	fr := signedIn(t, f.env.URL, "fr", f.env.Admin).mustGet("/console/occurrences/"+f.completed, 200)
	if label := text(fr, "reveal"); !strings.Contains(label, "Révéler — cette action est consignée") {
		t.Errorf("French reveal button %q", label)
	}

	operator := signedIn(t, f.env.URL, "en", f.env.Operator)
	for _, p := range f.pages() {
		if r := operator.get(p.path); r.doc != nil && count(r, "reveal-form")+count(r, "reveal") != 0 {
			t.Errorf("operator sees a reveal control on %s", p.name)
		}
	}
}

func TestRevealShowsTheValueOnceAndRecordsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Admin)
	page := "/console/occurrences/" + f.completed
	action := page + "/reveal"
	csrf := csrfOf(t, b.mustGet(page, 200))

	// Without the session's CSRF token: refused, nothing revealed.
	for name, form := range map[string]url.Values{
		"missing": {"side": {"inputs"}, "field": {"/contact"}},
		"wrong":   {"csrf": {"forged"}, "side": {"inputs"}, "field": {"/contact"}},
	} {
		r := b.do("POST", action, form)
		if r.status != http.StatusForbidden || text(r, "page-title") != "Form refused" || strings.Contains(r.body, canarySensitive) {
			t.Errorf("reveal with %s token: %d %q", name, r.status, text(r, "page-title"))
		}
	}
	if n := len(reveals(t, f, f.completed)); n != 0 {
		t.Fatalf("%d audit records after refused forms", n)
	}

	// Without a reason (blank passes the browser's required): refused,
	// nothing revealed or recorded; the page shows the row's form again,
	// the error announced and tied to the field, which takes the focus
	// and keeps what was typed, at the row the form's action points to.
	for _, why := range []string{"", "   ", strings.Repeat("é", 1001)} {
		form := url.Values{"csrf": {csrf}, "side": {"inputs"}, "field": {"/contact"}, "reason": {why}}
		r := b.do("POST", action, form)
		want := "Say why you reveal this value"
		if why != "" && strings.TrimSpace(why) != "" {
			want = "The reason is too long: 1,001 characters, for at most 1,000."
		}
		if r.status != http.StatusUnprocessableEntity || r.doc == nil || strings.Contains(r.body, canarySensitive) {
			t.Fatalf("reveal with reason %q: %d %q", why, r.status, text(r, "page-title"))
		}
		checkRevealRefusal(t, r, want, why)
	}
	if n := len(reveals(t, f, f.completed)); n != 0 {
		t.Fatalf("%d audit records after reveals without a reason", n)
	}
	if n := count(b.mustGet(page, 200), "reveal-reason"); n != count(b.mustGet(page, 200), "reveal-form") || n == 0 {
		t.Errorf("no reason field on the reveal forms")
	}

	r := b.do("POST", action, url.Values{"csrf": {csrf}, "side": {"inputs"}, "field": {"/contact"}, "reason": {"support ticket 42"}})
	if r.status != http.StatusOK {
		t.Fatalf("reveal: %d %.500s", r.status, r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the revealed page may be cached: Cache-Control %q", cc)
	}
	if r.header.Get("Location") != "" || strings.Contains(r.header.Get("Set-Cookie"), "CANARY") {
		t.Errorf("the value travels in a header: Location %q, Set-Cookie %q", r.header.Get("Location"), r.header.Get("Set-Cookie"))
	}
	// An object shows a member a line, indented.
	if got := r.doc.Find(`[data-testid="revealed-value"]`).Text(); got != "{\n  \"name\": \""+canarySensitive+"\"\n}" {
		t.Errorf("revealed value %q", got)
	}
	row := r.doc.Find(`[data-testid=revealed]`).Closest(`[data-testid=value-row]`)
	if field, _ := row.Attr("data-field"); field != "contact" || count(r, "revealed") != 1 {
		t.Errorf("revealed in row %q (%d revealed rows); want contact only", field, count(r, "revealed"))
	}
	// The value takes the focus and is announced, at the row the form's
	// action points to.
	res := r.doc.Find(`[data-testid=reveal-result]`)
	if res.AttrOr("role", "") != "status" || res.AttrOr("tabindex", "") != "-1" || !res.Is("[autofocus]") || r.doc.Find("[autofocus]").Length() != 1 {
		t.Errorf("the revealed value is not the page's one autofocused status: role %q, tabindex %q, %d autofocus",
			res.AttrOr("role", ""), res.AttrOr("tabindex", ""), r.doc.Find("[autofocus]").Length())
	}
	if a := revealActionOf(t, b.mustGet(page, 200), "/contact"); strings.Contains(a, "#") {
		t.Errorf("the reveal form's action %q has a fragment, which keeps autofocus from taking the focus", a)
	}
	notice := text(r, "reveal-notice")
	if !strings.HasPrefix(notice, "Revealed by admin at ") || !strings.HasSuffix(notice, "UTC; recorded in the audit log.") {
		t.Errorf("notice %q", notice)
	}
	// The other sensitive value stays masked, and no secret shows.
	if !strings.Contains(text(r, "outputs"), "hidden (sensitive)") || strings.Count(r.body, canarySensitive) != 1 {
		t.Errorf("more than the one value is revealed")
	}
	for _, leak := range []string{canarySecret, "SECRET-7q3z"} {
		if strings.Contains(r.body, leak) {
			t.Errorf("the reveal page contains %q", leak)
		}
	}

	recs := reveals(t, f, f.completed)
	if len(recs) != 1 {
		t.Fatalf("%d audit records after one reveal", len(recs))
	}
	rec := recs[0].(map[string]any)
	if rec["principal"] != "admin" || rec["side"] != "inputs" || rec["field"] != "/contact" || rec["occurrence_id"] != f.completed || rec["reason"] != "support ticket 42" {
		t.Errorf("audit record %v", rec)
	}

	// The value is shown in that response only.
	if again := b.mustGet(page, 200); strings.Contains(again.body, canarySensitive) || count(again, "revealed") != 0 {
		t.Errorf("the occurrence page still shows the revealed value")
	}
	if r := b.get(action); r.status != http.StatusSeeOther || r.header.Get("Location") != page {
		t.Errorf("GET of the reveal address: %d %q", r.status, r.header.Get("Location"))
	}
	if strings.Contains(f.env.Logs.String(), canarySensitive) {
		t.Errorf("the logs hold the revealed value")
	}

	// In French, with an output.
	fr := signedIn(t, f.env.URL, "fr", f.env.Admin)
	rf := fr.do("POST", action, url.Values{"csrf": {csrfOf(t, fr.mustGet(page, 200))}, "side": {"outputs"}, "field": {"/note"}, "reason": {"demande RGPD"}})
	if rf.status != http.StatusOK || text(rf, "revealed-value") != canarySensitive || !strings.HasPrefix(text(rf, "reveal-notice"), "Révélé par admin le ") ||
		!strings.HasSuffix(text(rf, "reveal-notice"), "UTC\u202f; consigné dans le journal d’audit.") {
		t.Errorf("French reveal: %d %q %q", rf.status, text(rf, "revealed-value"), text(rf, "reveal-notice"))
	}
	checkNoWords(t, "French reveal page", rf.doc, englishWords)
	if n := len(reveals(t, f, f.completed)); n != 2 {
		t.Errorf("%d audit records after two reveals", n)
	}
}

func TestRevealRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	occurrence := "/console/occurrences/" + f.completed
	action := occurrence + "/reveal"
	admin := signedIn(t, f.env.URL, "en", f.env.Admin)
	csrf := csrfOf(t, admin.mustGet(occurrence, 200))
	for _, tt := range []struct {
		name, side, field string
		status            int
	}{
		{"secret", "inputs", "/api_key", http.StatusForbidden},
		{"nested secret", "outputs", "/receipt/signature", http.StatusForbidden},
		{"normal", "inputs", "/company", http.StatusUnprocessableEntity},
		{"inside a sensitive row", "inputs", "/contact/name", http.StatusUnprocessableEntity},
		{"unknown", "inputs", "/nowhere", http.StatusUnprocessableEntity},
		{"bad side", "everything", "/contact", http.StatusUnprocessableEntity},
	} {
		r := admin.do("POST", action, url.Values{"csrf": {csrf}, "side": {tt.side}, "field": {tt.field}})
		if r.status != tt.status || strings.Contains(r.body, canarySensitive) || strings.Contains(r.body, canarySecret) {
			t.Errorf("%s: %d, want %d", tt.name, r.status, tt.status)
		}
		// The refusal leads back to the occurrence the form was on.
		if back := r.doc.Find(`main a[href="` + occurrence + `"]`); back.Length() != 1 || back.Text() != "Back to the occurrence" {
			t.Errorf("%s: %d links back to the occurrence (%q)", tt.name, back.Length(), back.Text())
		}
	}
	fr := signedIn(t, f.env.URL, "fr", f.env.Admin)
	r := fr.do("POST", action, url.Values{"csrf": {csrfOf(t, fr.mustGet(occurrence, 200))}, "side": {"inputs"}, "field": {"/api_key"}})
	if back := r.doc.Find(`main a[href="` + occurrence + `"]`); r.status != http.StatusForbidden || back.Text() != "Retour à l’occurrence" {
		t.Errorf("French secret refusal: %d, link back %q", r.status, back.Text())
	}
	if r := admin.do("POST", "/console/occurrences/00000000-0000-7000-8000-000000000000/reveal",
		url.Values{"csrf": {csrf}, "side": {"inputs"}, "field": {"/contact"}}); r.status != http.StatusNotFound {
		t.Errorf("unknown occurrence: %d", r.status)
	}

	operator := signedIn(t, f.env.URL, "en", f.env.Operator)
	opCSRF := csrfOf(t, operator.mustGet("/console/occurrences/"+f.completed, 200))
	r = operator.do("POST", action, url.Values{"csrf": {opCSRF}, "side": {"inputs"}, "field": {"/contact"}})
	if r.status != http.StatusForbidden || strings.Contains(r.body, canarySensitive) {
		t.Errorf("operator reveal: %d", r.status)
	}
	if back := r.doc.Find(`main a[href="` + occurrence + `"]`); back.Length() != 1 {
		t.Error("the operator's refusal does not lead back to the occurrence")
	}
	if n := len(reveals(t, f, f.completed)); n != 0 {
		t.Errorf("%d audit records after refusals; want none", n)
	}
}

// TestRevealLogPage: administrators read the reveal log in the console,
// as through GET /api/v1/audit/reveals: who, when, which field and why,
// never the value, in both languages; operators may not open it.
func TestRevealLogPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := signedIn(t, f.env.URL, "en", f.env.Admin)
	if r := admin.mustGet("/console/reveals", 200); count(r, "reveal-row") != 0 || text(r, "empty") != "No value was revealed." {
		t.Errorf("empty log: %d rows, %q", count(r, "reveal-row"), text(r, "empty"))
	}
	page := "/console/occurrences/" + f.completed
	admin.do("POST", page+"/reveal", url.Values{"csrf": {csrfOf(t, admin.mustGet(page, 200))}, "side": {"inputs"}, "field": {"/contact"}, "reason": {"<b>ticket</b> 42"}})
	checked := map[string]int{}
	for _, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Admin)
		r := b.mustGet("/console/reveals", 200)
		if count(r, "reveal-row") != 1 || text(r, "reveal-reason-recorded") != "<b>ticket</b> 42" || !strings.HasPrefix(text(r, "reveal-who"), "admin (") {
			t.Errorf("%s: %d rows, reason %q, who %q", lang, count(r, "reveal-row"), text(r, "reveal-reason-recorded"), text(r, "reveal-who"))
		}
		// Said as the occurrence page names the field and the audit log
		// names who acted.
		who, field := map[string][2]string{"en": {"(token #", ", administrator)"}, "fr": {"(jeton n°\u00a0", ", administrateur)"}}[lang],
			map[string]string{"en": "Inputs /contact", "fr": "Entrées /contact"}[lang]
		if got := strings.TrimSpace(r.doc.Find(`[data-testid="reveal-who"]`).Text()); !strings.Contains(got, who[0]) || !strings.HasSuffix(got, who[1]) {
			t.Errorf("%s: who %q, want admin %s…%s", lang, got, who[0], who[1])
		}
		if got := collapse(r.doc.Find(`[data-testid=reveal-row] td code`).Eq(1).Text()); got != field {
			t.Errorf("%s: field %q, want %q", lang, got, field)
		}
		if r.doc.Find(`[data-testid=reveal-row] a[href="`+page+`"]`).Length() != 1 || strings.Contains(r.body, canarySensitive) {
			t.Errorf("%s: the row does not link to its occurrence, or shows the value", lang)
		}
		if count(r, "nav-reveals") != 1 {
			t.Errorf("%s: no Reveals link in the navigation", lang)
		}
		checkLabelled(t, lang+" reveals", r.doc, checked)
		if lang == "fr" {
			checkNoWords(t, "French reveal log", r.doc, englishWords)
		}
	}
	if r := admin.mustGet("/console/reveals?before=0", 400); text(r, "filter-errors") == "" || count(r, "reveal-row") != 0 {
		t.Errorf("before=0: %d rows, errors %q", count(r, "reveal-row"), text(r, "filter-errors"))
	}
	op := signedIn(t, f.env.URL, "en", f.env.Operator)
	if r := op.get("/console/reveals"); r.status != http.StatusForbidden || count(op.mustGet("/console/audit", 200), "nav-reveals") != 0 {
		t.Errorf("operator: /console/reveals %d, or a Reveals link shown", r.status)
	}
	// Once retention deleted the occurrence, its record stays, marked, and
	// links to no page that is gone.
	if n, err := f.env.Engine.DeleteEnded(context.Background(), -time.Minute); err != nil || n == 0 {
		t.Fatalf("retention deleted %d (%v)", n, err)
	}
	r := admin.mustGet("/console/reveals", 200)
	if count(r, "reveal-row") != 1 || text(r, "reveal-deleted") != "(deleted)" || r.doc.Find(`[data-testid=reveal-row] a[href="`+page+`"]`).Length() != 0 {
		t.Errorf("a record of a deleted occurrence: %d rows, %q, or still a link", count(r, "reveal-row"), text(r, "reveal-deleted"))
	}
}

// reloadEvery saves the display setting that reloads live pages every
// seconds.
func reloadEvery(t *testing.T, b *browser, seconds string) {
	t.Helper()
	action, form := formOf(t, b.mustGet("/console/preferences", 200), "prefs-form")
	form.Set("refresh", seconds)
	if r := b.do("POST", action, form); r.status != http.StatusSeeOther {
		t.Fatalf("save the display settings: %d", r.status)
	}
}

// TestRevealPagesNeverReload: a reload would lose the reason an admin is
// typing, and the revealed value (it would GET the reveal's address,
// which leads back to the masked occurrence).
func TestRevealPagesNeverReload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	page := "/console/occurrences/" + f.completed
	reloads := func(r response) bool {
		return r.doc.Find(`meta[http-equiv=refresh]`).Length() > 0 || count(r, "refresh-note") > 0
	}

	operator := signedIn(t, f.env.URL, "en", f.env.Operator)
	reloadEvery(t, operator, "5")
	if !reloads(operator.mustGet(page, 200)) {
		t.Error("the occurrence page does not reload for an operator, who is offered no reveal")
	}
	admin := signedIn(t, f.env.URL, "en", f.env.Admin)
	reloadEvery(t, admin, "5")
	if !reloads(admin.mustGet("/console/occurrences", 200)) {
		t.Error("the list of occurrences does not reload for an admin")
	}
	r := admin.mustGet(page, 200)
	if count(r, "reveal-form") == 0 || reloads(r) {
		t.Errorf("an occurrence page with %d reveal forms reloads itself", count(r, "reveal-form"))
	}
	revealed := admin.do("POST", page+"/reveal", url.Values{"csrf": {csrfOf(t, r)}, "side": {"inputs"}, "field": {"/contact"}, "reason": {"ticket 7"}})
	if revealed.status != http.StatusOK || count(revealed, "revealed-value") != 1 {
		t.Fatalf("reveal: %d %q", revealed.status, text(revealed, "page-title"))
	}
	if reloads(revealed) {
		t.Error("the page showing a revealed value reloads itself: the value would vanish")
	}
}

// revealActionOf is the action of the reveal form of field on page.
func revealActionOf(t *testing.T, page response, field string) string {
	t.Helper()
	form := page.doc.Find(`[data-testid=reveal-form]`).FilterFunction(func(_ int, s *goquery.Selection) bool {
		return s.Find(`input[name=field]`).AttrOr("value", "") == field
	})
	if form.Length() != 1 {
		t.Fatalf("%d reveal forms for %s", form.Length(), field)
	}
	return form.AttrOr("action", "")
}

// checkRevealRefusal checks a reveal refused for its reason: the page of
// the occurrence again, its row's form with the error (role=alert) tied
// to the field (aria-describedby, aria-invalid), the field autofocused
// and holding the reason typed, the form's action pointing to its row.
func checkRevealRefusal(t *testing.T, r response, want, typed string) {
	t.Helper()
	alert := r.doc.Find(`[data-testid=reveal-error]`)
	if alert.Length() != 1 || alert.AttrOr("role", "") != "alert" || !strings.Contains(alert.Text(), want) {
		t.Errorf("reason %q: error %q (%d, role %q), want %q in an alert", typed, alert.Text(), alert.Length(), alert.AttrOr("role", ""), want)
		return
	}
	form := alert.Closest(`[data-testid=reveal-form]`)
	field := form.Find(`[data-testid=reveal-reason]`)
	// The error first, then the hint that the reason is kept.
	if got := strings.Fields(field.AttrOr("aria-describedby", "")); len(got) == 0 || got[0] != alert.AttrOr("id", "-") {
		t.Errorf("reason %q: the field is described by %q, the error is %q", typed, got, alert.AttrOr("id", ""))
	}
	if field.AttrOr("aria-invalid", "") != "true" || !field.Is("[autofocus]") || r.doc.Find("[autofocus]").Length() != 1 {
		t.Errorf("reason %q: field aria-invalid %q, autofocus %v (%d on the page)", typed, field.AttrOr("aria-invalid", ""), field.Is("[autofocus]"), r.doc.Find("[autofocus]").Length())
	}
	if got := field.AttrOr("value", ""); got != typed {
		t.Errorf("the reason typed %q is shown as %q", typed, got)
	}
	if a := form.AttrOr("action", ""); strings.Contains(a, "#") {
		t.Errorf("the refused form's action %q has a fragment, which keeps autofocus from taking the focus", a)
	}
	if n := r.doc.Find(`[data-testid=reveal-error]`).Length(); n != 1 {
		t.Errorf("%d reveal errors on the page, want the row's only", n)
	}
}

// An attempt's worker id and error code wrap rather than scroll in their
// cell (on a phone the cell could not be reached with a keyboard).
func TestAttemptCodesWrap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	page := b.mustGet("/console/occurrences/"+f.failed, 200)
	row := page.doc.Find(`[data-testid=attempt-row]`).First()
	if n := row.Find(`code.wrap`).Length(); n < 2 {
		h, _ := row.Html()
		t.Errorf("the failed attempt's worker id and error code: %d wrapping codes, want 2: %s", n, h)
	}
}
