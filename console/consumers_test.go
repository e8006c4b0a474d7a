package console_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestConsumerListPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := f.env.Must(201, "POST", "/api/v1/consumers", f.env.Admin, map[string]any{"name": "billing-sync",
		"grants": []any{map[string]any{"definition": "console_vault", "revisions": []int{1, 2}}}}).JSON(t)
	revoked := strconv.Itoa(int(res["id"].(float64)))
	f.env.Must(204, "DELETE", "/api/v1/consumers/"+revoked, f.env.Admin, nil)
	vault := strconv.FormatInt(f.consumerID, 10)
	single := strconv.Itoa(int(f.env.Must(201, "POST", "/api/v1/consumers", f.env.Admin, map[string]any{"name": "one-rev",
		"grants": []any{map[string]any{"definition": "console_vault", "revisions": []int{1}}}}).JSON(t)["id"].(float64)))

	checked := map[string]int{}
	for _, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Admin)
		r := b.mustGet("/console/consumers", 200)
		if count(r, "nav-consumers") != 1 {
			t.Errorf("%s: no Consumers link in the navigation", lang)
		}
		rows := r.doc.Find(`[data-testid=consumer-row]`)
		if rows.Length() < 2 {
			t.Fatalf("%s: %d consumer rows", lang, rows.Length())
		}
		row := r.doc.Find(`[data-testid=consumer-row][data-id="` + vault + `"]`)
		grants := strings.Join(strings.Fields(row.Find(`[data-testid=consumer-grants]`).Text()), " ")
		state := strings.TrimSpace(row.Find(`[data-testid=consumer-state]`).Text())
		want, wantState := "console_vault: every revision, present and future", "active"
		if lang == "fr" {
			want, wantState = "console_vault : toutes les révisions, présentes et à venir", "actif"
		}
		if strings.TrimSpace(row.Find(`[data-testid=consumer-name]`).Text()) != "vault-sync" || grants != want || state != wantState {
			t.Errorf("%s: vault-sync row: grants %q, state %q", lang, grants, state)
		}
		reserved, _ := row.Find(`[data-testid=consumer-reserved]`).Attr("href")
		all, _ := row.Find(`[data-testid=consumer-tasks]`).Attr("href")
		if reserved != "/console/occurrences?consumer="+vault+"&status=reserved" || all != "/console/occurrences?consumer="+vault {
			t.Errorf("%s: task links %q, %q", lang, reserved, all)
		}
		row = r.doc.Find(`[data-testid=consumer-row][data-id="` + revoked + `"]`)
		grants = strings.Join(strings.Fields(row.Find(`[data-testid=consumer-grants]`).Text()), " ")
		want, wantState = "console_vault: revisions 1, 2", "revoked"
		if lang == "fr" {
			want, wantState = "console_vault : révisions 1, 2", "révoqué"
		}
		if grants != want || row.Find(`[data-testid=consumer-state] .badge`).Text() != wantState {
			t.Errorf("%s: revoked row: grants %q, state %q", lang, grants, row.Find(`[data-testid=consumer-state]`).Text())
		}
		// One revision is named in the singular ("revisions 1" read oddly).
		row = r.doc.Find(`[data-testid=consumer-row][data-id="` + single + `"]`)
		grants = strings.Join(strings.Fields(row.Find(`[data-testid=consumer-grants]`).Text()), " ")
		if want = map[string]string{"en": "console_vault: revision 1", "fr": "console_vault : révision 1"}[lang]; grants != want {
			t.Errorf("%s: a one-revision grant reads %q, want %q", lang, grants, want)
		}
		if strings.Contains(r.body, f.env.Admin) {
			t.Errorf("%s: the page shows a token", lang)
		}
		checkLabelled(t, lang+" consumers", r.doc, checked)
		if lang == "fr" {
			checkNoWords(t, "French consumers page", r.doc, englishWords)
		}
		// The links lead to the tasks they name.
		if r := b.mustGet(reserved, 200); text(r, "filter-errors") != "" {
			t.Errorf("%s: %s refused: %q", lang, reserved, text(r, "filter-errors"))
		}
	}

	admin := signedIn(t, f.env.URL, "en", f.env.Admin)
	if r := admin.mustGet("/console/consumers?after=x", 400); text(r, "filter-errors") == "" || count(r, "consumer-row") != 0 {
		t.Errorf("after=x: %d rows, errors %q", count(r, "consumer-row"), text(r, "filter-errors"))
	}
	if r := admin.mustGet("/console/consumers?after="+single, 200); count(r, "consumer-row") != 0 || text(r, "empty") != "No more consumers." {
		t.Errorf("after the last: %d rows, %q", count(r, "consumer-row"), text(r, "empty"))
	}
	op := signedIn(t, f.env.URL, "en", f.env.Operator)
	if r := op.get("/console/consumers"); r.status != http.StatusForbidden || count(op.mustGet("/console/audit", 200), "nav-consumers") != 0 {
		t.Errorf("operator: /console/consumers %d, or a Consumers link shown", r.status)
	}
}
