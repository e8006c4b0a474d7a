package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

func TestDestinationListPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Admin)
	if r := b.mustGet("/console/destinations", 200); count(r, "destination-row") != 0 || text(r, "empty") != "No destination yet." {
		t.Errorf("no destination: %d rows, %q", count(r, "destination-row"), text(r, "empty"))
	}
	f.env.Must(201, "PUT", "/api/v1/destinations/scoring", f.env.Admin, map[string]any{
		"url": "https://scoring.example/v1/a-rather-long-path/that-goes-on?key=qs-secret-1", "max_timeout": "PT7.5S",
		"headers": map[string]string{"Authorization": "Bearer header-secret-2"}})
	f.env.Must(201, "PUT", "/api/v1/destinations/audit.sink", f.env.Admin, map[string]any{"url": "http://sink.internal/in", "max_timeout": "PT5S",
		"signing_secret": "signing-secret-3-0123456789abcdefghij"})

	checked := map[string]int{}
	for _, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Admin)
		r := b.mustGet("/console/destinations", 200)
		if count(r, "nav-destinations") != 1 {
			t.Errorf("%s: no Destinations link in the navigation", lang)
		}
		if strings.Contains(r.body, "qs-secret-1") || strings.Contains(r.body, "header-secret-2") || strings.Contains(r.body, "signing-secret-3") {
			t.Errorf("%s: the page shows a sealed value", lang)
		}
		names := r.doc.Find(`[data-testid=destination-row]`).Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("data-name", "") })
		if strings.Join(names, ",") != "audit.sink,scoring" {
			t.Errorf("%s: rows %v, want by name", lang, names)
		}
		row := r.doc.Find(`[data-testid=destination-row][data-name=scoring]`)
		// A masked query value is "***" for eyes, hidden from screen
		// readers (they read "star star star"), and words for them.
		cell := row.Find(`[data-testid=destination-url]`)
		if spoken, want := cell.Find(`.visually-hidden`).Text(), map[string]string{"en": "(masked value)", "fr": "(valeur masquée)"}[lang]; spoken != want || cell.Find(`[aria-hidden=true]`).Text() != "***" {
			t.Errorf("%s: the URL's mask reads %q to a screen reader, want %q with the stars hidden", lang, spoken, want)
		}
		cell.Find(`.visually-hidden`).Remove()
		url := strings.TrimSpace(cell.Text())
		headers := strings.TrimSpace(row.Find(`[data-testid=destination-headers]`).Text())
		timeout := collapse(row.Find(`[data-testid=destination-timeout]`).Text())
		wantNone := "no header"
		if lang == "fr" {
			wantNone = "aucun en-tête"
		}
		if url != "https://scoring.example/v1/a-rather-long-path/that-goes-on?key=***" || headers != "Authorization" || timeout != "7 s 500 ms" {
			t.Errorf("%s: scoring row: url %q, headers %q, timeout %q", lang, url, headers, timeout)
		}
		if got := strings.TrimSpace(r.doc.Find(`[data-testid=destination-row][data-name="audit.sink"] [data-testid=destination-headers] .none`).Text()); got != wantNone {
			t.Errorf("%s: audit.sink headers %q", lang, got)
		}
		wantSigned := map[string]string{"en": "Calls signed (Relais-Signature)", "fr": "Appels signés (Relais-Signature)"}[lang]
		if got := text(r, "destination-signed"); got != wantSigned || count(r, "destination-signed") != 1 {
			t.Errorf("%s: %d signed rows, %q; want audit.sink's alone, %q", lang, count(r, "destination-signed"), got, wantSigned)
		}
		checkLabelled(t, lang+" destinations", r.doc, checked)
		if lang == "fr" {
			checkNoWords(t, "French destinations page", r.doc, englishWords)
		}
	}

	if r := b.mustGet("/console/destinations?after=Not%20a%20name", 400); text(r, "filter-errors") == "" || count(r, "destination-row") != 0 {
		t.Errorf("a mangled cursor: %d rows, errors %q", count(r, "destination-row"), text(r, "filter-errors"))
	}
	if r := b.mustGet("/console/destinations?after=audit.sink", 200); count(r, "destination-row") != 1 || r.doc.Find(`[data-testid=first-page]`).AttrOr("href", "") != "/console/destinations" {
		t.Errorf("after audit.sink: %d rows, or no link to the first page", count(r, "destination-row"))
	}
	if r := b.mustGet("/console/destinations?after=scoring", 200); count(r, "destination-row") != 0 || text(r, "empty") != "No more destinations." {
		t.Errorf("after the last: %d rows, %q", count(r, "destination-row"), text(r, "empty"))
	}
	// Each row links to its calls: the occurrences list, filtered by it.
	calls, _ := b.mustGet("/console/destinations", 200).doc.Find(`[data-testid=destination-row][data-name=scoring] [data-testid=destination-calls]`).Attr("href")
	if calls != "/console/occurrences?destination=scoring" {
		t.Errorf("calls link %q", calls)
	}
	op := signedIn(t, f.env.URL, "en", f.env.Operator)
	if r := op.mustGet(calls, 200); text(r, "filter-errors") != "" || r.doc.Find(`[data-testid=filter-destination]`).AttrOr("value", "") != "scoring" ||
		r.doc.Find(`[data-testid=more-filters][open]`).Length() != 1 {
		t.Errorf("the calls' list: errors %q, or the destination filter not shown", text(r, "filter-errors"))
	}
	if r := op.mustGet("/console/occurrences?destination=Not%20a%20name", 400); !strings.Contains(text(r, "filter-errors"), "Unknown destination") {
		t.Errorf("a malformed destination: errors %q", text(r, "filter-errors"))
	}
	if r := op.get("/console/destinations"); r.status != http.StatusForbidden || count(op.mustGet("/console/audit", 200), "nav-destinations") != 0 {
		t.Errorf("operator: /console/destinations %d, or a Destinations link shown", r.status)
	}
}
