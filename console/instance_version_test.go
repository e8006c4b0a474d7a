package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/relais/relais/internal/relaistest"
)

// TestInstancesOfOneVersion: a process version's page links to its own
// instances, the list filters by version (and says a version needs its
// process), and a bulk action from that list keeps the version.
func TestInstancesOfOneVersion(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	v1 := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	doc := relaistest.CRMProcess(nil)
	doc["name"] = "CRM, version 2"
	env.Process("crm_only", doc)
	v2 := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Globex"}}).JSON(t)["id"].(string)
	b := signedIn(t, env.URL, "en", env.Operator)

	page := b.mustGet("/console/processes/crm_only/versions/1", 200)
	href, _ := page.doc.Find(`[data-testid=process-instances]`).Attr("href")
	if href != "/console/instances?process=crm_only&version=1" {
		t.Fatalf("version 1's instances link: %q", href)
	}
	list := b.mustGet(href, 200)
	if got := list.body; count(list, "instance-row") != 1 || !strings.Contains(got, v1[len(v1)-8:]) || strings.Contains(got, v2[len(v2)-8:]) {
		t.Errorf("version 1's instances: %d rows", count(list, "instance-row"))
	}
	if v, _ := list.doc.Find(`[data-testid=filter-version]`).Attr("value"); v != "1" {
		t.Errorf("the version field holds %q, want 1", v)
	}
	bulk, _ := list.doc.Find(`[data-testid=bulk-stop]`).Attr("href")
	if !strings.Contains(bulk, "version=1") {
		t.Errorf("the bulk stop link lost the version: %q", bulk)
	}
	confirm := b.mustGet(bulk, 200)
	if !strings.Contains(text(confirm, "bulk-count"), "1 ") || !strings.Contains(text(confirm, "bulk-filter-version"), "1") {
		t.Errorf("the bulk stop of version 1 counts %q, filter version %q", text(confirm, "bulk-count"), text(confirm, "bulk-filter-version"))
	}
	// The criteria given, the others in one line (operator QA: eight
	// rows of "any" pushed the count below a phone's first screen).
	var labels []string
	confirm.doc.Find(`[data-testid=bulk-confirm] dl.facts dt`).Each(func(_ int, s *goquery.Selection) { labels = append(labels, s.Text()) })
	if got := strings.Join(labels, ", "); got != "Process, Version, Other criteria" || text(confirm, "bulk-filter-others") != "none given" {
		t.Errorf("the bulk stop's filter lists %q (others %q); want the criteria given, then the others as any", got, text(confirm, "bulk-filter-others"))
	}
	// A key or a version nothing has is refused, not counted 0, with the
	// key it is likely a typo of.
	for q, want := range map[string]string{
		"process=crm_ony":            "No process has the key “crm_ony”. Did you mean “crm_only”?",
		"process=crm_only&version=9": "Process crm_only has no version 9.",
		"held_at=add_company_to_cmr": "No definition has the key “add_company_to_cmr”. Did you mean “add_company_to_crm”?",
	} {
		r := b.get("/console/instances/bulk?action=stop&" + q)
		if r.status != http.StatusBadRequest || text(r, "error-message") != want {
			t.Errorf("bulk stop of %s: %d %q, want 400 %q", q, r.status, text(r, "error-message"), want)
		}
	}
	for q, want := range map[string]string{
		"version=1":                  "A version is a process’s: choose the process too.",
		"process=crm_only&version=x": "The version must be a whole number from 1.",
		// A key nothing has lists nothing, which reads as "none left".
		"process=crm_ony":            "No process has the key “crm_ony”. Did you mean “crm_only”?",
		"process=crm_only&version=9": "Process crm_only has no version 9.",
		"held_at=add_company_to_cmr": "No definition has the key “add_company_to_cmr”. Did you mean “add_company_to_crm”?",
		// A node's name, with nothing close: what the filter takes.
		"held_at=crm": "No definition has the key “crm”. This filter takes the key of a definition: the one the node an instance is held at runs, not the node’s name.",
	} {
		r := b.get("/console/instances?" + q)
		if r.status != http.StatusBadRequest && r.status != http.StatusOK || text(r, "filter-errors") != want {
			t.Errorf("/console/instances?%s: %d %q, want %q", q, r.status, text(r, "filter-errors"), want)
		}
		invalidFields(t, r, "/console/instances?"+q)
	}
	for q, want := range map[string]string{
		"definition=add_company_to_cmr":            "No definition has the key “add_company_to_cmr”. Did you mean “add_company_to_crm”?",
		"definition=add_company_to_crm&revision=7": "Definition add_company_to_crm has no revision 7.",
		"process=crm_ony":                          "No process has the key “crm_ony”. Did you mean “crm_only”?",
	} {
		r := b.get("/console/occurrences?" + q)
		if r.status != http.StatusBadRequest && r.status != http.StatusOK || text(r, "filter-errors") != want {
			t.Errorf("/console/occurrences?%s: %d %q, want %q", q, r.status, text(r, "filter-errors"), want)
		}
		invalidFields(t, r, "/console/occurrences?"+q)
	}
}

