package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// TestOccurrencePageSaysWhatHappens follows one pull occurrence through
// every state and checks that its page says what it waits for, in words,
// with the instant that matters and how far it is; that a lock expiry shows
// only while a worker holds the occurrence; and that the last error shows,
// with its attempt, only while it matters.
func TestOccurrencePageSaysWhatHappens(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(map[string]any{"max_attempts": 4, "retry_delay": "PT10S"}))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	b := signedIn(t, env.URL, "en", env.Operator)
	fr := signedIn(t, env.URL, "fr", env.Operator)
	path := "/console/occurrences/" + occ
	fetch := func(worker string) {
		t.Helper()
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": worker, "lock_duration": "PT1M",
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
		if len(got) != 1 {
			t.Fatalf("fetch by %s: %v", worker, got)
		}
	}
	type want struct {
		state     string // the state sentence starts with it
		contains  string // and contains it
		lock      bool   // the lock expiry is shown
		lastError string // the summary's error label, "" for none
		frState   string // the French sentence starts with it
	}
	check := func(step string, w want) {
		t.Helper()
		r := b.mustGet(path, 200)
		state := text(r, "state-text")
		if !strings.HasPrefix(state, w.state) || !strings.Contains(state, w.contains) {
			t.Errorf("%s: state %q, want it to start with %q and contain %q", step, state, w.state, w.contains)
		}
		if got := count(r, "lock-expires"); (got == 1) != w.lock {
			t.Errorf("%s: lock expiry shown %d times, want %v", step, got, w.lock)
		}
		summary := text(r, "summary")
		if w.lastError == "" && count(r, "error-code") != 0 {
			t.Errorf("%s: an error shows in the summary: %q", step, summary)
		}
		if w.lastError != "" && !strings.Contains(summary, w.lastError) {
			t.Errorf("%s: summary %q, want %q", step, summary, w.lastError)
		}
		if w.frState != "" {
			if got := text(fr.mustGet(path, 200), "state-text"); !strings.HasPrefix(got, w.frState) {
				t.Errorf("%s: French state %q, want it to start with %q", step, got, w.frState)
			}
		}
	}

	check("new", want{state: "Waiting for a worker since ", contains: "(just now)", frState: "En attente d’un exécutant depuis "})

	fetch("w1")
	check("reserved", want{state: "Reserved by crm-sync (worker w1); lock until ", contains: "— in ", lock: true,
		frState: "Réservée par crm-sync (exécutant w1)\u202f; verrou jusqu’à "})

	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w1",
		"error_code": "CRM_DOWN", "message": "503 from the CRM", "retryable": true, "retry_delay": "PT2H"})
	check("retry waiting", want{state: "Retry at ", contains: " UTC — in 2 h.", lastError: "Last error (attempt 1)CRM_DOWN",
		frState: "Nouvelle tentative\u202f: "})

	env.Clock.Advance(2*time.Hour + time.Second)
	check("retry due", want{state: "Waiting for a worker since ", contains: "(1 s ago)", lastError: "Last error (attempt 1)CRM_DOWN"})

	fetch("w2")
	env.Clock.Advance(2 * time.Minute) // past the one-minute lock
	check("lock lapsed", want{state: "Lock expired ", contains: "waiting to be offered again", lastError: "Last error (attempt 1)",
		frState: "Verrou expiré à "})
	r := b.mustGet(path, 200)
	if got := text(r, "attempts"); !strings.Contains(got, "expired") {
		t.Errorf("attempts %q: the lapsed attempt should read expired", got)
	}
	if got := collapse(r.doc.Find(`[data-testid=attempt-duration]`).Eq(1).Text()); got != "1 min" {
		t.Errorf("the lapsed attempt lasted %q, want its lock (1 min)", got)
	}

	fetch("w3")
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/defer", consumer, map[string]any{"worker_id": "w3", "reason": "waiting for the signed contract"})
	check("deferred", want{state: "Deferred since ", contains: "a worker of the same consumer", frState: "Différée depuis "})
	if got := text(b.mustGet(path, 200), "defer-reason"); got != "waiting for the signed contract" {
		t.Errorf("defer reason %q", got)
	}

	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/complete", consumer, map[string]any{"worker_id": "w3",
		"outputs": map[string]any{"result": "created", "crm_id": "CRM-1"}})
	check("completed", want{state: "Completed (", frState: "Terminée ("})
	if got := text(b.mustGet(path, 200), "dates"); strings.Contains(got, "Lock") || !strings.Contains(got, "Settled") || !strings.Contains(got, "Deferred") {
		t.Errorf("dates of a completed occurrence: %q, want its deferral kept", got)
	}
	// Settled, it keeps why it was deferred.
	if got := text(b.mustGet(path, 200), "defer-reason"); got != "waiting for the signed contract" {
		t.Errorf("defer reason once completed %q", got)
	}
}

