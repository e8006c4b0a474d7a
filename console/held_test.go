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
