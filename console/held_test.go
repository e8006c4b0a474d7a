package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/relais/relais/internal/relaistest"
)

// TestHeldInstancePage: a held instance shows its status and the node it
// is held at in both languages, and operators may stop it.
func TestHeldInstancePage(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	id := env.HeldCRMInstance("Acme")

	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		page := b.mustGet("/console/instances/"+id, 200)
		if got, want := text(page, "instance-status"), []string{"held", "bloquée"}[i]; got != want {
			t.Errorf("%s: status %q, want %q", lang, got, want)
		}
		summary := text(page, "instance-summary")
		if got := text(page, "held-node"); got != "crm" || !strings.Contains(summary, []string{"Held at node", "Bloquée au nœud"}[i]) {
			t.Errorf("%s: held node %q in summary %q; want crm, labelled", lang, got, summary)
		}
		if next, want := text(page, "step-next"), []string{"held for an operator", "bloquée pour un opérateur"}[i]; next != want {
			t.Errorf("%s: the failed crm step leads to %q, want %q (in words, not the process keyword)", lang, next, want)
		}
		href, ok := page.doc.Find(`[data-testid=stop-instance]`).Attr("href")
		if !ok {
			t.Fatalf("%s: no stop link on a held instance", lang)
		}
		confirm := b.mustGet(href, 200)
		if got, want := text(confirm, "cancel-stop"), []string{"Keep it held", "La laisser bloquée"}[i]; got != want {
			t.Errorf("%s: way back %q, want %q", lang, got, want)
		}
		if lang == "fr" {
			r := b.do("POST", href, url.Values{"csrf": {csrfOf(t, confirm)}, "reason": {"incident closed"}})
			if r.status != http.StatusSeeOther {
				t.Fatalf("stop: %d %.300s", r.status, r.body)
			}
			stopped := b.mustGet(r.header.Get("Location"), 200)
			if got := text(stopped, "instance-status"); got != "annulée" {
				t.Errorf("status after stop = %q, want annulée", got)
			}
			if got := text(stopped, "step-next"); got != "bloquée, puis arrêtée par un opérateur" {
				t.Errorf("after stop, the failed crm step leads to %q, want it to say the instance was stopped since", got)
			}
			// Its code is why it was held, as an abandoned instance's.
			if summary := text(stopped, "instance-summary"); !strings.Contains(summary, "Bloquée pour") || strings.Contains(summary, "Code d’erreur") {
				t.Errorf("after stop, the summary %q; want the code labelled as why it was held", summary)
			}
		}
	}

	// Abandoned, the instance is no longer held: its path says so.
	other := relaistest.New(t)
	abandoned := other.HeldCRMInstance("Initech")
	other.Must(200, "POST", "/api/v1/instances/"+abandoned+"/abandon", other.Operator, map[string]any{"reason": "duplicate company"})
	for i, lang := range []string{"en", "fr"} {
		page := signedIn(t, other.URL, lang, other.Operator).mustGet("/console/instances/"+abandoned, 200)
		if got, want := text(page, "step-next"), []string{"held, then abandoned by an operator", "bloquée, puis abandonnée par un opérateur"}[i]; got != want {
			t.Errorf("%s: after abandon, the failed crm step leads to %q, want %q", lang, got, want)
		}
	}
}

// TestFailureHoldingItsInstanceIsMarked: in the tasks list, a failure its
// instance is held at (an incident) is marked and leads to the instance's
// actions; a failure the instance went past along the node's error path,
// to be held at a later node, is not, and its page says the instance is
// held further on, not here.
func TestFailureHoldingItsInstanceIsMarked(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	doc := relaistest.CRMProcess(nil)
	nodes := doc["nodes"].(map[string]any)
	crm := nodes["crm"].(map[string]any)
	crm["on_error"] = map[string]any{"*": "crm_again"}
	again := map[string]any{}
	for k, v := range crm {
		again[k] = v
	}
	again["on_error"] = map[string]any{"CRM_LOCKED": "hold", "*": "failed"}
	nodes["crm_again"] = again
	env.Process("crm_twice", doc)
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	id := env.Must(201, "POST", "/api/v1/processes/crm_twice/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	failNext := func(code string) string {
		occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
		if len(occ) != 1 {
			t.Fatalf("fetch: %v", occ)
		}
		occID := occ[0].(map[string]any)["id"].(string)
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+occID+"/fail", consumer, map[string]any{"worker_id": "w",
			"error_code": code, "message": "no", "retryable": false})
		return occID
	}
	past, holding := failNext("CRM_DOWN"), failNext("CRM_LOCKED")
	if s := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)["status"]; s != "held" {
		t.Fatalf("instance %v, want held", s)
	}

	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		list := b.mustGet("/console/occurrences?status=failed", 200)
		marks := map[string]string{}
		list.doc.Find(`[data-testid=occurrence-row]`).Each(func(_ int, row *goquery.Selection) {
			occID, _ := row.Attr("data-id")
			mark := row.Find(`[data-testid=occurrence-holds]`)
			href, _ := mark.Attr("href")
			marks[occID] = strings.TrimSpace(mark.Text()) + " " + href
		})
		if got, want := marks[holding], []string{"instance held here", "instance bloquée ici"}[i]+" /console/instances/"+id+"#actions"; got != want {
			t.Errorf("%s: the failure holding its instance is marked %q, want %q", lang, got, want)
		}
		if got := marks[past]; strings.TrimSpace(got) != "" {
			t.Errorf("%s: the failure the instance went past is marked %q, want nothing", lang, got)
		}
		if len(marks) != 2 {
			t.Errorf("%s: %d failed rows, want 2", lang, len(marks))
		}

		page := b.mustGet("/console/occurrences/"+past, 200)
		if got, want := text(page, "state-note"), []string{"later node", "nœud suivant"}[i]; !strings.Contains(got, want) {
			t.Errorf("%s: the page of the failure gone past says %q, want it held at a %q", lang, got, want)
		}
		if page.doc.Find(`[data-testid=instance-actions-link]`).Length() != 0 {
			t.Errorf("%s: the failure gone past offers its instance's actions as if it held it", lang)
		}
		page = b.mustGet("/console/occurrences/"+holding, 200)
		if got, want := text(page, "state-note"), []string{"held here", "bloquée ici"}[i]; !strings.Contains(got, want) {
			t.Errorf("%s: the holding failure's page says %q, want %q", lang, got, want)
		}
		if page.doc.Find(`[data-testid=instance-actions-link]`).Length() != 1 {
			t.Errorf("%s: the holding failure's page does not lead to its instance's actions", lang)
		}
	}
}
