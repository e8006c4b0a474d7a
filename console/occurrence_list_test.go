package console_test

import (
	"net/url"
	"slices"
	"testing"

	"github.com/PuerkitoBio/goquery"
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
		{"revision=2", nil},
		{"consumer=" + itoa(f.consumerID), []string{f.failed, f.completed}},
		{"definition=nothing_here", nil},
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
	r := fr.mustGet("/console/occurrences?instance=nope&revision=-1&status=lost", 200)
	var problems []string
	r.doc.Find(`[data-testid=filter-errors] li`).Each(func(_ int, s *goquery.Selection) { problems = append(problems, s.Text()) })
	if want := []string{"Statut inconnu\u202f: «\u202flost\u202f».", "L’instance de processus doit être un identifiant d’instance complet (un UUID)\u202f: les listes montrent la fin de chaque identifiant\u202f; ouvrez l’instance, ou copiez son lien, pour l’identifiant complet.",
		"La révision doit être un nombre entier, 1 ou plus."}; !slices.Equal(problems, want) {
		t.Errorf("filter errors = %q, want %q", problems, want)
	}
	if count(r, "occurrence-row") != 0 {
		t.Error("rows shown despite invalid filters")
	}

	// A long business key is cut to its column, whole in its title (the
	// browser test checks that the lists fit a laptop's screen).
	for _, path := range []string{"/console/occurrences?definition=add_company_to_crm", "/console/instances?process=crm_only"} {
		key := b.mustGet(path, 200).doc.Find(`code.clip[title^="globex-"]`)
		if key.Length() != 1 || key.AttrOr("title", "") != longBusinessKey || key.Text() != longBusinessKey {
			t.Errorf("%s: the long business key is not one clipped code with its title: %d found", path, key.Length())
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
		if got, want := text(r, "page-range"), "Lignes "+itoa(int64(pages+1))+" à "+itoa(int64(pages+1)); got != want {
			t.Errorf("page %d shows the range %q, want %q", pages+1, got, want)
		}
		next = href
	}
	if want := []string{f.available, f.failed, f.completed}; !slices.Equal(seen, want) {
		t.Errorf("pages showed %v, want %v", seen, want)
	}
}
