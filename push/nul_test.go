package push_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// TestDestinationOutputsHoldingNULFailTheOccurrence: outputs holding the NUL
// character (\u0000), otherwise valid, cannot be stored by PostgreSQL;
// settling them used to fail, leaving the occurrence reserved until it was
// failed outcome_unknown. They violate the contract instead: the
// occurrence fails at once with invalid_outputs, naming the pointer.
func TestDestinationOutputsHoldingNULFailTheOccurrence(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"outputs": {"result": "created", "crm_id": "C-\u00001"}}`)
	})
	env.Must(201, "PUT", "/api/v1/destinations/crm", env.Admin, map[string]any{"url": d.URL, "max_timeout": "PT5S"})
	proc := relaistest.CRMProcess(nil)
	crm := proc["nodes"].(map[string]any)["crm"].(map[string]any)
	crm["kind"], crm["destination"], crm["timeout"] = "push", "crm", "PT1S"
	env.Process("crm_push", proc)

	inst := env.Must(201, "POST", "/api/v1/processes/crm_push/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 3*time.Second)
	path := got["path"].([]any)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+path[0].(map[string]any)["occurrence_id"].(string), env.Operator, nil).JSON(t)
	msg, _ := occ["error_message"].(string)
	if got["status"] != "failed" || occ["error_code"] != "invalid_outputs" || !strings.Contains(msg, `/crm_id: the NUL character (\u0000) is not allowed`) {
		t.Fatalf("instance %v, occurrence %v %v (%q); want failed invalid_outputs naming /crm_id and the NUL character", got["status"], occ["status"], occ["error_code"], msg)
	}
	if n := d.calls.Load(); n != 1 {
		t.Errorf("destination called %d times; want 1", n)
	}
}

// TestDestinationErrorBodyHoldingNULIsStored: a failing destination's body
// may hold raw NUL bytes, which no text column takes; the stored message
// shows them as "?" and the occurrence fails with the destination's status.
func TestDestinationErrorBodyHoldingNULIsStored(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("score_company.yaml")
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("upstream\x00down"))
	})
	env.Must(201, "PUT", "/api/v1/destinations/nul", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT2S"})
	env.Process("scoring", scoreProcess("nul", "PT1S"))
	inst := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)
	got := env.WaitEnded(inst["id"].(string), 5*time.Second)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string), env.Operator, nil).JSON(t)
	if occ["error_code"] != "destination_http_502" || occ["error_message"] != "the destination answered 502: upstream?down" {
		t.Errorf("occurrence %v %q, want destination_http_502 with the body's NUL shown as ?", occ["error_code"], occ["error_message"])
	}
}
