package api_test

import (
	"context"
	"strings"
	"testing"
)

// An admin erases one ended instance at once: it goes with its
// occurrences and attempts (nothing of it left in any table), recorded in
// the audit log; running and held ones are refused, and asking again
// answers the first erasure.
func TestEraseAnEndedInstance(t *testing.T) {
	t.Parallel()
	env, consumer, hold := incidents(t)
	a, occ := hold("Erasable Subject GmbH")
	kept, keptOcc := hold("Globex")

	erase := func(id, token string, body any) (int, string, map[string]any, string) {
		r := env.Do("POST", "/api/v1/instances/"+id+"/erase", token, body)
		var m map[string]any
		if r.Status == 200 {
			m = r.JSON(t)
		}
		return r.Status, r.Code(), m, r.Header.Get("Relais-Applied")
	}
	reason := map[string]any{"reason": "DSR-4411"}
	if st, code, _, _ := erase(a, env.Admin, reason); st != 409 || code != "instance_not_ended" {
		t.Errorf("erasing a held instance: %d %s, want 409 instance_not_ended", st, code)
	}
	env.Must(200, "POST", "/api/v1/instances/"+a+"/abandon", env.Operator, map[string]any{"reason": "customer left"})
	if st, _, _, _ := erase(a, env.Operator, reason); st != 403 {
		t.Errorf("erasure by an operator: %d, want 403 (admins only)", st)
	}
	if st, code, _, _ := erase(a, env.Admin, map[string]any{"reason": "  "}); st != 400 || code != "invalid_request" {
		t.Errorf("erasure without a reason: %d %s, want 400 invalid_request", st, code)
	}

	st, _, got, applied := erase(a, env.Admin, reason)
	if st != 200 || applied != "true" || got["instance_id"] != a || got["occurrences"] != 1.0 || got["attempts"] != 1.0 || got["erased_by"] != "admin" {
		t.Fatalf("erasure: %d applied %q %v, want 200 applied, one occurrence and one attempt, by admin", st, applied, got)
	}
	if r := env.Do("GET", "/api/v1/instances/"+a, env.Operator, nil); r.Status != 404 {
		t.Errorf("GET the erased instance: %d, want 404", r.Status)
	}
	if r := env.Do("GET", "/api/v1/occurrences/"+occ, env.Operator, nil); r.Status != 404 {
		t.Errorf("GET the erased instance's occurrence: %d, want 404", r.Status)
	}
	var left int
	if err := env.Pool.QueryRow(context.Background(), `select
		(select count(*) from instances where id = $1) +
		(select count(*) from occurrences where instance_id = $1 or id = $2 or business_key like 'Erasable%') +
		(select count(*) from attempts where occurrence_id = $2)`, a, occ).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d rows of the erased instance left in instances, occurrences and attempts, want none", left)
	}
	if r := env.Do("GET", "/api/v1/instances/"+kept, env.Operator, nil); r.Status != 200 {
		t.Errorf("another instance after the erasure: %d, want 200", r.Status)
	}
	if r := env.Do("GET", "/api/v1/occurrences/"+keptOcc, env.Operator, nil); r.Status != 200 {
		t.Errorf("another instance's occurrence after the erasure: %d, want 200", r.Status)
	}

	recs := env.Must(200, "GET", "/api/v1/audit/actions?action=erase&instance="+a, env.Operator, nil).JSON(t)["items"].([]any)
	if len(recs) != 1 {
		t.Fatalf("erase records: %v, want one", recs)
	}
	rec := recs[0].(map[string]any)
	if rec["reason"] != "DSR-4411" || rec["actor"] != "admin" || rec["instance_deleted"] != true || rec["id"] != got["audit_id"] || rec["at"] != got["erased_at"] {
		t.Errorf("erase record %v, want the reason, the admin, instance_deleted and the answer's audit_id and erased_at %v %v", rec, got["audit_id"], got["erased_at"])
	}
	if n := len(env.Must(200, "GET", "/api/v1/audit/actions?instance="+a, env.Operator, nil).JSON(t)["items"].([]any)); n != 2 {
		t.Errorf("audit records of the erased instance: %d, want 2 (the abandon's stays)", n)
	}

	st, _, again, applied := erase(a, env.Admin, map[string]any{"reason": "asked twice"})
	if st != 200 || applied != "false" || again["audit_id"] != got["audit_id"] || again["occurrences"] != 0.0 || again["erased_at"] != got["erased_at"] {
		t.Errorf("erasing again: %d applied %q %v, want 200, not applied, the first erasure's record", st, applied, again)
	}
	if n := len(env.Must(200, "GET", "/api/v1/audit/actions?action=erase", env.Operator, nil).JSON(t)["items"].([]any)); n != 1 {
		t.Errorf("erase records after asking twice: %d, want 1", n)
	}
	if st, code, _, _ := erase("0190b5a0-0000-7000-8000-000000000000", env.Admin, reason); st != 404 || code != "not_found" {
		t.Errorf("erasing an unknown instance: %d %s, want 404", st, code)
	}

	// A stopped instance whose occurrence a worker still holds: erased,
	// the worker's settlement finds nothing, and the start's idempotency
	// key starts a new instance.
	start := func() string {
		r := env.Do("POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Initech"}}, "Idempotency-Key", "order-77")
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("start: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)["id"].(string)
	}
	c := start()
	got2 := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	if len(got2) != 1 {
		t.Fatalf("fetched %v, want one", got2)
	}
	cOcc := got2[0].(map[string]any)["id"].(string)
	if st, code, _, _ := erase(c, env.Admin, reason); st != 409 || code != "instance_not_ended" {
		t.Errorf("erasing a running instance: %d %s, want 409 instance_not_ended", st, code)
	}
	env.Must(200, "POST", "/api/v1/instances/"+c+"/stop", env.Operator, map[string]any{"reason": "duplicate"})
	if st, _, _, _ := erase(c, env.Admin, reason); st != 200 {
		t.Fatalf("erasing a stopped instance: %d, want 200", st)
	}
	r := env.Do("POST", "/api/v1/pull/occurrences/"+cOcc+"/complete", consumer, map[string]any{"worker_id": "w", "outputs": map[string]any{"crm_id": "C-1"}})
	if r.Status != 404 || r.Code() != "not_found" {
		t.Errorf("completing an erased occurrence: %d %s, want 404 not_found", r.Status, r.Body)
	}
	if again := start(); again == c {
		t.Errorf("a start repeating the erased instance's Idempotency-Key answered it again (%s), want a new instance", c)
	}
	if !strings.Contains(env.Logs.String(), `"instance erased"`) {
		t.Errorf("no log line for the erasure")
	}
}
