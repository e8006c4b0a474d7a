package pull_test

import (
	"testing"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

func TestFetchCompleteAdvancesTheInstance(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")

	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	id := inst["id"].(string)
	if inst["status"] != "running" {
		t.Fatalf("instance = %v", inst)
	}
	fetch := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{
		"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}, "max_tasks": 5, "lock_duration": "PT1M"}).JSON(t)
	occs := fetch["occurrences"].([]any)
	if len(occs) != 1 {
		t.Fatalf("fetched %v", fetch)
	}
	occ := occs[0].(map[string]any)
	if occ["inputs"].(map[string]any)["company_name"] != "Acme" || occ["attempt"] != 1.0 || occ["attempts_left"] != 2.0 {
		t.Errorf("occurrence = %v", occ)
	}
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ["id"].(string)+"/complete", consumer, map[string]any{
		"worker_id": "w1", "outputs": map[string]any{"result": "existing", "crm_id": "C-1"}}).JSON(t)
	if res["route"] != "existing" {
		t.Errorf("complete = %v", res)
	}
	got := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)
	if got["status"] != "completed" || got["end_node"] != "known" {
		t.Errorf("instance after completion = %v", got)
	}
}
