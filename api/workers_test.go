package api_test

import (
	"testing"

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
