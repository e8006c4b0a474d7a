package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// lockedOnce is an occurrence of a one-attempt process, fetched by worker
// w of consumer with a one-second lock.
func lockedOnce(t *testing.T) (env *relaistest.Env, consumer, id string) {
	t.Helper()
	env = relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_once", relaistest.CRMProcess(map[string]any{"max_attempts": 1}))
	consumer = env.Consumer("crm-sync", "add_company_to_crm")
	env.Must(201, "POST", "/api/v1/processes/crm_once/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}, "lock_duration": "PT1S"}).JSON(t)["occurrences"].([]any)
	if len(got) != 1 {
		t.Fatalf("fetched %v", got)
	}
	return env, consumer, got[0].(map[string]any)["id"].(string)
}

// awaitExhausted waits for the timer to fail occurrence id, its lock lapsed.
func awaitExhausted(t *testing.T, env *relaistest.Env, id string) {
	t.Helper()
	relaistest.WaitFor(t, 10*time.Second, "the timer fails it", func() (bool, string) {
		o := env.Must(200, "GET", "/api/v1/occurrences/"+id, env.Operator, nil).JSON(t)
		return o["error_code"] == "attempts_exhausted", o["status"].(string)
	})
}

// An occurrence whose attempts ran out says how its last one ended, as
// its attempts table shows: a lapsed lock, not a stream's end it never
// had (verifier QA: the page named both).
func TestExhaustedAttemptsSayHowTheLastEnded(t *testing.T) {
	t.Parallel()
	env, _, id := lockedOnce(t)
	awaitExhausted(t, env, id)
	for lang, want := range map[string]string{
		"en": "The last attempt’s lock expired with no attempt left.",
		"fr": "Le verrou de la dernière tentative a expiré sans tentative restante.",
	} {
		page := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences/"+id, 200)
		if got := text(page, "error-code"); !strings.Contains(got, want) {
			t.Errorf("%s: the error says %q, want %q", lang, got, want)
		}
	}
}

// An attempt whose worker's reports were refused says so, on its row and
// in the incident's explanation: its lock lapsed, but its worker answered,
// and the answer is what must change (Camunda QA: the page sent the
// operator to lengthen the lock).
func TestRefusedReportsShowOnTheAttempt(t *testing.T) {
	t.Parallel()
	env, consumer, id := lockedOnce(t)
	for range 2 {
		env.Must(422, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, map[string]any{"worker_id": "w",
			"outputs": map[string]any{"result": "maybe", "crm_id": "C-1"}})
	}
	awaitExhausted(t, env, id)
	for lang, want := range map[string][2]string{
		"en": {"after Relais refused its worker’s report (invalid_outputs;", "Relais refused 2 reports of this attempt, the last at"},
		"fr": {"après que Relais a refusé le rapport de son exécutant (invalid_outputs\u202f;", "Relais a refusé 2 rapports de cette tentative, le dernier à"},
	} {
		page := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences/"+id, 200)
		if got := text(page, "error-code"); !strings.Contains(got, want[0]) {
			t.Errorf("%s: the error says %q, want %q", lang, got, want[0])
		}
		if got := text(page, "attempt-refused"); !strings.Contains(got, want[1]) || !strings.Contains(got, "invalid_outputs") || !strings.Contains(got, "/outputs/result") {
			t.Errorf("%s: the attempt says %q, want %q with the code and pointer", lang, got, want[1])
		}
		if strings.Contains(page.body, "maybe") {
			t.Errorf("%s: the refused value is shown", lang)
		}
		// The instance page, which the held list opens, says it too.
		// It lists no attempts: it points at the occurrence's (verifier QA).
		inst := env.Must(200, "GET", "/api/v1/occurrences/"+id, env.Operator, nil).JSON(t)["instance_id"].(string)
		where := map[string]string{"en": "see the failed occurrence’s attempts", "fr": "voir les tentatives de l’occurrence en échec"}[lang]
		if got := text(signedIn(t, env.URL, lang, env.Operator).mustGet("/console/instances/"+inst, 200), "instance-error-code"); !strings.Contains(got, want[0]) || !strings.Contains(got, where) {
			t.Errorf("%s: the instance's error says %q, want %q and %q", lang, got, want[0], where)
		}
	}
}

// An occurrence released again and again (a worker that hands back what
// it cannot take now, in a loop) lists its latest attempts, the earlier
// ones counted: its page grew without bound (Camunda QA: 1,000 rows).
func TestManyAttemptsListTheLatest(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	consumer := env.CRMOnly()
	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	var id string
	for range 103 {
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
		if len(got) != 1 {
			t.Fatalf("fetched %v", got)
		}
		id = got[0].(map[string]any)["id"].(string)
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/release", consumer, map[string]any{"worker_id": "w"})
	}
	page := signedIn(t, env.URL, "en", env.Operator).mustGet("/console/occurrences/"+id, 200)
	rows := page.doc.Find(`[data-testid=attempt-row]`)
	if rows.Length() != 100 || collapse(rows.First().Find("td").First().Text()) != "4" {
		t.Errorf("%d attempt rows, the first #%s; want the latest 100, from #4", rows.Length(), collapse(rows.First().Find("td").First().Text()))
	}
	if got := text(page, "attempts-hidden"); !strings.Contains(got, "The 3 earlier attempts (of 103) are not shown") {
		t.Errorf("hidden note %q", got)
	}
}

// An attempt that was settled after a refused report says a later one was
// taken (verifier QA: it said no answer was).
func TestRefusedThenTakenSaysSo(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	consumer := env.CRMOnly()
	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	id := got[0].(map[string]any)["id"].(string)
	env.Must(422, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, map[string]any{"worker_id": "w", "outputs": map[string]any{"result": "maybe"}})
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, map[string]any{"worker_id": "w", "outputs": map[string]any{"result": "created", "crm_id": "C-1"}})
	page := signedIn(t, env.URL, "en", env.Operator).mustGet("/console/occurrences/"+id, 200)
	if got := text(page, "attempt-refused"); !strings.Contains(got, "before taking another") || strings.Contains(got, "not taken") {
		t.Errorf("the attempt says %q, want a later report taken", got)
	}
}
