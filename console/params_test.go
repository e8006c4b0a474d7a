package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// refusedParam reports whether a page says that one of its parameters is
// not one it reads (unknown, repeated, unreadable) or that its page
// cursor is not one the console made.
func refusedParam(r response) string {
	if r.doc == nil {
		return ""
	}
	for _, id := range []string{"filter-errors", "diff-error", "error-message", "search-message"} {
		got := text(r, id)
		for _, s := range []string{"Unknown parameter", "is given", "cannot be read", "page cursor is invalid"} {
			if strings.Contains(got, s) {
				return got
			}
		}
	}
	return ""
}

// TestUnknownParametersAreRefused: a list page refuses a parameter it
// does not read (a misspelt filter would otherwise list everything), says
// which, with the one most likely meant, and lists nothing; a bulk action
// offers no form and applies nothing; a page cursor the console did not
// make is an error, not the first page.
func TestUnknownParametersAreRefused(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)

	for _, c := range []struct {
		path, row, want string
	}{
		{"/console/instances?proces=checkout", "instance-row", "Unknown parameter “proces” (did you mean “process”?)."},
		{"/console/instances?status=held&status=running", "instance-row", "The parameter “status” is given 2 times: give it once."},
		{"/console/occurrences?statut=failed", "occurrence-row", "Unknown parameter “statut” (did you mean “status”?)."},
		{"/console/occurrences?cursor=zzz", "occurrence-row", "Unknown parameter “cursor”."},
		{"/console/occurrences?status=%zz", "occurrence-row", "This address holds a parameter that cannot be read"},
		{"/console/occurrences?before=" + f.crmOcc + "&from=zzz", "occurrence-row", "The page cursor is invalid: go back to the first page."},
		{"/console/occurrences?from=51", "occurrence-row", "The page cursor is invalid: go back to the first page."},
		{"/console/audit?acton=x", "audit-row", "Unknown parameter “acton” (did you mean “action”?)."},
		// The API's name of a date filter, which no spelling distance finds.
		{"/console/instances?created_after=2026-12-01", "instance-row", "Unknown parameter “created_after” (did you mean “created_from”?)."},
		{"/console/audit?acted_before=2026-12-01", "audit-row", "Unknown parameter “acted_before” (did you mean “acted_to”?)."},
		{"/console/audit?before=0", "audit-row", "The page cursor is invalid: go back to the first page."},
		{"/console/audit?before=x1", "audit-row", "The page cursor is invalid: go back to the first page."},
		{"/console/workers?defintion=console_vault", "worker-row", "Unknown parameter “defintion” (did you mean “definition”?)."},
		{"/console/workers?after=zzz", "worker-row", "The page cursor is invalid: go back to the first page."},
		{"/console/definitions?sort=key", "definition-row", "Unknown parameter “sort”."},
		{"/console/definitions?after=!", "definition-row", "The page cursor is invalid: go back to the first page."},
		{"/console/processes?afer=a", "process-row", "Unknown parameter “afer” (did you mean “after”?)."},
		{"/console/processes?after=-", "process-row", "The page cursor is invalid: go back to the first page."},
		{"/console/health?defintion=charge_card", "health-row", "Unknown parameter “defintion” (did you mean “definition”?)."},
	} {
		r := b.mustGet(c.path, http.StatusBadRequest)
		if got := text(r, "filter-errors"); !strings.Contains(got, c.want) {
			t.Errorf("%s: errors %q, want %q", c.path, got, c.want)
		}
		if n := count(r, c.row); n != 0 {
			t.Errorf("%s: %d rows listed despite the refused parameter", c.path, n)
		}
	}
	if r := b.get("/console/health?defintion=charge_card"); count(r, "chart") != 0 {
		t.Error("health draws its chart despite the refused parameter")
	}
	if r := b.get("/console/instances?proces=checkout"); count(r, "bulk-actions") != 0 {
		t.Error("the instances list offers bulk actions over a refused filter")
	}
	// Nor over a filter nothing matches: its confirmation would count 0.
	if r := b.get("/console/instances?business_key=nothing-has-this-key"); count(r, "bulk-actions") != 0 {
		t.Error("the instances list offers bulk actions over an empty list")
	}
	// A very long name is said, cut.
	long := strings.Repeat("x", 500)
	if got := text(b.get("/console/audit?"+long+"=1"), "filter-errors"); !strings.Contains(got, strings.Repeat("x", 40)+"…") || strings.Contains(got, strings.Repeat("x", 41)) {
		t.Errorf("a 500-character parameter is said as %q", got)
	}

	admin := signedIn(t, f.env.URL, "en", f.env.Admin)
	for _, path := range []string{"/console/tokens?role=admin", "/console/tokens?after=x"} {
		r := admin.mustGet(path, http.StatusBadRequest)
		if refusedParam(r) == "" || count(r, "token-row") != 0 {
			t.Errorf("%s: errors %q, %d rows", path, text(r, "filter-errors"), count(r, "token-row"))
		}
	}

	// The definition page's comparison and the search box say so too.
	if r := b.mustGet("/console/definitions/console_vault?form=1&to=2", http.StatusBadRequest); !strings.Contains(text(r, "diff-error"), "Unknown parameter “form” (did you mean “from”?).") || count(r, "diff-summary") != 0 {
		t.Errorf("definition with ?form=: %q", text(r, "diff-error"))
	}
	if r := b.get("/console/search?query=lead-7"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "Unknown parameter “query”") {
		t.Errorf("search with ?query=: %d", r.status)
	}

	// In French, in French.
	fr := signedIn(t, f.env.URL, "fr", f.env.Operator)
	if got := text(fr.mustGet("/console/instances?proces=checkout", 400), "filter-errors"); got != "Paramètre inconnu\u202f: «\u202fproces\u202f» (vouliez-vous dire «\u202fprocess\u202f»\u202f?)." {
		t.Errorf("French error %q", got)
	}

	// A bulk action over a filter with a misspelt parameter counts
	// nothing and offers no form: it would stop every held instance of
	// every process.
	for _, path := range []string{"/console/instances/bulk?action=stop&status=held&proces=checkout",
		"/console/instances/bulk?action=stop&status=held&process=checkout&limit=1",
		"/console/instances/bulk?action=stop&status=held&process=checkout&process=scoring"} {
		r := b.get(path)
		if r.status != http.StatusBadRequest || count(r, "bulk-form") != 0 || refusedParam(r) == "" {
			t.Errorf("%s: %d, %d forms, %q", path, r.status, count(r, "bulk-form"), text(r, "error-message"))
		}
	}
	if got := text(b.get("/console/instances/bulk?action=stop&status=held&proces=checkout"), "error-message"); !strings.Contains(got, "Unknown parameter “proces” (did you mean “process”?).") {
		t.Errorf("bulk refusal says %q", got)
	}
	// Its form, posted with a field it does not have (or a parameter in
	// its address), applies nothing.
	confirm := b.mustGet("/console/instances/bulk?action=stop&status=held&process=checkout", http.StatusOK)
	action, form := formOf(t, confirm, "bulk-form")
	form.Set("reason", "maintenance")
	extra := url.Values{}
	for k, v := range form {
		extra[k] = v
	}
	extra.Set("proces", "scoring")
	for name, req := range map[string]struct {
		action string
		form   url.Values
	}{"field": {action, extra}, "address": {action + "?process=scoring", form}} {
		r := b.do("POST", req.action, req.form)
		if r.status != http.StatusBadRequest || refusedParam(r) == "" {
			t.Errorf("bulk form with an unknown %s: %d %q", name, r.status, text(r, "error-message"))
		}
	}
	for _, id := range f.pushHeld {
		if s := f.status(t, id); s != "held" {
			t.Errorf("instance %s is %s after refused bulk forms", id, s)
		}
	}

	// One instance's action: a misspelt seen would drop the check that
	// nobody acted meanwhile.
	inst := "/console/instances/" + f.pullHeld
	if r := b.get(inst + "/stop?sen=0"); r.status != http.StatusBadRequest || count(r, "stop-form") != 0 || refusedParam(r) == "" {
		t.Errorf("stop confirmation with ?sen=: %d %q", r.status, text(r, "error-message"))
	} else if href, _ := r.doc.Find(`main a[href="` + inst + `"]`).Attr("href"); href != inst {
		t.Error("the refusal does not lead back to the instance")
	}
	action, form = formOf(t, b.mustGet(inst+"/stop", http.StatusOK), "stop-form")
	form.Set("reason", "test")
	form.Set("last_actoin", "0")
	if r := b.do("POST", action, form); r.status != http.StatusBadRequest || refusedParam(r) == "" {
		t.Errorf("stop form with an unknown field: %d %q", r.status, text(r, "error-message"))
	}
	if s := f.status(t, f.pullHeld); s != "held" {
		t.Errorf("instance %s after a refused stop form", s)
	}
}