// TestHandedBackAttemptsAreSaid: a release (a Camunda unlock) records an
// attempt but spends nothing; the attempts' summary says how many were
// handed back, or "3 attempts · at most 2 · 2 left" reads as a broken
// limit.
func TestHandedBackAttemptsAreSaid(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(map[string]any{"max_attempts": 2}))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	for range 3 {
		env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "lock_duration": "PT1M",
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}})
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/release", consumer, map[string]any{"worker_id": "w"})
	}
	for lang, want := range map[string]string{
		"en": "3 attempts (3 handed back, not counted) · at most 2 · 2 left",
		"fr": "3 tentatives (3 rendues, non comptées) · au plus 2 · 2 restantes",
	} {
		page := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences/"+occ, 200)
		if got := text(page, "attempts-summary"); got != want {
			t.Errorf("%s: attempts summary %q, want %q", lang, got, want)
		}
	}
}

// TestPushCallPastItsBudget: a push call whose budget has passed without a
// result (its replica may have died) is not shown as a call in progress:
// the page says when the timers fail it outcome_unknown if no result comes.
func TestPushCallPastItsBudget(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	silentCheckout(t, env, "PT10S", "PT10S")
	inst := env.Must(201, "POST", "/api/v1/processes/checkout/instances", env.Operator, map[string]any{"business_key": "order-1",
		"inputs": map[string]any{"order_id": "order-1", "amount_cents": 4200, "currency": "EUR", "card_token": canarySecret,
			"cardholder": map[string]any{"name": canarySensitive, "email": "jo@example.com"}}}).JSON(t)["id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	relaistest.WaitFor(t, 5*time.Second, "the call under way", func() (bool, string) {
		s := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)["status"].(string)
		return s == "reserved", s
	})
	b := signedIn(t, env.URL, "en", env.Operator)
	if got := text(b.mustGet("/console/occurrences/"+occ, 200), "state-text"); !strings.HasPrefix(got, "Relais is calling the destination") {
		t.Errorf("within its budget: %q", got)
	}
	env.Clock.Advance(12 * time.Second)
	got := text(b.mustGet("/console/occurrences/"+occ, 200), "state-text")
	if !strings.Contains(got, "budget (10 seconds) ended") || !strings.Contains(got, "outcome_unknown at") {
		t.Errorf("past its budget: %q", got)
	}
	fr := signedIn(t, env.URL, "fr", env.Operator)
	if got := text(fr.mustGet("/console/occurrences/"+occ, 200), "state-text"); !strings.Contains(got, "outcome_unknown") || strings.Contains(got, "budget") {
		t.Errorf("in French: %q", got)
	}
}

