package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/relaistest"
)

// TestPushTimeoutSaysTheCallTimedOut: a push call that outlives its
// timeout fails deadline_exceeded; its policy has no deadline, so its
// occurrence and its held instance say that the destination did not answer
// within the call's timeout, in both languages, not that a deadline passed.
func TestPushTimeoutSaysTheCallTimedOut(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	silentCheckout(t, env, "PT5S", "PT1S")
	inst := env.Must(201, "POST", "/api/v1/processes/checkout/instances", env.Operator, map[string]any{"business_key": "order-1",
		"inputs": map[string]any{"order_id": "order-1", "amount_cents": 4200, "currency": "EUR", "card_token": "tok_visa_4242",
			"cardholder": map[string]any{"name": "Jo", "email": "jo@example.com"}}}).JSON(t)["id"].(string)
	relaistest.WaitFor(t, 15*time.Second, "order held", func() (bool, string) {
		s := env.Must(200, "GET", "/api/v1/instances/"+inst, env.Operator, nil).JSON(t)["status"].(string)
		if s == "failed" {
			t.Fatalf("the order failed instead of being held: %v", env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t))
		}
		return s == "held", s
	})
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)

	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		want := []string{"The destination did not answer within the call’s timeout (1 second): it may have acted all the same, so check before retrying.",
			"La destination n’a pas répondu dans le délai de l’appel (1 seconde)\u202f: elle a pu agir malgré tout, vérifiez avant de reprendre."}[i]
		summary := text(b.mustGet("/console/occurrences/"+occ, 200), "summary")
		if !strings.Contains(summary, "deadline_exceeded — "+want) {
			t.Errorf("%s: occurrence summary %q, want %q", lang, summary, want)
		}
		instSummary := text(b.mustGet("/console/instances/"+inst, 200), "instance-summary")
		if !strings.Contains(instSummary, "deadline_exceeded — "+want) {
			t.Errorf("%s: instance summary %q, want %q", lang, instSummary, want)
		}
		for _, s := range []string{summary, instSummary} {
			if strings.Contains(s, []string{"deadline passed", "chéance"}[i]) {
				t.Errorf("%s: a deadline is said to have passed: %q", lang, s)
			}
		}
	}
	// Stopped, it can be retried no more: neither page advises it.
	env.Must(200, "POST", "/api/v1/instances/"+inst+"/stop", env.Operator, map[string]any{"reason": "refunded by hand"})
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		want := []string{"The destination did not answer within the call’s timeout: it may have acted all the same.",
			"La destination n’a pas répondu dans le délai de l’appel : elle a pu agir malgré tout."}[i]
		for _, page := range []string{"/console/occurrences/" + occ, "/console/instances/" + inst} {
			r := b.mustGet(page, 200)
			if s := text(r, "summary") + text(r, "instance-summary"); !strings.Contains(s, want) || strings.Contains(s, []string{"retrying", "reprendre"}[i]) {
				t.Errorf("%s: %s once stopped: %q, want %q and no retry advice", lang, page, s, want)
			}
		}
	}
}

// TestAbandonedInstanceSaysWhereItWasAbandoned: an abandoned instance
// ended at its held task node, which is no end node: its page says it was
// abandoned there.
func TestAbandonedInstanceSaysWhereItWasAbandoned(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	id := env.HeldCRMInstance("Acme")
	if _, err := env.Engine.Act(context.Background(), engine.Actor{Name: "ops"}, engine.ActionAbandon, uuid.MustParse(id), "customer gave up"); err != nil {
		t.Fatal(err)
	}
	for i, lang := range []string{"en", "fr"} {
		summary := text(signedIn(t, env.URL, lang, env.Operator).mustGet("/console/instances/"+id, 200), "instance-summary")
		want, wrong := []string{"Abandoned at nodecrm", "Abandonnée au nœudcrm"}[i], []string{"End node", "Nœud de fin"}[i]
		if !strings.Contains(summary, want) || strings.Contains(summary, wrong) {
			t.Errorf("%s: summary %q, want %q and no %q", lang, summary, want, wrong)
		}
	}
}

// TestCancelledOccurrenceNeverReserved: an occurrence cancelled before any
// worker reserved it says it never was (not "yet"), and its deadline,
// still ahead, shows no countdown once it settled.
func TestCancelledOccurrenceNeverReserved(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(map[string]any{"max_attempts": 3, "deadline": "P1D"}))
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	en := signedIn(t, env.URL, "en", env.Operator)
	if got := text(en.mustGet("/console/occurrences/"+occ, 200), "deadline-at"); !strings.Contains(got, "(in ") {
		t.Errorf("open occurrence: deadline %q, want its countdown", got)
	}
	if _, err := env.Engine.Act(context.Background(), engine.Actor{Name: "ops"}, engine.ActionStop, uuid.MustParse(inst), "duplicate"); err != nil {
		t.Fatal(err)
	}
	for i, lang := range []string{"en", "fr"} {
		b := en
		if lang == "fr" {
			b = signedIn(t, env.URL, lang, env.Operator)
		}
		r := b.mustGet("/console/occurrences/"+occ, 200)
		want := []string{"No worker ever reserved this occurrence: it ended before any attempt.",
			"Aucun exécutant n’a jamais réservé cette occurrence\u202f: elle a pris fin avant toute tentative."}[i]
		if got := text(r, "attempts"); !strings.Contains(got, want) || strings.Contains(got, []string{"yet", "encore"}[i]) {
			t.Errorf("%s: attempts %q, want %q", lang, got, want)
		}
		if n := count(r, "deadline-at"); n != 0 {
			t.Errorf("%s: a settled occurrence shows its deadline still ahead: %q", lang, text(r, "dates"))
		}
		if dates := text(r, "dates"); strings.Contains(dates, []string{"(in ", "(dans "}[i]) {
			t.Errorf("%s: dates of a settled occurrence count down: %q", lang, dates)
		}
	}
}

