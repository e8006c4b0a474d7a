package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// TestHeldInstanceIsLoggedOnceCommitted: each instance a failure holds is
// logged once, by the replica that held it, after its commit, with where
// and why and no input value. A settle batch whose first pass held an
// instance and was rolled back (another of its items refused) ran again,
// item by item: the instance it held is logged once, not twice.
func TestHeldInstanceIsLoggedOnceCommitted(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	first := env.HeldCRMInstance("Acme Confidential")
	heldLines(t, env, first, 1)

	consumer := env.Consumer("crm-batch", "add_company_to_crm")
	start := func(name string) string {
		return env.Must(201, "POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{
			"inputs": map[string]any{"name": name}}).JSON(t)["id"].(string)
	}
	fetch := func() string {
		return env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "wb",
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)["id"].(string)
	}
	second := start("Beta Confidential")
	res := env.Must(200, "POST", "/api/v1/pull/settle", consumer, map[string]any{"worker_id": "wb", "items": []any{
		map[string]any{"id": fetch(), "error_code": "CRM_LOCKED", "message": "locked", "retryable": false},
		map[string]any{"id": "0190f3c2-5a4e-7d2a-9b1e-3f2c1d0e9a8b", "outputs": map[string]any{"result": "created", "crm_id": "C"}},
	}}).JSON(t)["items"].([]any)
	if s := res[0].(map[string]any)["status"]; s != 200.0 {
		t.Fatalf("the batch's first item: %v, want 200", res[0])
	}
	if s := res[1].(map[string]any)["status"]; s == 200.0 {
		t.Fatalf("the batch's second item (no such occurrence): %v, want refused", res[1])
	}
	if s := env.Must(200, "GET", "/api/v1/instances/"+second, env.Operator, nil).JSON(t)["status"]; s != "held" {
		t.Fatalf("instance held by the batch is %v", s)
	}
	// Notifications arrive in commit order: once a later hold is logged,
	// a second line for the batch's would have been too.
	third := start("Gamma Confidential")
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+fetch()+"/fail", consumer, map[string]any{"worker_id": "wb",
		"error_code": "CRM_LOCKED", "message": "locked", "retryable": false})
	heldLines(t, env, third, 1)
	heldLines(t, env, second, 1)
	heldLines(t, env, first, 1)
}

// heldLines waits until the log holds want "instance held" lines for the
// instance id, and checks what each says.
func heldLines(t *testing.T, env *relaistest.Env, id string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var lines []string
		for line := range strings.SplitSeq(env.Logs.String(), "\n") {
			if strings.Contains(line, `msg="instance held`) && strings.Contains(line, "instance="+id) {
				lines = append(lines, line)
			}
		}
		if len(lines) > want {
			t.Fatalf("%d lines log instance %s held, want %d:\n%s", len(lines), id, want, strings.Join(lines, "\n"))
		}
		if len(lines) == want {
			for _, line := range lines {
				for _, part := range []string{"level=WARN", "process=crm_hold", "version=1", "node=crm", "definition=add_company_to_crm", "code=CRM_LOCKED"} {
					if !strings.Contains(line, part) {
						t.Errorf("the line lacks %s: %s", part, line)
					}
				}
				if strings.Contains(line, "Confidential") {
					t.Errorf("the line quotes an input: %s", line)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line logs instance %s held after 10 s; log:\n%s", id, env.Logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