// TestOccurrencePageSaysNobodyTakesItsRevision: workers of the definition
// may all be live on other revisions (a process version moved on, its
// workers not yet); a waiting occurrence's page says that nobody takes its
// revision, and which revisions are taken.
func TestOccurrencePageSaysNobodyTakesItsRevision(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	working := env.Must(200, "GET", "/api/v1/definitions/add_company_to_crm", env.Designer, nil).JSON(t)["working"].(map[string]any)
	working["description"] = "revision 2"
	inputs := working["inputs"].(map[string]any)
	inputs["fields"] = append(inputs["fields"].([]any), map[string]any{"name": "region", "type": "text"})
	env.Must(200, "PUT", "/api/v1/definitions/add_company_to_crm/working", env.Designer, working)
	env.Must(201, "POST", "/api/v1/definitions/add_company_to_crm/revisions", env.Designer, nil)
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	path := "/console/occurrences/" + occ
	b := signedIn(t, env.URL, "en", env.Operator)
	fr := signedIn(t, env.URL, "fr", env.Operator)
	note := func(b *browser) string { return text(b.mustGet(path, 200), "state-note") }

	if got := note(b); got != "No live worker takes add_company_to_crm now (Workers page)." {
		t.Errorf("no worker: note %q", got)
	}
	poll := func(worker string, revisions []int) {
		t.Helper()
		env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": worker, "max_tasks": 1,
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm", "revisions": revisions}}})
	}
	poll("new-only", []int{2})
	if got := note(b); got != "No live worker takes revision 1: the live workers of add_company_to_crm take revision 2 only." {
		t.Errorf("workers on revision 2 only: note %q", got)
	}
	if got := note(fr); !strings.HasPrefix(got, "Aucun exécutant actif ne prend la révision 1") {
		t.Errorf("French note %q", got)
	}
	// One declaring an input revision 1 lacks takes only the revisions
	// that have it, as its fetches resolve: revision 1 is still nobody's.
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "fields", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm", "fields": []string{"/region"}}}})
	if got := note(b); !strings.HasPrefix(got, "No live worker takes revision 1") {
		t.Errorf("a worker declaring an input revision 1 lacks: note %q", got)
	}
	// A worker of revision 1 is live: it took one occurrence, and the
	// other, still waiting, is not said to be nobody's.
	other := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Globex"}}).JSON(t)["id"].(string)
	otherOcc := env.Must(200, "GET", "/api/v1/occurrences?instance="+other, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	poll("old", []int{1})
	for _, id := range []string{occ, otherOcc} {
		if got := text(b.mustGet("/console/occurrences/"+id, 200), "state-note"); got != "" {
			t.Errorf("a live worker takes revision 1: occurrence %s's note %q", id, got)
		}
	}
}

// An occurrence the timer failed at its deadline, its attempt having
// failed with a retry due, says the deadline passed after that attempt:
// not that the attempt failed with deadline_exceeded.
func TestDeadlineErrorIsNotPinnedOnTheAttempt(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(map[string]any{"max_attempts": 3, "retry_delay": "PT1H", "deadline": "PT10M"}))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	if len(got) != 1 {
		t.Fatalf("fetched %v", got)
	}
	occ := got[0].(map[string]any)["id"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w", "error_code": "CRM_DOWN", "retryable": true})
	env.Clock.Advance(11 * time.Minute)
	env.WaitEnded(inst, 5*time.Second)
	for lang, want := range map[string]string{"en": "Error (the deadline passed after attempt 1)", "fr": "Erreur (l’échéance est passée après la tentative 1)"} {
		summary := text(signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences/"+occ, 200), "summary")
		if !strings.Contains(summary, want+"deadline_exceeded") {
			t.Errorf("%s summary %q, want %q", lang, summary, want)
		}
	}
}

// TestGrowingRetryDelayIsShown: a policy whose retry delay grows after
// each failure says so on the occurrence's page and on its process's, in
// both languages.
func TestGrowingRetryDelayIsShown(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_backoff", relaistest.CRMProcess(map[string]any{"retry_delay": "PT10S", "retry_backoff": 2, "max_retry_delay": "PT5M"}))
	inst := env.Must(201, "POST", "/api/v1/processes/crm_backoff/instances", env.Operator,
		map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	occ := inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		want := []string{"multiplied by 2 after each failure, up to 5 minutes", "multiplié par 2 après chaque échec, jusqu’à 5 minutes"}[i]
		if got := text(b.mustGet("/console/occurrences/"+occ, 200), "policy"); !strings.Contains(got, want) {
			t.Errorf("%s: occurrence policy %q, want it to contain %q", lang, got, want)
		}
		if got := text(b.mustGet("/console/processes/crm_backoff/versions/1", 200), "nodes"); !strings.Contains(got, want) {
			t.Errorf("%s: process nodes %q, want it to contain %q", lang, got, want)
		}
	}
}

// TestProcessPolicySaysAttemptsRight: the process page counts one attempt
// in the singular and offers no retry delay for it (it read "1 attempts,
// retry after 10 seconds"), and several in the plural with their delay.
func TestProcessPolicySaysAttemptsRight(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_once", relaistest.CRMProcess(map[string]any{"max_attempts": 1, "retry_delay": "PT10S"}))
	env.Process("crm_twice", relaistest.CRMProcess(map[string]any{"max_attempts": 2, "retry_delay": "PT10S"}))
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		once, twice := text(b.mustGet("/console/processes/crm_once/versions/1", 200), "nodes"), text(b.mustGet("/console/processes/crm_twice/versions/1", 200), "nodes")
		if want := []string{"one attempt, no retry, priority", "une seule tentative, sans nouvelle tentative, priorité"}[i]; !strings.Contains(once, want) || strings.Contains(once, "10") {
			t.Errorf("%s: one attempt: %q, want %q and no delay", lang, once, want)
		}
		if want := []string{"2 attempts, retry after 10 seconds", "2 tentatives, nouvelle tentative après 10 secondes"}[i]; !strings.Contains(twice, want) {
			t.Errorf("%s: two attempts: %q, want %q", lang, twice, want)
		}
	}
}

// TestPolicyShowsTheCallsBudget: a push node's call timeout beyond its
// destination's max_timeout is shown with the budget its calls get (push
// QA: the policy said 5 seconds of calls cut at 2).
func TestPolicyShowsTheCallsBudget(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	destURL := silentCheckout(t, env, "PT5S", "PT5S")
	// Lowered after publication: the node keeps its 5 seconds, its calls
	// get 2.
	env.Must(200, "PUT", "/api/v1/destinations/payments", env.Admin, map[string]any{"url": destURL, "max_timeout": "PT2S"})
	inst := env.Must(201, "POST", "/api/v1/processes/checkout/instances", env.Operator, map[string]any{"business_key": "order-1",
		"inputs": map[string]any{"order_id": "order-1", "amount_cents": 4200, "currency": "EUR", "card_token": canarySecret,
			"cardholder": map[string]any{"name": canarySensitive, "email": "jo@example.com"}}}).JSON(t)["id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	for lang, want := range map[string]string{
		"en": "5 seconds, cut to 2 seconds by the destination’s max_timeout",
		"fr": "5 secondes, ramené à 2 secondes par le max_timeout de la destination",
	} {
		b := signedIn(t, env.URL, lang, env.Operator)
		if got := text(b.mustGet("/console/occurrences/"+occ, 200), "call-timeout"); got != want {
			t.Errorf("%s: call timeout %q, want %q", lang, got, want)
		}
	}
	// Once its call is over, the budget it had is shown, whatever the
	// destination allows since (verifier QA: it followed the destination).
	relaistest.WaitFor(t, 10*time.Second, "the call cut at its budget", func() (bool, string) {
		s := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)["status"].(string)
		return s == "failed", s
	})
	env.Must(200, "PUT", "/api/v1/destinations/payments", env.Admin, map[string]any{"url": destURL, "max_timeout": "PT5S"})
	b := signedIn(t, env.URL, "en", env.Operator)
	if got, want := text(b.mustGet("/console/occurrences/"+occ, 200), "call-timeout"), "5 seconds; its last call had 2 seconds (a destination’s max_timeout or RELAIS_PUSH_MAX_TIMEOUT cut it)"; got != want {
		t.Errorf("after the call: call timeout %q, want %q", got, want)
	}
}

// silentCheckout publishes the example checkout process on env, its charge
// node's call timeout set to timeout, pushing to a payments destination
// (max_timeout maxTimeout) that answers no call until the test ends; it
// returns the destination's URL.
func silentCheckout(t *testing.T, env *relaistest.Env, maxTimeout, timeout string) string {
	t.Helper()
	release := make(chan struct{})
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // answers only once the test is done
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "late", http.StatusServiceUnavailable)
	}))
	t.Cleanup(dest.Close)
	t.Cleanup(func() { close(release) }) // first: the calls still waiting end
	url := dest.URL + "/charge"
	env.Must(201, "PUT", "/api/v1/destinations/payments", env.Admin, map[string]any{"url": url, "max_timeout": maxTimeout})
	env.Definition("charge_card.yaml")
	checkout := relaistest.Body(relaistest.ExampleDocs(t, "processes/checkout.yaml")[0], "key")
	checkout["nodes"].(map[string]any)["charge"].(map[string]any)["timeout"] = timeout
	env.Process("checkout", checkout)
	return url
}