// TestStoppedWhileHeldSaysTheWorkMayBeDone: the attempt a stop ended
// while a worker held its task says, in the reader's language, that the
// worker's report is refused though it may have done the work.
func TestStoppedWhileHeldSaysTheWorkMayBeDone(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)["id"].(string)
	env.Must(200, "POST", "/api/v1/instances/"+inst+"/stop", env.Operator, map[string]any{"reason": "duplicate"})
	for i, lang := range []string{"en", "fr"} {
		r := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences/"+occ, 200)
		want := []string{"The instance was stopped while the worker held the task: its report is refused, but it may already have done the work.",
			"L’instance a été arrêtée pendant que l’exécutant détenait la tâche\u202f: son compte rendu est refusé, mais il a peut-être déjà fait le travail."}[i]
		if got := text(r, "attempt-error-message"); got != want {
			t.Errorf("%s: attempt message %q, want %q", lang, got, want)
		}
	}
	// Deferred, the task has no holder: the note says it was deferred
	// (verifier QA), in the API and the console.
	inst = env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Globex"}}).JSON(t)["id"].(string)
	occ = env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)["id"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/defer", consumer, map[string]any{"worker_id": "w", "reason": "awaiting approval"})
	env.Must(200, "POST", "/api/v1/instances/"+inst+"/stop", env.Operator, map[string]any{"reason": "duplicate"})
	attempt := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)["attempts"].([]any)[0].(map[string]any)
	if msg, _ := attempt["error_message"].(string); !strings.HasPrefix(msg, "the instance was stopped while the task was deferred") {
		t.Errorf("deferred attempt: %v", attempt)
	}
	r := signedIn(t, env.URL, "en", env.Operator).mustGet("/console/occurrences/"+occ, 200)
	if got := text(r, "attempt-error-message"); !strings.HasPrefix(got, "The instance was stopped while the task was deferred:") {
		t.Errorf("deferred attempt's row: %q", got)
	}
}

// TestLongFailureShowsOnce: a long error message shows in full once, in
// the summary; the attempts table shows its start, the whole of it behind
// a disclosure; and a failure the worker said not to retry, with attempts
// left, says so.
func TestLongFailureShowsOnce(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(map[string]any{"max_attempts": 3}))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)["id"].(string)
	long := "CRM rejected the company: VAT number FR12345678901 is invalid for country FR." + strings.Repeat(" Long details.", 60)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w",
		"error_code": "crm.validation_error", "message": long, "retryable": false})

	for i, lang := range []string{"en", "fr"} {
		r := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences/"+occ, 200)
		if got := text(r, "error-message"); got != collapse(long) {
			t.Errorf("%s: summary message %q, want it whole", lang, got)
		}
		short := text(r, "attempt-error-short")
		if !strings.HasSuffix(short, "…") || len([]rune(short)) > 170 || !strings.HasPrefix(long, strings.TrimSuffix(short, "…")) {
			t.Errorf("%s: the attempts table shows %q, want the message's start, cut", lang, short)
		}
		if got := text(r, "attempt-error-whole"); got != collapse(long) {
			t.Errorf("%s: whole message behind the disclosure %q", lang, got)
		}
		if n := r.doc.Find(`[data-testid=attempt-error-whole]`).ParentsFiltered("details").Length(); n != 1 {
			t.Errorf("%s: the whole message in the table is not behind a disclosure", lang)
		}
		want := []string{"no: the worker marked this failure as not retryable (attempts left unused: 2)",
			"non\u202f: l’exécutant a signalé cet échec comme définitif (tentatives restantes non utilisées\u202f: 2)"}[i]
		if got := text(r, "not-retryable"); got != want {
			t.Errorf("%s: retryable %q, want %q", lang, got, want)
		}
	}
}

// TestSingleNoticeIsAParagraph: a notice of one item (one filter that
// could not be applied, one operator action on an instance) is a
// paragraph, not a list of one.
func TestSingleNoticeIsAParagraph(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	if _, err := env.Engine.Act(context.Background(), engine.Actor{Name: "ops"}, engine.ActionStop, uuid.MustParse(inst), "duplicate"); err != nil {
		t.Fatal(err)
	}
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		checks := []struct {
			path, testid, want string
			status             int
		}{
			{"/console/occurrences?instance=xyz", "filter-errors", []string{"The process instance must be a whole instance id (a UUID): the lists show the end of each id; open the instance, or copy its link, for the whole id.",
				"L’instance de processus doit être un identifiant d’instance complet (un UUID)\u202f: les listes montrent la fin de chaque identifiant\u202f; ouvrez l’instance, ou copiez son lien, pour l’identifiant complet."}[i], 400},
			{"/console/instances/" + inst, "attribution", []string{"Stopped by ops at ", "Arrêtée par ops le "}[i], 200},
		}
		for _, c := range checks {
			r := b.mustGet(c.path, c.status)
			el := r.doc.Find(`[data-testid="` + c.testid + `"]`)
			if el.Length() != 1 || goquery.NodeName(el) != "p" || el.Find("li").Length() != 0 {
				t.Errorf("%s %s: %s is %d <%s>, want one paragraph", lang, c.path, c.testid, el.Length(), goquery.NodeName(el))
			}
			if got := text(r, c.testid); !strings.HasPrefix(got, c.want) {
				t.Errorf("%s %s: %s %q, want it to start with %q", lang, c.path, c.testid, got, c.want)
			}
		}
	}
}