// invalidFields checks that the filter fields of the query's parameters
// (each but the ones the query names with a valid value, which an error
// about another field does not touch) say they are invalid and point at
// the errors: a screen reader said nothing on the field (QA, an
// accessibility audit). The field named last in the query is the one
// these cases get wrong.
func invalidFields(t *testing.T, r response, page string) {
	t.Helper()
	u, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	params := strings.Split(u.RawQuery, "&")
	name, _, _ := strings.Cut(params[len(params)-1], "=")
	field := r.doc.Find(`[name="` + name + `"]`)
	if got, _ := field.Attr("aria-invalid"); got != "true" {
		t.Errorf("%s: the %s field is not marked invalid", page, name)
	}
	if got, _ := field.Attr("aria-describedby"); got != "filter-errors" || r.doc.Find(`#filter-errors`).Length() != 1 {
		t.Errorf("%s: the %s field does not point at the errors (%q)", page, name, got)
	}
	if n := r.doc.Find(`[aria-invalid=true]`).Length(); n > 2 {
		t.Errorf("%s: %d fields marked invalid", page, n)
	}
}

// A version's page says whether it is the latest, its description, and
// links the versions beside it; the processes list reaches the versions
// older than its ten links (evolution QA: version 1 of 11 had no link, and
// a rollback looked like the roll-forward after it).
func TestProcessVersionsAreNavigable(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	for n := 1; n <= 12; n++ {
		doc := relaistest.CRMProcess(nil)
		doc["description"] = "step " + strconv.Itoa(n)
		env.Process("crm_only", doc)
	}
	en := signedIn(t, env.URL, "en", env.Operator)
	list := en.mustGet("/console/processes", 200)
	var labels []string
	list.doc.Find(`[data-process-key=crm_only] [data-testid=process-version-link], [data-key=crm_only] [data-testid=process-version-link]`).Each(func(_ int, s *goquery.Selection) {
		labels = append(labels, s.Text()+" "+s.AttrOr("href", ""))
	})
	if len(labels) != 11 || labels[0] != "version 12 /console/processes/crm_only/versions/12" ||
		labels[10] != "older versions, from version 2 (each links the one before) /console/processes/crm_only/versions/2" {
		t.Errorf("the list's version links: %q", labels)
	}
	page := en.mustGet("/console/processes/crm_only/versions/2", 200)
	if got := text(page, "latest"); got != "no: the latest is version 12" {
		t.Errorf("version 2's latest: %q", got)
	}
	if got := text(page, "description"); got != "step 2" {
		t.Errorf("version 2's description: %q", got)
	}
	var neighbours []string
	page.doc.Find(`[data-testid=version-neighbour]`).Each(func(_ int, s *goquery.Selection) { neighbours = append(neighbours, s.AttrOr("href", "")) })
	if strings.Join(neighbours, " ") != "/console/processes/crm_only/versions/1 /console/processes/crm_only/versions/3" {
		t.Errorf("version 2's neighbours: %q", neighbours)
	}
	fr := signedIn(t, env.URL, "fr", env.Operator)
	last := fr.mustGet("/console/processes/crm_only/versions/12", 200)
	if got := text(last, "latest"); got != "oui\u202f: un démarrage qui ne nomme aucune version exécute celle-ci" || count(last, "version-neighbour") != 1 {
		t.Errorf("the latest, in French: %q, %d neighbours", got, count(last, "version-neighbour"))
	}
	if got := text(fr.mustGet("/console/processes/crm_only/versions/1", 200), "version-neighbours"); got != "version 2 →" {
		t.Errorf("version 1's neighbours: %q", got)
	}
}

// A definition's page says which process versions pin each revision
// (evolution QA: nothing said who was still bound to an old one).
func TestDefinitionSaysWhichVersionsPinEachRevision(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	for n := 1; n <= 3; n++ {
		doc := relaistest.CRMProcess(nil)
		doc["description"] = "step " + strconv.Itoa(n)
		env.Process("crm_only", doc)
	}
	env.AddInput(key, "region")
	for i, lang := range []string{"en", "fr"} {
		page := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/definitions/"+key, 200)
		var pins []string
		page.doc.Find(`[data-testid=pinned-by]`).Each(func(_ int, s *goquery.Selection) { pins = append(pins, strings.TrimSpace(s.Text())) })
		want := [][]string{{"no process version", "crm_only versions 1–3"}, {"aucune version de processus", "crm_only versions 1–3"}}[i]
		if strings.Join(pins, " | ") != strings.Join(want, " | ") {
			t.Errorf("%s: pinned by %q, want %q (newest revision first)", lang, pins, want)
		}
	}
}

// A node whose policy cannot work as written says so on its version's
// page, as relais apply does (evolution QA).
func TestAFutilePolicyIsFlagged(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(map[string]any{"max_attempts": 3, "retry_delay": "PT5M", "deadline": "PT2M"}))
	env.Process("crm_ok", relaistest.CRMProcess(map[string]any{"max_attempts": 3, "retry_delay": "PT1M", "deadline": "PT2M"}))
	b := signedIn(t, env.URL, "en", env.Operator)
	if got := text(b.mustGet("/console/processes/crm_only/versions/1", 200), "policy-warning"); got != "No retry can run: the deadline ends the occurrence before its retry delay passes." {
		t.Errorf("a futile retry: warning %q", got)
	}
	if n := count(b.mustGet("/console/processes/crm_ok/versions/1", 200), "policy-warning"); n != 0 {
		t.Errorf("a retry before the deadline is flagged (%d)", n)
	}
}
