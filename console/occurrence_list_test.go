package console_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/relais/relais/internal/relaistest"
)

// rowIDs are the occurrence ids a list page shows, in order.
func rowIDs(r response) []string {
	var ids []string
	r.doc.Find(`[data-testid=occurrence-row]`).Each(func(_ int, s *goquery.Selection) {
		id, _ := s.Attr("data-id")
		ids = append(ids, id)
	})
	return ids
}

func TestOperationsViewFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	vault := []string{f.available, f.failed, f.completed} // newest first
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{f.crmOcc, f.available, f.failed, f.completed}},
		{"definition=console_vault", vault},
		{"definition=add_company_to_crm", []string{f.crmOcc}},
		{"status=failed", []string{f.failed}},
		{"definition=console_vault&status=available", []string{f.available}},
		{"instance=" + f.failedInst, []string{f.failed}},
		{"revision=1&definition=console_vault", vault},
		{"revision=2&definition=console_vault", nil},
		{"consumer=" + itoa(f.consumerID), []string{f.failed, f.completed}},
	} {
		r := b.mustGet("/console/occurrences?"+tc.query, 200)
		if got := rowIDs(r); !slices.Equal(got, tc.want) {
			t.Errorf("?%s: rows %v, want %v", tc.query, got, tc.want)
		}
		if len(tc.want) == 0 && text(r, "empty") != "No occurrence matches these filters." {
			t.Errorf("?%s: empty state %q", tc.query, text(r, "empty"))
		}
		// The form shows the filters it applied, so the view can be
		// refined and shared.
		q, _ := url.ParseQuery(tc.query)
		if d := q.Get("definition"); d != "" {
			if got, _ := r.doc.Find(`[data-testid=filter-definition] option[selected]`).Attr("value"); got != d {
				t.Errorf("?%s: definition filter shows %q", tc.query, got)
			}
		}
		if s := q.Get("status"); s != "" {
			if got, _ := r.doc.Find(`[data-testid=filter-status] option[selected]`).Attr("value"); got != s {
				t.Errorf("?%s: status filter shows %q", tc.query, got)
			}
		}
	}

	// Invalid filters are explained, in the page's language, not ignored.
	fr := signedIn(t, f.env.URL, "fr", f.env.Operator)
	r := fr.mustGet("/console/occurrences?instance=nope&revision=-1&status=lost", 400)
	var problems []string
	r.doc.Find(`[data-testid=filter-errors] li`).Each(func(_ int, s *goquery.Selection) { problems = append(problems, s.Text()) })
	if want := []string{"Statut inconnu\u202f: «\u202flost\u202f».", "L’instance de processus doit être un identifiant d’instance complet (un UUID)\u202f: les listes montrent la fin de chaque identifiant\u202f; ouvrez l’instance, ou copiez son lien, pour l’identifiant complet.",
		"La révision doit être un nombre entier, 1 ou plus."}; !slices.Equal(problems, want) {
		t.Errorf("filter errors = %q, want %q", problems, want)
	}
	if count(r, "occurrence-row") != 0 {
		t.Error("rows shown despite invalid filters")
	}
	// A status as the page shows it, a typo of one, or an instance's,
	// is told the value it likely means.
	for page, want := range map[string]string{
		"/console/occurrences?status=disponible": "Statut inconnu\u202f: «\u202fdisponible\u202f» (vouliez-vous dire «\u202favailable\u202f»\u202f?).",
		"/console/occurrences?status=faild":      "Statut inconnu\u202f: «\u202ffaild\u202f» (vouliez-vous dire «\u202ffailed\u202f»\u202f?).",
		"/console/occurrences?status=held":       "«\u202fheld\u202f» est le statut d’une instance, pas d’une tâche\u202f: la page Instances liste les instances qui l’ont.",
		"/console/instances?status=bloquee":      "Statut inconnu\u202f: «\u202fbloquee\u202f» (vouliez-vous dire «\u202fheld\u202f»\u202f?).",
	} {
		if got := text(fr.get(page), "filter-errors"); got != want {
			t.Errorf("%s: %q, want %q", page, got, want)
		}
	}
	// A key nothing has lists nothing, which reads as "none left": said.
	unknown := fr.mustGet("/console/occurrences?definition=nothing_here", 400)
	if got := text(unknown, "filter-errors"); got != "Aucune définition n’a la clé « nothing_here »." {
		t.Errorf("an unknown definition: filter errors %q", got)
	}
	if count(unknown, "counts") != 0 {
		t.Error("an unknown definition's counts (zeros under its name) are shown")
	}
	if got := text(fr.mustGet("/console/occurrences?revision=1", 400), "filter-errors"); got != "Une révision est celle d’une définition : choisissez aussi la définition." {
		t.Errorf("a revision without its definition: %q", got)
	}

	// A business key of 200 characters shows its start, and whole in a
	// disclosure that a keyboard opens (no title only a mouse shows); the
	// browser test checks that the lists fit a laptop's screen.
	for _, path := range []string{"/console/occurrences?definition=add_company_to_crm", "/console/instances?process=crm_only"} {
		r := b.mustGet(path, 200)
		clipped := r.doc.Find(`details.clipped`)
		summary := collapse(clipped.Find("summary").Text())
		if clipped.Length() != 1 || text(r, "clipped-whole") != longBusinessKey || !strings.HasSuffix(summary, "…") || !strings.HasPrefix(longBusinessKey, strings.TrimSuffix(summary, "…")) {
			t.Errorf("%s: the long business key is not its start in a disclosure of the whole key: %d found, summary %q", path, clipped.Length(), summary)
		}
		if n := r.doc.Find(`table code[title]`).Length(); n != 0 {
			t.Errorf("%s: %d values of the list are whole only in a title", path, n)
		}
	}

	// Counts follow the selected definition and link to a status filter.
	r = b.mustGet("/console/occurrences?definition=add_company_to_crm", 200)
	if got := text(r, "counts-total"); got != "1 occurrence" {
		t.Errorf("counts for add_company_to_crm: %q", got)
	}
	if href, _ := r.doc.Find(`[data-testid=count-available]`).Attr("href"); href != "/console/occurrences?definition=add_company_to_crm&status=available" {
		t.Errorf("count link = %q", href)
	}
}

func TestOperationsViewKeysetPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	var seen []string
	next := "/console/occurrences?definition=console_vault&limit=1"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		r := b.mustGet(next, 200)
		ids := rowIDs(r)
		if len(ids) != 1 {
			t.Fatalf("%s: %d rows, want 1", next, len(ids))
		}
		seen = append(seen, ids[0])
		href, ok := r.doc.Find(`[data-testid=next-page]`).Attr("href")
		if ok {
			if text(r, "next-page") != "Page suivante" {
				t.Errorf("next link = %q", text(r, "next-page"))
			}
			u, _ := url.Parse(href)
			q := u.Query()
			if q.Get("definition") != "console_vault" || q.Get("limit") != "1" || q.Get("before") != ids[0] {
				t.Errorf("next link %q does not keep the filters and the cursor", href)
			}
		}
		if pages > 0 && count(r, "first-page")+count(r, "prev-page") == 0 {
			t.Errorf("page %d has no link back", pages+1)
		}
		// One row a page: one row named, not a range from it to itself.
		if got, want := text(r, "page-range"), "Ligne "+itoa(int64(pages+1)); got != want {
			t.Errorf("page %d shows the range %q, want %q", pages+1, got, want)
		}
		next = href
	}
	if want := []string{f.available, f.failed, f.completed}; !slices.Equal(seen, want) {
		t.Errorf("pages showed %v, want %v", seen, want)
	}
}

