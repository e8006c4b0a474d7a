package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// TestHeldInstancePage: a held instance shows its status and the node it
// is held at in both languages, and operators may stop it.
func TestHeldInstancePage(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	doc := relaistest.CRMProcess(nil)
	doc["nodes"].(map[string]any)["crm"].(map[string]any)["on_error"] = map[string]any{"CRM_LOCKED": "hold", "*": "failed"}
	env.Process("crm_hold", doc)
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	id := env.Must(201, "POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ["id"].(string)+"/fail", consumer, map[string]any{"worker_id": "w",
		"error_code": "CRM_LOCKED", "message": "locked", "retryable": false})

	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		page := b.mustGet("/console/instances/"+id, 200)
		if got, want := text(page, "instance-status"), []string{"held", "suspendue"}[i]; got != want {
			t.Errorf("%s: status %q, want %q", lang, got, want)
		}
		summary := text(page, "instance-summary")
		if got := text(page, "held-node"); got != "crm" || !strings.Contains(summary, []string{"Held at node", "Suspendue au nœud"}[i]) {
			t.Errorf("%s: held node %q in summary %q; want crm, labelled", lang, got, summary)
		}
		if step := text(page, "path-step"); !strings.Contains(step, "hold") {
			t.Errorf("%s: path step %q; want the failed crm leading to hold", lang, step)
		}
		href, ok := page.doc.Find(`[data-testid=stop-instance]`).Attr("href")
		if !ok {
			t.Fatalf("%s: no stop link on a held instance", lang)
		}
		confirm := b.mustGet(href, 200)
		if got, want := text(confirm, "cancel-stop"), []string{"Keep it held", "La laisser suspendue"}[i]; got != want {
			t.Errorf("%s: way back %q, want %q", lang, got, want)
		}
		if lang == "fr" {
			r := b.do("POST", href, url.Values{"csrf": {csrfOf(t, confirm)}, "reason": {"incident closed"}})
			if r.status != http.StatusSeeOther {
				t.Fatalf("stop: %d %.300s", r.status, r.body)
			}
			if got := text(b.mustGet(r.header.Get("Location"), 200), "instance-status"); got != "annulée" {
				t.Errorf("status after stop = %q, want annulée", got)
			}
		}
	}
}