// TestConsoleLinksAndFormsAreNotRefused follows every link of every page
// to a console page with parameters, and sends every GET form as a
// browser would (every field, empty ones too): none may be refused for
// its parameters.
func TestConsoleLinksAndFormsAreNotRefused(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	// A bulk action, for the audit log's ?bulk= links; a second page of
	// occurrences, for the pager's links.
	b := signedIn(t, f.env.URL, "en", f.env.Admin)
	action, form := formOf(t, b.mustGet("/console/instances/bulk?action=stop&process=checkout&status=held", 200), "bulk-form")
	form.Set("reason", "links")
	done := b.do("POST", action, form)
	if done.status != http.StatusSeeOther {
		t.Fatalf("bulk stop: %d", done.status)
	}
	redirects := []string{done.header.Get("Location")}
	if r := b.get("/console/search?q=lead-7"); r.status == http.StatusSeeOther {
		redirects = append(redirects, r.header.Get("Location"))
	} else {
		t.Fatalf("search: %d", r.status)
	}

	// Breadth first from every page of the fixture, following what
	// carries parameters (a pager's links lead to the next pager's).
	type visit struct{ from, target string }
	queue := []visit{}
	for _, to := range redirects {
		queue = append(queue, visit{"a redirect", to})
	}
	for _, p := range append(slices.DeleteFunc(f.allPages(), func(p page) bool {
		// Its filters are wrong on purpose: its form sends them back.
		return p.name == "occurrences-more-filters"
	}), page{"tokens", "/console/tokens"}, page{"reveals", "/console/reveals"}, page{"consumers", "/console/consumers"}, page{"destinations", "/console/destinations"}, page{"occurrences-by-one", "/console/occurrences?limit=1"},
		page{"instances-by-one", "/console/instances?limit=1"}, page{"audit-by-one", "/console/audit?action=stop"}) {
		queue = append(queue, visit{p.name, p.path})
	}
	seen := map[string]bool{}
	for len(queue) > 0 && len(seen) < 500 {
		v := queue[0]
		queue = queue[1:]
		if seen[v.target] {
			continue
		}
		seen[v.target] = true
		r := b.get(v.target)
		if got := refusedParam(r); got != "" || r.status == http.StatusBadRequest {
			t.Errorf("%s (from %s): %d %q", v.target, v.from, r.status, got)
		}
		if r.doc == nil {
			continue
		}
		r.doc.Find(`a[href]`).Each(func(_ int, s *goquery.Selection) {
			href, _ := s.Attr("href")
			u, err := url.Parse(href)
			if err != nil || u.RawQuery == "" || !strings.HasPrefix(u.Path, "/console/") ||
				strings.HasPrefix(u.Path, "/console/lang/") || strings.HasPrefix(u.Path, "/console/static/") {
				return
			}
			u.Fragment = ""
			queue = append(queue, visit{v.target, u.String()})
		})
		r.doc.Find(`form[method=get]`).Each(func(_ int, s *goquery.Selection) {
			action, _ := s.Attr("action")
			u, _ := url.Parse(action)
			q := url.Values{}
			s.Find(`input[name], select[name]`).Each(func(_ int, in *goquery.Selection) {
				name, _ := in.Attr("name")
				val, _ := in.Attr("value")
				if goquery.NodeName(in) == "select" {
					opt := in.Find(`option[selected]`)
					if opt.Length() == 0 {
						opt = in.Find(`option`)
					}
					val, _ = opt.First().Attr("value")
				}
				q.Add(name, val)
			})
			u.RawQuery, u.Fragment = q.Encode(), ""
			queue = append(queue, visit{v.target + " (its form)", u.String()})
		})
	}
	if len(seen) < 40 {
		t.Errorf("followed %d links and forms: is the crawl broken?", len(seen))
	}
}
