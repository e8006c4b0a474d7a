package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
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

// A read with ?wait= answers once its instance stops running (completed
// here, held below), or when the wait ends; a finished or held one at
// once. The wait is bounded as a fetch's is (evaluator QA: no way to wait
// for an outcome but polling).
func TestReadingAnInstanceWaitsForItsEnd(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t, func(c *config.Config) { c.Pull.MaxWait = 20 * time.Second })
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	id := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	path := "/api/v1/instances/" + id

	began := time.Now()
	if s := env.Must(200, "GET", path+"?wait=PT0.3S", env.Operator, nil).JSON(t)["status"]; s != "running" || time.Since(began) < 300*time.Millisecond {
		t.Fatalf("a read whose wait ended first: %v after %v, want running after 300ms", s, time.Since(began))
	}

	type answer struct {
		res  relaistest.Response
		took time.Duration
	}
	got := make(chan answer, 1)
	go func() {
		began := time.Now()
		res := env.Do("GET", path+"?wait=PT15S", env.Operator, nil)
		got <- answer{res, time.Since(began)}
	}()
	time.Sleep(300 * time.Millisecond) // the read waits meanwhile
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ["id"].(string)+"/complete", consumer, map[string]any{"worker_id": "w",
		"outputs": map[string]any{"result": "created", "crm_id": "C-1"}})
	a := <-got
	if a.res.Status != 200 || a.res.JSON(t)["status"] != "completed" || a.took < 300*time.Millisecond || a.took > 10*time.Second {
		t.Fatalf("the waiting read: %d %s after %v; want completed, answered once the worker completed", a.res.Status, a.res.Body, a.took)
	}

	began = time.Now()
	if s := env.Must(200, "GET", path+"?wait=PT15S", env.Operator, nil).JSON(t)["status"]; s != "completed" || time.Since(began) > 5*time.Second {
		t.Errorf("an ended instance read with a wait: %v after %v, want at once", s, time.Since(began))
	}
	other := relaistest.New(t)
	held := other.HeldCRMInstance("Initech")
	if s := other.Must(200, "GET", "/api/v1/instances/"+held+"?wait=PT15S", other.Operator, nil).JSON(t)["status"]; s != "held" {
		t.Errorf("a held instance read with a wait: %v, want held at once", s)
	}

	// A token revoked while its read waits is refused then, not at the
	// wait's end, as a waiting fetch's is.
	second := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Beta"}}).JSON(t)["id"].(string)
	staff := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "watcher", "role": "operator"}).JSON(t)
	go func() {
		began := time.Now()
		res := env.Do("GET", "/api/v1/instances/"+second+"?wait=PT15S", staff["token"].(string), nil)
		got <- answer{res, time.Since(began)}
	}()
	time.Sleep(300 * time.Millisecond) // the read waits meanwhile
	if r := env.Do("DELETE", fmt.Sprintf("/api/v1/tokens/%v", staff["id"]), env.Admin, nil); r.Status != 204 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	if a := <-got; a.res.Status != 401 || a.took > 10*time.Second {
		t.Errorf("the read of a token revoked while it waited: %d %s after %v; want 401 at the revocation", a.res.Status, a.res.Body, a.took)
	}

	// One that expires while its read waits, at its expiry.
	third := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Gamma"}}).JSON(t)["id"].(string)
	brief := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "brief", "role": "operator", "expires_in": "PT2S"}).JSON(t)
	began = time.Now()
	if r := env.Do("GET", "/api/v1/instances/"+third+"?wait=PT15S", brief["token"].(string), nil); r.Status != 401 || time.Since(began) > 8*time.Second {
		t.Errorf("the read of a token expiring while it waited: %d after %v; want 401 at its expiry", r.Status, time.Since(began))
	}

	for q, code := range map[string]string{"wait=soon": "invalid_request", "wait=PT21S": "bound_exceeded", "wait=PT1S&wait=PT2S": "invalid_request",
		"wait=": "invalid_request", "limit=5": "invalid_request"} {
		res := env.Do("GET", path+"?"+q, env.Operator, nil)
		if res.Status != 400 || res.JSON(t)["code"] != code {
			t.Errorf("?%s: %d %s, want 400 %s", q, res.Status, res.Body, code)
		}
	}
}
