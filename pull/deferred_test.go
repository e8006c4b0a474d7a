package pull_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// deferredPage lists the caller's deferred occurrences with query q.
func deferredPage(t *testing.T, env *relaistest.Env, token, q string) (ids []string, next string) {
	t.Helper()
	page := env.Must(200, "GET", "/api/v1/pull/deferred"+q, token, nil).JSON(t)
	for _, it := range page["items"].([]any) {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	next, _ = page["next_cursor"].(string)
	return ids, next
}

// A consumer finds its own deferred occurrences again, newest first and
// paged, filtered by definition or worker; never another consumer's,
// never one settled since, never their values.
func TestConsumerListsItsDeferredOccurrences(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"deadline": "P2D"})
	other := env.Consumer("other", crmKey)
	var deferred []string
	for i := range 3 {
		_, id := start(t, env, "crm_only", fmt.Sprint("Acme ", i))
		worker := fmt.Sprint("w", i%2)
		one(t, fetch(t, env, consumer, fetchBody(worker)), id)
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": worker, "reason": "waiting for a signature"})
		deferred = append(deferred, id)
	}
	// Another consumer's deferral, and one of ours settled since.
	_, theirs := start(t, env, "crm_only", "Other")
	one(t, fetch(t, env, other, fetchBody("x")), theirs)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+theirs+"/defer", other, map[string]any{"worker_id": "x"})
	_, settled := start(t, env, "crm_only", "Settled")
	one(t, fetch(t, env, consumer, fetchBody("w0")), settled)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+settled+"/defer", consumer, map[string]any{"worker_id": "w0"})
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+settled+"/complete", consumer, completeBody("w0", map[string]any{"result": "created", "crm_id": "CRM-1"}))

	page := env.Must(200, "GET", "/api/v1/pull/deferred", consumer, nil).JSON(t)
	items := page["items"].([]any)
	if len(items) != 3 {
		t.Fatalf("listed %v, want the consumer's three deferred occurrences", page)
	}
	newest := items[0].(map[string]any)
	if newest["id"] != deferred[2] || newest["definition"] != crmKey || newest["worker_id"] != "w0" || newest["defer_reason"] != "waiting for a signature" ||
		newest["deferred_at"] == nil || newest["deadline_at"] == nil || newest["process"] != "crm_only" || newest["attempt"] != 1.0 || newest["instance_id"] == nil {
		t.Errorf("newest item %v, want occurrence %s deferred by w0 with its reason, dates and instance", newest, deferred[2])
	}
	if _, ok := newest["inputs"]; ok {
		t.Errorf("a list item holds inputs: %v", newest)
	}

	// Paged by cursor, newest first: every one once.
	first, next := deferredPage(t, env, consumer, "?limit=2")
	rest, last := deferredPage(t, env, consumer, "?limit=2&cursor="+next)
	if got := append(first, rest...); fmt.Sprint(got) != fmt.Sprint([]string{deferred[2], deferred[1], deferred[0]}) || next == "" || last != "" {
		t.Errorf("pages %v then %v (next %q, then %q), want %v newest first", first, rest, next, last, deferred)
	}
	if ids, _ := deferredPage(t, env, consumer, "?worker_id=w1"); fmt.Sprint(ids) != fmt.Sprint([]string{deferred[1]}) {
		t.Errorf("worker w1's: %v, want [%s]", ids, deferred[1])
	}
	// A key it is not granted is a misspelling, not "none left".
	if p := wantProblem(t, "a misspelt definition", env.Do("GET", "/api/v1/pull/deferred?definition=add_company_to_cmr", consumer, nil), 400, "invalid_request"); !strings.Contains(fmt.Sprint(p["errors"]), `did you mean \"add_company_to_crm\"`) && !strings.Contains(fmt.Sprint(p["errors"]), `did you mean "add_company_to_crm"`) {
		t.Errorf("a misspelt definition: %v, want the granted key suggested", p)
	}
	wantProblem(t, "a malformed definition", env.Do("GET", "/api/v1/pull/deferred?definition=Bad..Key", consumer, nil), 400, "invalid_request")
	if ids, _ := deferredPage(t, env, other, ""); fmt.Sprint(ids) != fmt.Sprint([]string{theirs}) {
		t.Errorf("the other consumer lists %v, want only its own %s", ids, theirs)
	}

	wantProblem(t, "a misspelt filter", env.Do("GET", "/api/v1/pull/deferred?definiton="+crmKey, consumer, nil), 400, "invalid_request")
	wantProblem(t, "a bad cursor", env.Do("GET", "/api/v1/pull/deferred?cursor=xyz", consumer, nil), 400, "invalid_cursor")
	wantProblem(t, "an operator", env.Do("GET", "/api/v1/pull/deferred", env.Operator, nil), 403, "forbidden")
}
