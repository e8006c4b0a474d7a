package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// A polling worker appears in the worker catalog, in the list of every
// live worker and in its definition's; an unknown definition is 404.
func TestWorkerCatalogLists(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "poller-1",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}})
	for _, path := range []string{"/api/v1/workers", "/api/v1/definitions/add_company_to_crm/workers"} {
		items := env.Must(200, "GET", path, env.Operator, nil).JSON(t)["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("%s: %v, want the poller", path, items)
		}
		w := items[0].(map[string]any)
		if w["worker_id"] != "poller-1" || w["protocol"] != "long_poll" || w["consumer"].(map[string]any)["name"] != "crm-sync" {
			t.Errorf("%s: %v", path, w)
		}
		if last, present := w["last_lapsed_at"]; w["lapsed_last_hour"] != float64(0) || last != nil || !present {
			t.Errorf("%s: lapsed_last_hour %v, last_lapsed_at %v; want 0 and null for a worker that let nothing lapse", path, w["lapsed_last_hour"], last)
		}
	}
	if r := env.Do("GET", "/api/v1/definitions/nothing_here/workers", env.Operator, nil); r.Status != 404 {
		t.Errorf("unknown definition: %d, want 404", r.Status)
	}
	if r := env.Do("GET", "/api/v1/workers", env.Designer, nil); r.Status != 403 {
		t.Errorf("designer: %d, want 403", r.Status)
	}
}

// GET /workers/lapses lists the worker ids that let locks lapse in the
// last hour, connected now or not, a definition's with ?definition=, by
// consumer then worker id, paginated: a crash-looping worker's ids are
// gone from the live list (verifier QA: only the console named them).
func TestWorkerLapsesList(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", crm)
	for _, worker := range []string{"dies-1", "dies-2"} {
		env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": worker, "max_tasks": 1, "lock_duration": "PT1S",
			"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)
		if len(got) != 1 {
			t.Fatalf("%s fetched %v", worker, got)
		}
	}
	var items []any
	relaistest.WaitFor(t, 10*time.Second, "both locks lapsed", func() (bool, string) {
		items = env.Must(200, "GET", "/api/v1/workers/lapses?definition="+crm, env.Operator, nil).JSON(t)["items"].([]any)
		return len(items) == 2, fmt.Sprint(items)
	})
	for i, it := range items {
		l := it.(map[string]any)
		if l["worker_id"] != []string{"dies-1", "dies-2"}[i] || l["lapsed_last_hour"] != 1.0 || l["live"] != true ||
			l["consumer"].(map[string]any)["name"] != "crm-sync" || l["last_lapsed_at"] == nil {
			t.Errorf("item %d: %v", i, l)
		}
	}
	first := env.Must(200, "GET", "/api/v1/workers/lapses?limit=1", env.Operator, nil).JSON(t)
	cursor, _ := first["next_cursor"].(string)
	if len(first["items"].([]any)) != 1 || cursor == "" {
		t.Fatalf("limit=1: %v, want one item and a cursor", first)
	}
	second := env.Must(200, "GET", "/api/v1/workers/lapses?limit=1&cursor="+cursor, env.Operator, nil).JSON(t)
	if it := second["items"].([]any); len(it) != 1 || it[0].(map[string]any)["worker_id"] != "dies-2" || second["next_cursor"] != nil {
		t.Errorf("second page: %v, want dies-2 alone", second)
	}
	for _, c := range []struct {
		path   string
		token  string
		status int
	}{
		{"/api/v1/workers/lapses?definition=nothing_here", env.Operator, 404},
		{"/api/v1/workers/lapses?colour=red", env.Operator, 400},
		{"/api/v1/workers/lapses", env.Designer, 403},
	} {
		if r := env.Do("GET", c.path, c.token, nil); r.Status != c.status {
			t.Errorf("%s: %d, want %d", c.path, r.Status, c.status)
		}
	}
}
