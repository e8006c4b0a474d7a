package pull_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A report Relais refuses is noted on the attempt of the worker that sent
// it: how many, the last one's code and pointers, never its values. An
// attempt whose lock then lapsed read as a worker that never answered, and
// its incident as a lock to lengthen (Camunda QA). A report refused for
// the reporter's standing (another worker's, a settled occurrence) is
// noted nowhere.
func TestRefusedReportsAreNotedOnTheirAttempt(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 1})
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	refusedOf := func() map[string]any {
		t.Helper()
		as := attemptsOf(t, observe(t, env, id))
		if len(as) != 1 {
			t.Fatalf("attempts %v, want one", as)
		}
		r, _ := as[0]["refused_reports"].(map[string]any)
		return r
	}
	if r, ok := attemptsOf(t, observe(t, env, id))[0]["refused_reports"]; !ok || r != nil {
		t.Fatalf("refused_reports before any refusal: %v (present %v), want null", r, ok)
	}
	secret := "not-a-result-SECRET"
	wantProblem(t, "invalid outputs", act(env, consumer, id, "complete", completeBody("w1", map[string]any{"result": secret, "crm_id": "C-1"})), 422, "invalid_outputs")
	r := refusedOf()
	if r == nil || r["count"] != 1.0 || r["code"] != "invalid_outputs" || fmt.Sprint(r["pointers"]) != "[/outputs/result]" || r["last_at"] == nil {
		t.Fatalf("refused_reports after an invalid completion: %v; want 1, invalid_outputs at /outputs/result", r)
	}
	if body := env.Must(200, "GET", "/api/v1/occurrences/"+id, env.Operator, nil).Body; strings.Contains(string(body), secret) {
		t.Error("the refused value is shown")
	}
	// A failure the engine cannot record counts too.
	wantProblem(t, "a delay without retryable", act(env, consumer, id, "fail", failBody("w1", "retryable", false, "retry_delay", "PT1S")), 400, "invalid_request")
	if r := refusedOf(); r["count"] != 2.0 || r["code"] != "invalid_request" || fmt.Sprint(r["pointers"]) != "[/retry_delay]" {
		t.Errorf("refused_reports after a refused failure: %v; want 2, invalid_request at /retry_delay", r)
	}
	// So does a body refused as it is read: outputs written at the top
	// level are an unknown member (verifier QA: not noted).
	wantProblem(t, "outputs at the top level", act(env, consumer, id, "complete", map[string]any{"worker_id": "w1", "result": "created"}), 400, "unknown_field")
	if r := refusedOf(); r["count"] != 3.0 || r["code"] != "unknown_field" {
		t.Errorf("refused_reports after an unknown member: %v; want 3, unknown_field", r)
	}
	// Another worker's report is refused for its standing, not noted.
	wantProblem(t, "another worker", act(env, consumer, id, "complete", completeBody("w2", map[string]any{"result": "bad"})), 409, "locked_by_other_worker")
	other := env.Consumer("other", crmKey)
	act(env, other, id, "complete", completeBody("w1", map[string]any{"result": "bad"}))
	if r := refusedOf(); r["count"] != 3.0 {
		t.Errorf("refused_reports after other workers' reports: %v; want still 3", r)
	}
	// The lock lapses: a late report refused is not noted (the worker
	// did not answer in time: verifier QA), and the incident keeps the
	// refusals made while it held the lock.
	env.Clock.Advance(2 * time.Minute)
	act(env, consumer, id, "fail", failBody("w1", "retryable", false, "retry_delay", "PT1S"))
	if r := refusedOf(); r["count"] != 3.0 {
		t.Errorf("refused_reports after a late refused report: %v; want still 3", r)
	}
	occ := waitStatus(t, env, id, "failed", 5*time.Second)
	if occ["error_code"] != "attempts_exhausted" {
		t.Fatalf("after the lock lapsed: %v %v, want attempts_exhausted", occ["status"], occ["error_code"])
	}
	if r := refusedOf(); r["count"] != 3.0 {
		t.Errorf("refused_reports of the expired attempt: %v; want kept", r)
	}
}
