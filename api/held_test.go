package api_test

import (
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// TestHeldInstanceIsObservedAndStopped: an instance a failure held shows
// status held with its error code, is found by the status filter, and a
// stop cancels it.
func TestHeldInstanceIsObservedAndStopped(t *testing.T) {
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

	inst := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)
	path := inst["path"].([]any)
	if inst["status"] != "held" || inst["error_code"] != "CRM_LOCKED" || inst["ended_at"] != nil || len(path) != 1 ||
		path[0].(map[string]any)["status"] != "failed" || path[0].(map[string]any)["error_code"] != "CRM_LOCKED" {
		t.Fatalf("held instance: %v", inst)
	}
	items := env.Must(200, "GET", "/api/v1/instances?status=held", env.Operator, nil).JSON(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != id {
		t.Fatalf("status=held: %v; want the held instance", items)
	}
	stopped := env.Must(200, "POST", "/api/v1/instances/"+id+"/stop", env.Operator, map[string]any{"reason": "test stop"}).JSON(t)
	if stopped["status"] != "cancelled" || stopped["ended_at"] == nil {
		t.Fatalf("stop of a held instance: %v; want cancelled", stopped)
	}
}