// TestListsShowCodesWhole: an error code, a worker id, a business key, a
// node are shown whole in the lists (wrapping, never cut with an ellipsis
// whose whole value only a mouse reaches in a title); a row's error
// message opens under its code with the keyboard as with a mouse; only
// Relais's own messages are marked as English (lang="en"), never a
// worker's, on the list as on the occurrence and instance pages.
func TestListsShowCodesWhole(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	r := b.mustGet("/console/occurrences", 200)
	row := func(id string) *goquery.Selection {
		s := r.doc.Find(`[data-testid=occurrence-row][data-id="` + id + `"]`)
		if s.Length() != 1 {
			t.Fatalf("no row for %s", id)
		}
		return s
	}
	if n := r.doc.Find(`table code[title]`).Length(); n != 0 {
		t.Errorf("%d values of the list are whole only in a title", n)
	}
	if n := r.doc.Find(`.clip`).Length(); n != 0 {
		t.Errorf("%d values of the list are cut to their column", n)
	}
	for _, tc := range []struct {
		occ, code, message, lang string
	}{
		{f.pullHeldOcc, "SCORER_DOWN", "the scoring model is being redeployed", ""},
		{f.pushHeldOcc, "destination_http_503", "", "en"},
	} {
		cell := row(tc.occ).Find(`[data-testid=occurrence-error]`)
		if got := cell.Find(`code.wrap[data-testid=occurrence-error-code]`).Text(); got != tc.code {
			t.Errorf("%s: error code %q, want %q whole", tc.occ, got, tc.code)
		}
		if cell.Find(`[data-testid=occurrence-error-before]`).Length() != 0 {
			t.Errorf("%s: a failed occurrence's own error is labelled an earlier attempt's", tc.occ)
		}
		msg := cell.Find(`details[data-testid=occurrence-error-message]`)
		// Relais's own message says so before it is opened, as on its page.
		if got, want := collapse(msg.Find("summary").Text()), map[string]string{"": "Message", "en": "Message de Relais (en anglais)"}[tc.lang]; got != want {
			t.Errorf("%s: the message's disclosure says %q, want %q", tc.occ, got, want)
		}
		p := msg.Find(`[data-testid=occurrence-error-text]`)
		if tc.message != "" && p.Text() != tc.message {
			t.Errorf("%s: message %q, want %q", tc.occ, p.Text(), tc.message)
		}
		if lang, _ := p.Attr("lang"); lang != tc.lang {
			t.Errorf("%s (%s): the message is marked lang=%q, want %q", tc.occ, tc.code, lang, tc.lang)
		}
		if n := cell.Find(`[lang]`).Length(); tc.lang == "" && n != 0 {
			t.Errorf("%s: a worker's own message is marked with a language", tc.occ)
		}
	}
	if got := row(f.pullHeldOcc).Find(`[data-testid=occurrence-consumer] code.wrap`).Text(); got != "scorer-1" {
		t.Errorf("worker id %q, want scorer-1 whole", got)
	}
	if got := row(f.pullHeldOcc).Find(`[data-testid=occurrence-business-key] code.wrap`).Text(); got != "lead-7" {
		t.Errorf("business key %q, want lead-7 whole", got)
	}
	if n := r.doc.Find(`.visually-hidden[lang]`).Length(); n != 0 {
		t.Errorf("%d hidden copies of messages marked with a language", n)
	}
	// The same messages on their own pages: a worker's unmarked, Relais's
	// in English.
	for _, tc := range []struct{ path, testid, lang string }{
		{"/console/occurrences/" + f.pullHeldOcc, "error-message", ""},
		{"/console/instances/" + f.pullHeld, "instance-error-message", ""},
		{"/console/occurrences/" + f.pushHeldOcc, "error-message", "en"},
		{"/console/instances/" + f.pushHeld[0], "instance-error-message", "en"},
	} {
		page := b.mustGet(tc.path, 200)
		msg := page.doc.Find(`[data-testid=` + tc.testid + `]`).First()
		if msg.Length() == 0 {
			t.Errorf("%s: no error message", tc.path)
			continue
		}
		got := msg.Find(`[lang]`).AttrOr("lang", "")
		if got != tc.lang {
			t.Errorf("%s: the message is marked lang=%q, want %q", tc.path, got, tc.lang)
		}
		if tc.testid != "error-message" {
			continue
		}
		// Each attempt's row says whose words it shows, as the summary
		// does: French readers were told only there (console QA).
		by := page.doc.Find(`[data-testid=attempt-error-message]`).Last().Find(`[data-testid=attempt-error-by]`)
		want := map[string]string{"": "", "en": "Message de Relais (en anglais), citant la réponse de la destination"}[tc.lang]
		if got := collapse(by.Text()); got != want {
			t.Errorf("%s: the attempt's message is labelled %q, want %q", tc.path, got, want)
		}
	}
}

// An occurrence completed after a failed attempt keeps that attempt's
// error (the API's error_code): its row says whose it is, where a bare
// code in the Error column read as the completion's.
func TestAnEarlierAttemptsErrorIsLabelled(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(map[string]any{"max_attempts": 3, "retry_delay": "PT1S"}))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	fetchOne := func() string {
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
		if len(got) != 1 {
			t.Fatalf("fetched %v", got)
		}
		return got[0].(map[string]any)["id"].(string)
	}
	occ := fetchOne()
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w", "error_code": "MAIL_UNAVAILABLE", "retryable": true})
	env.Clock.Advance(2 * time.Second)
	fetchOne()
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/complete", consumer, map[string]any{"worker_id": "w", "outputs": map[string]any{"result": "created", "crm_id": "CRM-1"}})
	for lang, want := range map[string]string{"en": "Earlier attempt:", "fr": "Tentative antérieure :"} {
		r := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences", 200)
		cell := r.doc.Find(`[data-testid=occurrence-row][data-id="` + occ + `"] [data-testid=occurrence-error]`)
		if got := cell.Find(`[data-testid=occurrence-error-before]`).Text(); got != want {
			t.Errorf("%s: the completed occurrence's earlier error is labelled %q, want %q", lang, got, want)
		}
		if got := cell.Find(`[data-testid=occurrence-error-code]`).Text(); got != "MAIL_UNAVAILABLE" {
			t.Errorf("%s: error code %q, want MAIL_UNAVAILABLE", lang, got)
		}
	}
}
