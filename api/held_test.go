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
	id := env.HeldCRMInstance("Acme")

	inst := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)
	path := inst["path"].([]any)
	if inst["status"] != "held" || inst["error_code"] != "CRM_LOCKED" || inst["ended_at"] != nil || len(path) != 1 ||
		path[0].(map[string]any)["status"] != "failed" || path[0].(map[string]any)["error_code"] != "CRM_LOCKED" {
		t.Fatalf("held instance: %v", inst)
	}
	// Where it waits, without scanning the path.
	if h, _ := inst["held_at"].(map[string]any); h["node"] != "crm" || h["definition"] != "add_company_to_crm" || h["occurrence_id"] != path[0].(map[string]any)["occurrence_id"] {
		t.Errorf("held_at %v, want the failed occurrence at crm", inst["held_at"])
	}
	items := env.Must(200, "GET", "/api/v1/instances?status=held", env.Operator, nil).JSON(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != id {
		t.Fatalf("status=held: %v; want the held instance", items)
	}
	stopped := env.Must(200, "POST", "/api/v1/instances/"+id+"/stop", env.Operator, map[string]any{"reason": "test stop"}).JSON(t)
	if stopped["status"] != "cancelled" || stopped["ended_at"] == nil || stopped["held_at"] != nil {
		t.Fatalf("stop of a held instance: %v; want cancelled", stopped)
	}
}
