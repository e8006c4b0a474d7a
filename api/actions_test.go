package api_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// incidents starts Relais with a process whose CRM node holds the instance
// on any failure (max_attempts 1), and returns a helper that starts an
// instance and makes it held.
func incidents(t *testing.T) (*relaistest.Env, string, func(name string) (instance, occurrence string)) {
	t.Helper()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	doc := relaistest.CRMProcess(map[string]any{"max_attempts": 1})
	doc["nodes"].(map[string]any)["crm"].(map[string]any)["on_error"] = "hold"
	delete(doc["nodes"].(map[string]any), "failed")
	env.Process("crm_hold", doc)
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	hold := func(name string) (string, string) {
		t.Helper()
		inst := env.Must(201, "POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{
			"inputs": map[string]any{"name": name}, "business_key": name}).JSON(t)
		occ := inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 1,
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
		if len(got) != 1 || got[0].(map[string]any)["id"] != occ {
			t.Fatalf("fetched %v, want %s", got, occ)
		}
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w",
			"error_code": "CRM_DOWN", "message": "503", "retryable": true})
		if s := env.Must(200, "GET", "/api/v1/instances/"+inst["id"].(string), env.Operator, nil).JSON(t)["status"]; s != "held" {
			t.Fatalf("instance %v, want held", s)
		}
		return inst["id"].(string), occ
	}
	return env, consumer, hold
}

// Retry offers the held occurrence again with a fresh max_attempts, its
// history kept, and the instance runs on; abandon fails it abandoned; each
// needs a reason and is recorded in the audit log with who and why.
func TestRetryAndAbandonHeldInstances(t *testing.T) {
	t.Parallel()
	env, consumer, hold := incidents(t)
	a, occ := hold("Acme")
	b, _ := hold("Globex")

	if r := env.Do("POST", "/api/v1/instances/"+a+"/retry", env.Operator, map[string]any{}); r.Status != 400 || r.Code() != "invalid_request" {
		t.Errorf("retry without a reason: %d %s, want 400", r.Status, r.Body)
	}
	// Without a body, the missing member is named, not the empty body.
	if r := env.Do("POST", "/api/v1/instances/"+a+"/retry", env.Operator, nil); r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"/reason"`) {
		t.Errorf("retry without a body: %d %s, want 400 invalid_request at /reason", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/instances/"+a+"/retry", env.Designer, map[string]any{"reason": "x"}); r.Status != 403 {
		t.Errorf("retry by a designer: %d, want 403", r.Status)
	}
	inst := env.Must(200, "POST", "/api/v1/instances/"+a+"/retry", env.Operator, map[string]any{"reason": "CRM is back"}).JSON(t)
	if inst["status"] != "running" || inst["error_code"] != nil {
		t.Errorf("after retry: %v %v, want running without error", inst["status"], inst["error_code"])
	}
	o := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)
	if o["status"] != "available" || o["attempts_left"] != 1.0 || len(o["attempts"].([]any)) != 1 || o["settled_at"] != nil {
		t.Errorf("retried occurrence: status %v attempts_left %v attempts %v settled %v; want available, a fresh budget, history kept",
			o["status"], o["attempts_left"], len(o["attempts"].([]any)), o["settled_at"])
	}
	if r := env.Do("POST", "/api/v1/instances/"+a+"/retry", env.Operator, map[string]any{"reason": "again"}); r.Status != 409 || r.Code() != "not_held" {
		t.Errorf("retry of a running instance: %d %s, want 409 not_held", r.Status, r.Body)
	}
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w2",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["attempt"] != 2.0 {
		t.Fatalf("after retry fetched %v, want attempt 2 of %s", got, occ)
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/complete", consumer, map[string]any{"worker_id": "w2",
		"outputs": map[string]any{"result": "created", "crm_id": "C-1"}})
	if s := env.Must(200, "GET", "/api/v1/instances/"+a, env.Operator, nil).JSON(t)["status"]; s != "completed" {
		t.Errorf("retried instance %v, want completed", s)
	}

	ab := env.Must(200, "POST", "/api/v1/instances/"+b+"/abandon", env.Operator, map[string]any{"reason": "duplicate company"}).JSON(t)
	if ab["status"] != "failed" || ab["error_code"] != "abandoned" || ab["ended_at"] == nil {
		t.Errorf("abandoned: %v", ab)
	}
	if r := env.Do("POST", "/api/v1/instances/"+b+"/retry", env.Operator, map[string]any{"reason": "x"}); r.Status != 409 || r.Code() != "not_held" {
		t.Errorf("retry of an abandoned instance: %d, want 409 not_held", r.Status)
	} else if msg := r.JSON(t)["detail"].(string); !strings.Contains(msg, "was abandoned") || !strings.Contains(msg, "start a new instance") {
		t.Errorf("retry of an abandoned instance: %q, want it to say it was abandoned and to start a new instance", msg)
	}

	log := env.Must(200, "GET", "/api/v1/audit/actions", env.Operator, nil).JSON(t)["items"].([]any)
	if len(log) != 2 {
		t.Fatalf("audit log %v, want 2 records", log)
	}
	last, first := log[0].(map[string]any), log[1].(map[string]any)
	if last["action"] != "abandon" || last["reason"] != "duplicate company" || last["instance_id"] != b || last["actor"] != "operator" || last["at"] == nil ||
		first["action"] != "retry" || first["reason"] != "CRM is back" || first["occurrence_id"] != occ || first["brought_forward"] != false {
		t.Errorf("audit log %v", log)
	}
	if one := env.Must(200, "GET", "/api/v1/audit/actions?instance="+a, env.Operator, nil).JSON(t)["items"].([]any); len(one) != 1 {
		t.Errorf("audit log of one instance: %v", one)
	}

	// Token names are not unique: the record says which token acted, and
	// its role, so that two tokens named alike are told apart.
	if last["actor_role"] != "operator" || last["actor_token_id"] == nil || last["instance_deleted"] != false {
		t.Errorf("the operator's record: %v, want its token id, role operator, instance not deleted", last)
	}
	twin := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "operator", "role": "admin"}).JSON(t)
	c, _ := hold("Initech")
	env.Must(200, "POST", "/api/v1/instances/"+c+"/stop", twin["token"].(string), map[string]any{"reason": "twin"})
	stop := env.Must(200, "GET", "/api/v1/audit/actions?action=stop", env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)
	if stop["actor"] != "operator" || stop["actor_role"] != "admin" || stop["actor_token_id"] != twin["id"] || stop["actor_token_id"] == last["actor_token_id"] {
		t.Errorf("the twin's record: %v, want actor operator, role admin, token %v", stop, twin["id"])
	}
}

// Concurrent retries and abandons of one held instance: exactly one is
// applied, the others are refused (409 not_held), and the audit log has

// An instance whose failure ended it (its node routes no failure to hold)
// cannot be retried: the refusal says what would have held it.
func TestRetryOfAFailedInstanceSaysWhatHolds(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", crm)
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w1", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)
	if len(got) != 1 {
		t.Fatalf("fetched %v", got)
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+got[0].(map[string]any)["id"].(string)+"/fail", consumer,
		map[string]any{"worker_id": "w1", "error_code": "CRM_DOWN", "message": "CRM down", "retryable": false})
	if s := env.Must(200, "GET", "/api/v1/instances/"+inst, env.Operator, nil).JSON(t)["status"]; s != "failed" {
		t.Fatalf("instance %v, want failed", s)
	}
	r := env.Do("POST", "/api/v1/instances/"+inst+"/retry", env.Operator, map[string]any{"reason": "CRM is back"})
	if r.Status != 409 || r.Code() != "not_held" {
		t.Fatalf("retry of a failed instance: %d %s, want 409 not_held", r.Status, r.Body)
	}
	if msg := r.JSON(t)["detail"].(string); !strings.Contains(msg, "on_error leads to hold") {
		t.Errorf("retry of a failed instance: %q, want it to say a failure is held with on_error: hold", msg)
	}
}

// one record.
func TestConcurrentActionsApplyOnce(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	id, _ := hold("Acme")
	var wg sync.WaitGroup
	statuses := make([]int, 12)
	for i := range statuses {
		action := []string{"retry", "abandon"}[i%2]
		wg.Go(func() {
			statuses[i] = env.Do("POST", "/api/v1/instances/"+id+"/"+action, env.Operator, map[string]any{"reason": "race"}).Status
		})
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		if s == 200 {
			ok++
		}
	}
	log := env.Must(200, "GET", "/api/v1/audit/actions?instance="+id, env.Operator, nil).JSON(t)["items"].([]any)
	if len(log) != 1 || ok != 1 {
		t.Errorf("statuses %v, audit %v; want one applied action", statuses, log)
	}
}

// A bulk action is counted, then applied when the count is confirmed; a
// stale count is refused whole; a repeat matches nothing.
func TestBulkActions(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	for i := range 3 {
		hold(fmt.Sprint("C", i))
	}
	filter := map[string]any{"process": "crm_hold"}
	count := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "cleanup", "filter": filter}).JSON(t)
	if count["count"] != 3.0 || count["applied"] != false {
		t.Fatalf("count = %v, want 3, nothing applied", count)
	}
	hold("C3")
	const refused = "0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e99"
	stale := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "cleanup", "filter": filter, "confirm_count": 3, "bulk_id": refused})
	if stale.Status != 409 || stale.Code() != "count_changed" || stale.JSON(t)["count"] != 4.0 {
		t.Errorf("stale confirmation: %d %s, want 409 count_changed with count 4", stale.Status, stale.Body)
	}
	if r := env.Do("GET", "/api/v1/audit/bulk/"+refused, env.Operator, nil); r.Status != 404 {
		t.Errorf("a bulk action refused for its count left a record: %d %s", r.Status, r.Body)
	}
	if n := len(env.Must(200, "GET", "/api/v1/instances?status=held", env.Operator, nil).JSON(t)["items"].([]any)); n != 4 {
		t.Errorf("%d held after a refused bulk action, want 4", n)
	}
	if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": map[string]any{"status": "running"}}); r.Status != 400 {
		t.Errorf("abandon of running instances: %d, want 400", r.Status)
	}
	// A retry of running ones brings forward the retries that wait: none.
	if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "retry", "reason": "x", "filter": map[string]any{"status": "running"}}); r.Status != 200 || r.JSON(t)["count"] != 0.0 {
		t.Errorf("retry of running instances: %d %s, want a count of 0", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "retry", "reason": "x", "filter": map[string]any{"status": "failed"}}); r.Status != 400 ||
		!strings.Contains(r.JSON(t)["detail"].(string), "on_error leads to hold") {
		t.Errorf("retry of failed instances: %d %s, want 400 saying what holds a failure", r.Status, r.Body)
	}
	for _, bad := range []string{"nope", "00000000-0000-0000-0000-000000000000"} {
		if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "cleanup", "filter": filter, "confirm_count": 4, "bulk_id": bad}); r.Status != 400 || !strings.Contains(string(r.Body), `"path":"/bulk_id"`) {
			t.Errorf("bulk_id %q: %d %s, want 400 at /bulk_id", bad, r.Status, r.Body)
		}
	}
	// The client names the action, to follow its records while it runs.
	const chosen = "0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e0f"
	done := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "cleanup", "filter": filter, "confirm_count": 4, "bulk_id": chosen}).JSON(t)
	if done["applied_count"] != 4.0 || done["skipped_count"] != 0.0 || done["bulk_id"] != chosen {
		t.Errorf("bulk abandon = %v, want 4 applied under bulk_id %s", done, chosen)
	}
	again := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "cleanup", "filter": filter}).JSON(t)
	if again["count"] != 0.0 {
		t.Errorf("repeated bulk action matches %v, want 0", again["count"])
	}
	// Its record says what was asked and how it ended, after the answer.
	rec := env.Must(200, "GET", "/api/v1/audit/bulk/"+chosen, env.Operator, nil).JSON(t)
	for k, want := range map[string]any{"bulk_id": chosen, "action": "abandon", "reason": "cleanup", "actor": "operator", "actor_role": "operator", "matched_count": 4.0,
		"applied_count": 4.0, "skipped_count": 0.0, "status": "completed"} {
		if rec[k] != want {
			t.Errorf("the bulk record's %s = %v, want %v", k, rec[k], want)
		}
	}
	if f, _ := rec["filter"].(map[string]any); len(f) != 1 || f["process"] != "crm_hold" || rec["ended_at"] == nil {
		t.Errorf("the bulk record's filter %v and end %v", rec["filter"], rec["ended_at"])
	}
	// The same request again (a client that lost the answer) is told the
	// action ran, not that the count changed; nothing more is applied.
	if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "cleanup", "filter": filter, "confirm_count": 4, "bulk_id": chosen}); r.Status != 409 || r.Code() != "bulk_exists" {
		t.Errorf("the same bulk request again: %d %s, want 409 bulk_exists", r.Status, r.Body)
	}
	if r := env.Do("GET", "/api/v1/audit/bulk/0193a5c4-6b2e-7c3d-9e4f-000000000000", env.Operator, nil); r.Status != 404 {
		t.Errorf("an unknown bulk action: %d %s", r.Status, r.Body)
	}
	log := env.Must(200, "GET", "/api/v1/audit/actions?action=abandon", env.Operator, nil).JSON(t)["items"].([]any)
	if len(log) != 4 || log[0].(map[string]any)["bulk_id"] != done["bulk_id"] {
		t.Errorf("audit log %v, want 4 records of the bulk action", log)
	}
	// The records of one bulk action, by its bulk_id; a single action
	// taken since is not among them.
	single, _ := hold("C4")
	env.Must(200, "POST", "/api/v1/instances/"+single+"/abandon", env.Operator, map[string]any{"reason": "one"})
	bulk := env.Must(200, "GET", "/api/v1/audit/actions?bulk="+done["bulk_id"].(string), env.Operator, nil).JSON(t)["items"].([]any)
	if len(bulk) != 4 {
		t.Errorf("audit log of the bulk action: %d records, want its 4", len(bulk))
	}
	for _, r := range bulk {
		if r.(map[string]any)["bulk_id"] != done["bulk_id"] {
			t.Errorf("audit log of the bulk action holds %v", r)
		}
	}
	if r := env.Do("GET", "/api/v1/audit/actions?bulk=nope", env.Operator, nil); r.Status != 400 || !strings.Contains(string(r.Body), `"path":"bulk"`) {
		t.Errorf("a bulk filter that is no id: %d %s, want 400 at bulk", r.Status, r.Body)
	}
}

// A bulk retry counts only the held instances it can offer again: one held
// from birth (its inputs could not be built, a single retry answers 409
// not_retryable) is neither counted nor reported as skipped, so the count
// confirmed and the count applied agree.
func TestBulkRetryLeavesOutWhatCannotBeRetried(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	retryable, _ := hold("Acme")
	// company_name is at most 200 bytes: the CRM occurrence fails at
	// creation with invalid_inputs, which holds the instance.
	birth := env.Must(201, "POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": strings.Repeat("x", 201)}}).JSON(t)
	if birth["status"] != "held" || birth["error_code"] != "invalid_inputs" {
		t.Fatalf("instance with invalid inputs: %v %v, want held with invalid_inputs", birth["status"], birth["error_code"])
	}
	unretryable := birth["id"].(string)
	if r := env.Do("POST", "/api/v1/instances/"+unretryable+"/retry", env.Operator, map[string]any{"reason": "x"}); r.Status != 409 || r.Code() != "not_retryable" {
		t.Fatalf("single retry of an instance held from birth: %d %s, want 409 not_retryable", r.Status, r.Body)
	}

	filter := map[string]any{"process": "crm_hold", "status": "held"}
	count := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "retry", "reason": "CRM is back", "filter": filter}).JSON(t)
	if count["may_have_acted_count"] != 0.0 {
		t.Errorf("a pull node's retry count: may_have_acted_count %v, want 0", count["may_have_acted_count"])
	}
	if count["count"] != 1.0 || count["not_retryable_count"] != 1.0 {
		t.Fatalf("bulk retry count = %v, not_retryable_count %v; want 1 and 1 (the instance held from birth cannot be retried, and the answer says so)", count["count"], count["not_retryable_count"])
	}
	if b := fmt.Sprint(count["breakdown"]); b != "[map[count:1 error_code:CRM_DOWN process:crm_hold]]" {
		t.Errorf("bulk retry breakdown = %s, want the one CRM_DOWN instance it retries", b)
	}
	done := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "retry", "reason": "CRM is back", "filter": filter, "confirm_count": 1}).JSON(t)
	if done["applied_count"] != 1.0 || done["skipped_count"] != 0.0 {
		t.Errorf("bulk retry = %v, want 1 applied, 0 skipped", done)
	}
	for id, want := range map[string]string{retryable: "running", unretryable: "held"} {
		if s := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)["status"]; s != want {
			t.Errorf("instance %s is %v after the bulk retry, want %s", id, s, want)
		}
	}
	// Abandon applies to every held instance, this one included.
	if n := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": filter}).JSON(t)["count"]; n != 1.0 {
		t.Errorf("bulk abandon count = %v, want 1", n)
	}
}

// Incidents are found and acted on by their error code: the list filters
// by it, a bulk action's count says what its instances are by process and
// error code, and a bulk action on one error code leaves the others held.
func TestBulkActionsByErrorCode(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	down1, _ := hold("A")
	down2, _ := hold("B")
	birth := env.Must(201, "POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": strings.Repeat("x", 201)}}).JSON(t)
	invalid := birth["id"].(string)
	ids := func(query string) []string {
		t.Helper()
		var out []string
		for _, it := range env.Must(200, "GET", "/api/v1/instances?"+query, env.Operator, nil).JSON(t)["items"].([]any) {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	if got := ids("error_code=CRM_DOWN"); len(got) != 2 || got[0] != down2 || got[1] != down1 {
		t.Errorf("instances with error_code CRM_DOWN = %v, want [%s %s]", got, down2, down1)
	}
	if got := ids("status=held&error_code=invalid_inputs"); len(got) != 1 || got[0] != invalid {
		t.Errorf("held instances with error_code invalid_inputs = %v, want [%s]", got, invalid)
	}
	if got := ids("error_code=crm_down"); len(got) != 0 {
		t.Errorf("instances with error_code crm_down = %v, want none (codes are exact)", got)
	}
	if got := ids("held_at=add_company_to_crm"); len(got) != 3 {
		t.Errorf("instances held at add_company_to_crm = %v, want all 3", got)
	}
	if r := env.Do("GET", "/api/v1/instances?held_at=crm_hold", env.Operator, nil); r.Status != 400 || !strings.Contains(string(r.Body), `"path":"held_at"`) {
		t.Errorf("instances held at crm_hold (a process, not a definition): %d %s, want 400 at held_at", r.Status, r.Body)
	}
	// A blank or padded text filter would match nothing and read as
	// "none": refused, as an empty one is.
	for _, query := range []string{"error_code=%20", "error_code=%20CRM_DOWN", "business_key=A%20", "process=%09"} {
		for _, list := range []string{"/api/v1/instances?", "/api/v1/occurrences?"} {
			if r := env.Do("GET", list+query, env.Operator, nil); r.Status != 400 || r.Code() != "invalid_request" {
				t.Errorf("GET %s%s: %d %s, want 400 invalid_request", list, query, r.Status, r.Body)
			}
		}
	}

	count := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": map[string]any{"process": "crm_hold"}}).JSON(t)
	breakdown := fmt.Sprint(count["breakdown"])
	if count["count"] != 3.0 || breakdown != "[map[count:2 error_code:CRM_DOWN process:crm_hold] map[count:1 error_code:invalid_inputs process:crm_hold]]" {
		t.Errorf("bulk abandon count = %v, breakdown %s, want 3: 2 CRM_DOWN then 1 invalid_inputs", count["count"], breakdown)
	}
	filter := map[string]any{"error_code": "CRM_DOWN"}
	count = env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": filter}).JSON(t)
	if count["count"] != 2.0 || len(count["breakdown"].([]any)) != 1 {
		t.Fatalf("bulk abandon count of CRM_DOWN = %v, want 2 in one group", count)
	}
	done := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": filter, "confirm_count": 2}).JSON(t)
	if done["applied_count"] != 2.0 || done["skipped_count"] != 0.0 {
		t.Errorf("bulk abandon of CRM_DOWN = %v, want 2 applied", done)
	}
	if logs := env.Logs.String(); !strings.Contains(logs, `msg="bulk operator action" action=abandon bulk=`+done["bulk_id"].(string)+` matched=2 applied=2 skipped=0`) ||
		!strings.Contains(logs, "filter_error_code=CRM_DOWN") {
		t.Errorf("the bulk action is not logged with its filter: %s", logs)
	}
	for id, want := range map[string]string{down1: "failed", down2: "failed", invalid: "held"} {
		if s := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)["status"]; s != want {
			t.Errorf("instance %s is %v after abandoning CRM_DOWN, want %s", id, s, want)
		}
	}
	if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": map[string]any{"error_code": " "}}); r.Status != 400 || !strings.Contains(string(r.Body), `"path":"/filter/error_code"`) {
		t.Errorf("blank error_code filter: %d %s, want 400 at /filter/error_code", r.Status, r.Body)
	}
}

// An action sent with the newest audit record its client saw is refused
// when another was recorded since: a colleague's retry that ended held
// again by the same error leaves the instance looking unchanged, and
// abandoning it then would act on an incident nobody decided on.
func TestActionRefusedWhenActedMeanwhile(t *testing.T) {
	t.Parallel()
	env, consumer, hold := incidents(t)
	id, occ := hold("Acme")
	path := "/api/v1/instances/" + id
	env.Must(200, "POST", path+"/retry", env.Operator, map[string]any{"reason": "CRM back?", "last_action_id": 0})
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["id"] != occ {
		t.Fatalf("fetched %v after the retry, want %s", got, occ)
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w", "error_code": "CRM_DOWN", "message": "503"})
	if s := env.Must(200, "GET", path, env.Operator, nil).JSON(t)["status"]; s != "held" {
		t.Fatalf("instance %v after failing again, want held", s)
	}
	records := env.Must(200, "GET", "/api/v1/audit/actions?instance="+id+"&limit=1", env.Operator, nil).JSON(t)["items"].([]any)
	retry := records[0].(map[string]any)["id"].(float64)

	// Seen before the retry (no record): refused, nothing applied.
	stale := env.Do("POST", path+"/abandon", env.Operator, map[string]any{"reason": "give up", "last_action_id": 0})
	if stale.Status != 409 || stale.Code() != "acted_meanwhile" || stale.JSON(t)["last_action_id"] != retry ||
		!strings.Contains(stale.JSON(t)["detail"].(string), "retry by ") {
		t.Fatalf("abandon after a colleague's retry: %d %s, want 409 acted_meanwhile naming the retry %v", stale.Status, stale.Body, retry)
	}
	if s := env.Must(200, "GET", path, env.Operator, nil).JSON(t)["status"]; s != "held" {
		t.Fatalf("instance %v after a refused abandon, want still held", s)
	}
	if r := env.Do("POST", path+"/abandon", env.Operator, map[string]any{"reason": "give up", "last_action_id": -1}); r.Status != 400 {
		t.Errorf("negative last_action_id: %d %s, want 400", r.Status, r.Body)
	}
	other, _ := hold("Globex")
	// Another instance's record, or one that never was: the client's
	// mistake (400 at its pointer), not a colleague's action.
	for _, wrong := range []map[string]any{{"instance": other, "id": retry}, {"instance": id, "id": retry + 1000}} {
		r := env.Do("POST", "/api/v1/instances/"+wrong["instance"].(string)+"/abandon", env.Operator, map[string]any{"reason": "x", "last_action_id": wrong["id"]})
		if r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"/last_action_id"`) {
			t.Errorf("last_action_id %v on %v: %d %s, want 400 at /last_action_id", wrong["id"], wrong["instance"], r.Status, r.Body)
		}
	}
	// Seen the retry: applied.
	env.Must(200, "POST", path+"/abandon", env.Operator, map[string]any{"reason": "give up", "last_action_id": retry})
	if s := env.Must(200, "GET", path, env.Operator, nil).JSON(t)["status"]; s != "failed" {
		t.Errorf("instance %v after the abandon, want failed", s)
	}
	// An action that no longer applies is refused for that, in its own
	// words, whatever was seen.
	if r := env.Do("POST", path+"/retry", env.Operator, map[string]any{"reason": "x", "last_action_id": 0}); r.Status != 409 || r.Code() != "not_held" {
		t.Errorf("retry of the abandoned instance with a stale view: %d %s, want 409 not_held", r.Status, r.Body)
	}
}

// A bulk action's breakdown lists the 20 largest groups and says when the
// filter matches more; the count still counts them all.
func TestBulkBreakdownSaysWhenItIsCut(t *testing.T) {
	t.Parallel()
	env, consumer, _ := incidents(t)
	for i := range 21 {
		inst := env.Must(201, "POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": fmt.Sprint("C", i)}}).JSON(t)
		occ := inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
		env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 1,
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}})
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w", "error_code": fmt.Sprintf("E%02d", i)})
	}
	count := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": map[string]any{"process": "crm_hold"}}).JSON(t)
	if count["count"] != 21.0 || len(count["breakdown"].([]any)) != 20 || count["breakdown_truncated"] != true {
		t.Errorf("count %v, %d groups, truncated %v; want 21, 20 groups, truncated", count["count"], len(count["breakdown"].([]any)), count["breakdown_truncated"])
	}
	one := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": map[string]any{"error_code": "E07"}}).JSON(t)
	if one["count"] != 1.0 || len(one["breakdown"].([]any)) != 1 || one["breakdown_truncated"] != false {
		t.Errorf("count of E07 = %v, breakdown %v, truncated %v; want 1 in one group, not truncated", one["count"], one["breakdown"], one["breakdown_truncated"])
	}
}

// A reason is bounded in characters, not bytes: 1,000 accented letters
// (2,000 bytes) are accepted, and 1,001 characters are refused naming the
// limit in characters.
func TestReasonIsBoundedInCharacters(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	a, _ := hold("Acme")
	long := env.Do("POST", "/api/v1/instances/"+a+"/stop", env.Operator, map[string]any{"reason": strings.Repeat("é", 1001)})
	if long.Status != 400 || !strings.Contains(string(long.Body), "must be at most 1000 characters") || !strings.Contains(string(long.Body), `"/reason"`) {
		t.Errorf("a 1,001-character reason: %d %s, want 400 at /reason in characters", long.Status, long.Body)
	}
	first := env.Must(200, "POST", "/api/v1/instances/"+a+"/stop", env.Operator, map[string]any{"reason": strings.Repeat("é", 1000)})
	// A repeated stop answers as the first did, but says it changed
	// nothing (its reason is not recorded).
	again := env.Must(200, "POST", "/api/v1/instances/"+a+"/stop", env.Operator, map[string]any{"reason": "again"})
	if first.Header.Get("Relais-Applied") != "true" || again.Header.Get("Relais-Applied") != "false" {
		t.Errorf("Relais-Applied: first stop %q, repeated stop %q; want true, then false", first.Header.Get("Relais-Applied"), again.Header.Get("Relais-Applied"))
	}
}

// A bulk action's filter takes the times the list's query takes, a date
// included, and refuses others at their pointer in words (not Go's layout
// notation); a negative confirm_count is a malformed request (400), not a
// count that changed (409).
func TestBulkFilterTimesAndConfirmCount(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	hold("Acme")
	listed := len(env.Must(200, "GET", "/api/v1/instances?status=held&created_after=2020-01-02", env.Operator, nil).JSON(t)["items"].([]any))
	count := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x",
		"filter": map[string]any{"status": "held", "created_after": "2020-01-02", "created_before": "2999-12-31T23:59"}}).JSON(t)["count"]
	if listed != 1 || count != 1.0 {
		t.Errorf("created_after=2020-01-02: the list has %d, the bulk count %v; want 1 and 1", listed, count)
	}
	bad := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x",
		"filter": map[string]any{"created_after": "yesterday"}})
	if bad.Status != 400 || !strings.Contains(string(bad.Body), `"/filter/created_after"`) || strings.Contains(string(bad.Body), "2006") {
		t.Errorf("created_after=yesterday: %d %s, want 400 at /filter/created_after without Go's layout", bad.Status, bad.Body)
	}
	neg := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x", "filter": map[string]any{}, "confirm_count": -1})
	if neg.Status != 400 || neg.Code() != "invalid_request" || !strings.Contains(string(neg.Body), `"/confirm_count"`) {
		t.Errorf("confirm_count -1: %d %s, want 400 at /confirm_count", neg.Status, neg.Body)
	}
	// Past its bound (the ids are read at once), refused, whatever matches.
	huge := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x", "filter": map[string]any{}, "confirm_count": 1_000_001})
	if huge.Status != 400 || huge.Code() != "bound_exceeded" || huge.JSON(t)["field"] != "confirm_count" {
		t.Errorf("confirm_count 1,000,001: %d %s, want 400 bound_exceeded on confirm_count", huge.Status, huge.Body)
	}
	// A filter field given empty (a script's unset variable) is refused,
	// not read as no filter: it would have matched every instance.
	for _, field := range []string{"process", "status", "business_key", "created_after", "created_before"} {
		r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x",
			"filter": map[string]any{field: " "}})
		if r.Status != 400 || !strings.Contains(string(r.Body), `"/filter/`+field+`"`) {
			t.Errorf("%s empty: %d %s, want 400 at /filter/%s", field, r.Status, r.Body, field)
		}
	}
	for _, field := range []string{"process", "status", "business_key", "created_after", "created_before"} {
		r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x",
			"filter": map[string]any{field: nil}})
		if r.Status != 400 || !strings.Contains(string(r.Body), `"/filter/`+field+`"`) {
			t.Errorf("%s null: %d %s, want 400 at /filter/%s", field, r.Status, r.Body, field)
		}
	}
	if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x",
		"filter": map[string]any{"created_after": " "}}); strings.Count(string(r.Body), `"/filter/created_after"`) != 1 {
		t.Errorf("a blank time: %s, want one problem at /filter/created_after", r.Body)
	}
	if n := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x"}).JSON(t)["count"]; n != 1.0 {
		t.Errorf("without a filter: count %v, want every instance (1)", n)
	}
	// The bulk action's path is not an instance's.
	if r := env.Do("GET", "/api/v1/instances/actions", env.Operator, nil); r.Status != 405 || r.Header.Get("Allow") != "POST" {
		t.Errorf("GET /instances/actions: %d (Allow %q) %s, want 405 with Allow: POST", r.Status, r.Header.Get("Allow"), r.Body)
	}
}

// deadlineEnv is an Env with crm_deadline, the CRM process whose node
// has a deadline of a minute and holds its instance on any error.
func deadlineEnv(t *testing.T) *relaistest.Env {
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	doc := relaistest.CRMProcess(map[string]any{"max_attempts": 3, "deadline": "PT1M"})
	doc["nodes"].(map[string]any)["crm"].(map[string]any)["on_error"] = "hold"
	delete(doc["nodes"].(map[string]any), "failed")
	env.Process("crm_deadline", doc)
	return env
}

// An incident whose deadline passed, before any worker took the
// occurrence (the workers were down) or after, can be retried, one by one
// or in bulk: the occurrence is offered again with a fresh deadline, which
// a worker can then meet. (A retry used to answer 409 not_retryable before
// any attempt, and otherwise to offer the occurrence with its passed
// deadline, failed again by the timer before any worker saw it.)
func TestRetryOfADeadlineIncident(t *testing.T) {
	t.Parallel()
	env := deadlineEnv(t)
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	fetch := func() []any {
		return env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 5,
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	}
	start := func(name string) string {
		return env.Must(201, "POST", "/api/v1/processes/crm_deadline/instances", env.Operator, map[string]any{
			"inputs": map[string]any{"name": name}}).JSON(t)["id"].(string)
	}
	unseen := start("Acme")
	fetched := start("Globex")
	env.Clock.Advance(30 * time.Second)
	fetched2 := start("Initech")
	got := fetch()
	if len(got) != 3 {
		t.Fatalf("fetched %d, want 3", len(got))
	}
	_ = fetched2
	// The fetched one is deferred, then its deadline passes: retried, it
	// is no longer shown deferred.
	var deferredOcc string
	for _, o := range got {
		if o := o.(map[string]any); o["instance_id"] == fetched {
			deferredOcc = o["id"].(string)
		}
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+deferredOcc+"/defer", consumer, map[string]any{"worker_id": "w", "reason": "a human decides"})
	// unseen and fetched pass their deadline; fetched2's is still ahead.
	env.Clock.Advance(45 * time.Second)
	for _, id := range []string{unseen, fetched} {
		relaistest.WaitFor(t, 5*time.Second, "instance "+id+" held", func() (bool, string) {
			inst := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)
			return inst["status"] == "held" && inst["error_code"] == "deadline_exceeded", fmt.Sprint(inst["status"], inst["error_code"])
		})
	}
	// The one no worker took before its deadline: a single retry.
	inst := env.Must(200, "POST", "/api/v1/instances/"+unseen+"/retry", env.Operator, map[string]any{"reason": "the workers are back"}).JSON(t)
	if inst["status"] != "running" {
		t.Fatalf("retried: %v", inst["status"])
	}
	// The bulk retry counts the other one.
	filter := map[string]any{"process": "crm_deadline", "status": "held"}
	if n := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "retry", "reason": "x", "filter": filter}).JSON(t)["count"]; n != 1.0 {
		t.Fatalf("bulk retry count %v, want 1", n)
	}
	env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "retry", "reason": "x", "filter": filter, "confirm_count": 1})
	// Both are offered with a fresh deadline: the timer leaves them, a
	// worker takes them and completes them.
	env.Clock.Advance(time.Second)
	time.Sleep(200 * time.Millisecond)
	if o := env.Must(200, "GET", "/api/v1/occurrences/"+deferredOcc, env.Operator, nil).JSON(t); o["deferred_at"] != nil || o["defer_reason"] != nil {
		t.Errorf("retried after a deferral: deferred_at %v, defer_reason %v; want neither", o["deferred_at"], o["defer_reason"])
	}
	got = fetch()
	if len(got) != 2 {
		t.Fatalf("after the retries, fetched %v, want the 2 retried occurrences", got)
	}
	for _, o := range got {
		o := o.(map[string]any)
		deadline, err := time.Parse(time.RFC3339Nano, o["deadline_at"].(string))
		if err != nil || !deadline.After(env.Clock.Now().Add(50*time.Second)) {
			t.Errorf("retried occurrence's deadline %v, want a minute from the retry", o["deadline_at"])
		}
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+o["id"].(string)+"/complete", consumer, map[string]any{"worker_id": "w",
			"outputs": map[string]any{"result": "created", "crm_id": "C-1"}})
	}
	for _, id := range []string{unseen, fetched} {
		if s := env.WaitEnded(id, 5*time.Second)["status"]; s != "completed" {
			t.Errorf("instance %s %v, want completed", id, s)
		}
	}
}

// A deadline an operator's retry started again is said to run from that
// retry, not from the occurrence's creation (push QA).
func TestDeadlineMessageCountsFromTheRetry(t *testing.T) {
	t.Parallel()
	env := deadlineEnv(t)
	id := env.Must(201, "POST", "/api/v1/processes/crm_deadline/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	message := func() string {
		var msg string
		relaistest.WaitFor(t, 5*time.Second, "instance held for its deadline", func() (bool, string) {
			inst := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)
			occ := inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
			msg, _ = env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)["error_message"].(string)
			return inst["status"] == "held" && inst["error_code"] == "deadline_exceeded", fmt.Sprint(inst["status"], inst["error_code"])
		})
		return msg
	}
	env.Clock.Advance(61 * time.Second)
	if msg := message(); !strings.Contains(msg, "the deadline (PT1M after creation) passed") {
		t.Errorf("first deadline: %q, want it counted from creation", msg)
	}
	env.Must(200, "POST", "/api/v1/instances/"+id+"/retry", env.Operator, map[string]any{"reason": "the workers are back"})
	env.Clock.Advance(61 * time.Second)
	if msg := message(); !strings.Contains(msg, "the deadline (PT1M after the operator's retry at ") {
		t.Errorf("deadline after a retry: %q, want it counted from the retry", msg)
	}
}

// A bulk filter naming a process or a definition nothing has is refused
// at its pointer, rather than counting 0 (which reads as the incident's
// end).
func TestBulkFilterOfAnUnknownKeyIsRefused(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	hold("Acme")
	for member, key := range map[string]string{"process": "crm_hodl", "held_at": "add_company_to_cmr"} {
		r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x", "filter": map[string]any{member: key}})
		if r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"/filter/`+member+`"`) {
			t.Errorf("filter %s %q: %d %s; want 400 at /filter/%s", member, key, r.Status, r.Body, member)
		}
	}
	// A key pasted with a space is said padded, as the list's query says
	// it, not unknown (a misspelling to look for).
	for _, member := range []string{"process", "held_at", "retrying_at", "error_code", "business_key"} {
		r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x", "filter": map[string]any{member: "crm_hold "}})
		if r.Status != 400 || !strings.Contains(string(r.Body), "padded with white space") || !strings.Contains(string(r.Body), `"/filter/`+member+`"`) {
			t.Errorf("filter %s padded: %d %s; want 400 saying padded at /filter/%s", member, r.Status, r.Body, member)
		}
	}
	if n := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x",
		"filter": map[string]any{"process": "crm_hold", "held_at": "add_company_to_crm"}}).JSON(t)["count"]; n != 1.0 {
		t.Errorf("known keys: count %v, want 1", n)
	}
}

// Instances are found and acted on by process version: "are any instances
// of version 1 still running?" before its workers are retired.
func TestInstancesByProcessVersion(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	v1, _ := hold("Acme")
	doc := relaistest.CRMProcess(map[string]any{"max_attempts": 1})
	doc["nodes"].(map[string]any)["crm"].(map[string]any)["on_error"] = "hold"
	delete(doc["nodes"].(map[string]any), "failed")
	doc["name"] = "CRM, version 2"
	if n := env.Process("crm_hold", doc); n != 2 {
		t.Fatalf("published version %d, want 2", n)
	}
	v2 := env.Must(201, "POST", "/api/v1/processes/crm_hold/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Globex"}}).JSON(t)["id"].(string)
	for version, want := range map[string]string{"1": v1, "2": v2} {
		items := env.Must(200, "GET", "/api/v1/instances?process=crm_hold&version="+version, env.Operator, nil).JSON(t)["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["id"] != want {
			t.Errorf("version %s lists %v, want %s alone", version, items, want)
		}
	}
	for _, q := range []string{"version=1", "process=crm_hold&version=0", "process=crm_hold&version=x"} {
		if r := env.Do("GET", "/api/v1/instances?"+q, env.Operator, nil); r.Status != 400 || !strings.Contains(string(r.Body), `"version"`) {
			t.Errorf("GET /instances?%s: %d %s; want 400 naming version", q, r.Status, r.Body)
		}
	}
	count := func(filter map[string]any) relaistest.Response {
		return env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x", "filter": filter})
	}
	if n := count(map[string]any{"process": "crm_hold", "version": 2}).JSON(t)["count"]; n != 1.0 {
		t.Errorf("bulk stop of version 2 counts %v, want 1", n)
	}
	for _, f := range []map[string]any{{"process": "crm_hold", "version": 3}, {"version": 1}, {"process": "crm_hold", "version": nil}, {"process": "crm_hold", "version": "1"}} {
		if r := count(f); r.Status != 400 || !strings.Contains(string(r.Body), `"/filter/version"`) {
			t.Errorf("bulk filter %v: %d %s; want 400 at /filter/version", f, r.Status, r.Body)
		}
	}
}

// The audit log is read by who acted: a bulk action writes a record per
// instance, so one operator's night is otherwise paged through everyone's.
func TestAuditLogByActor(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	a, _ := hold("Acme")
	b, _ := hold("Globex")
	alice := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "ops-alice", "role": "operator"}).JSON(t)["token"].(string)
	env.Must(200, "POST", "/api/v1/instances/"+a+"/stop", alice, map[string]any{"reason": "duplicate"})
	env.Must(200, "POST", "/api/v1/instances/"+b+"/stop", env.Operator, map[string]any{"reason": "duplicate"})
	items := env.Must(200, "GET", "/api/v1/audit/actions?actor=ops-alice", env.Operator, nil).JSON(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["instance_id"] != a {
		t.Errorf("ops-alice's records: %v, want her one stop", items)
	}
	if r := env.Do("GET", "/api/v1/audit/actions?actor=", env.Operator, nil); r.Status != 400 {
		t.Errorf("an empty actor filter: %d %s", r.Status, r.Body)
	}
	if n := len(env.Must(200, "GET", "/api/v1/audit/actions?actor=nobody", env.Operator, nil).JSON(t)["items"].([]any)); n != 0 {
		t.Errorf("nobody's records: %d", n)
	}
	// By the business key of the instances acted on (a data subject's
	// request starts from it: privacy QA).
	items = env.Must(200, "GET", "/api/v1/audit/actions?business_key=Globex", env.Operator, nil).JSON(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["instance_id"] != b {
		t.Errorf("Globex's records: %v, want its one stop", items)
	}
	if n := len(env.Must(200, "GET", "/api/v1/audit/actions?business_key=globex", env.Operator, nil).JSON(t)["items"].([]any)); n != 0 {
		t.Errorf("a business key is matched exactly: %d records for globex", n)
	}
}

// The audit log is read by time ("what was done between 02:00 and
// 03:00"): the window is [after, before) on the at the log shows, to the
// microsecond.
func TestAuditLogByTime(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	a, _ := hold("Acme")
	b, _ := hold("Globex")
	env.Must(200, "POST", "/api/v1/instances/"+a+"/stop", env.Operator, map[string]any{"reason": "duplicate"})
	env.Must(200, "POST", "/api/v1/instances/"+b+"/stop", env.Operator, map[string]any{"reason": "duplicate"})
	all := env.Must(200, "GET", "/api/v1/audit/actions", env.Operator, nil).JSON(t)["items"].([]any)
	if len(all) != 2 {
		t.Fatalf("the log has %d records, want 2", len(all))
	}
	newer := all[0].(map[string]any)["at"].(string)
	ids := func(q string) []any {
		var out []any
		for _, it := range env.Must(200, "GET", "/api/v1/audit/actions?"+q, env.Operator, nil).JSON(t)["items"].([]any) {
			out = append(out, it.(map[string]any)["instance_id"])
		}
		return out
	}
	if got := ids("acted_after=" + url.QueryEscape(newer)); len(got) != 1 || got[0] != b {
		t.Errorf("acted_after the newer record's at: %v, want only %s", got, b)
	}
	if got := ids("acted_before=" + url.QueryEscape(newer)); len(got) != 1 || got[0] != a {
		t.Errorf("acted_before the newer record's at: %v, want only %s", got, a)
	}
	if got := ids("acted_after=2020-01-01&acted_before=2999-01-01"); len(got) != 2 {
		t.Errorf("a window of dates around both: %v", got)
	}
	if got := ids("acted_before=2020-01-01"); len(got) != 0 {
		t.Errorf("a window before both: %v", got)
	}
	if r := env.Do("GET", "/api/v1/audit/actions?acted_after=2026-12-02&acted_before=2026-12-01", env.Operator, nil); r.Status != 400 || !strings.Contains(string(r.Body), `"acted_before"`) {
		t.Errorf("a window that ends before it starts: %d %s, want 400", r.Status, r.Body)
	}
	r := env.Do("GET", "/api/v1/audit/actions?acted_after=yesterday&acted_before=2026-13-01", env.Operator, nil)
	if r.Status != 400 || !strings.Contains(string(r.Body), `"acted_after"`) || !strings.Contains(string(r.Body), `"acted_before"`) {
		t.Errorf("bad times: %d %s, want 400 naming both", r.Status, r.Body)
	}
}

// A bulk action's record counts what its batches committed, each batch
// with its own transaction: an error that stops the action after its
// first batch leaves a record saying so, with the first batch's count,
// which its audit records match.
func TestBulkRecordCountsWhatItsBatchesCommitted(t *testing.T) {
	t.Parallel()
	env, _, _ := incidents(t)
	items := make([]any, 150)
	for i := range items {
		items[i] = map[string]any{"inputs": map[string]any{"name": fmt.Sprint("C", i)}}
	}
	env.Must(200, "POST", "/api/v1/processes/crm_hold/instances/batch", env.Operator, map[string]any{"items": items})
	// The 101st record refused: the second batch's first instance.
	if _, err := env.Pool.Exec(context.Background(), `
create function refuse_second_batch() returns trigger language plpgsql as $$
begin
  if (select count(*) from operator_actions where bulk_id = new.bulk_id) >= 100 then
    raise exception 'injected failure';
  end if;
  return new;
end $$;
create trigger refuse_second_batch before insert on operator_actions for each row execute function refuse_second_batch();`); err != nil {
		t.Fatal(err)
	}
	const id = "0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e01"
	r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "cleanup",
		"filter": map[string]any{"process": "crm_hold", "status": "running", "business_key": "nobody's"}, "confirm_count": 0, "bulk_id": "0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e02"})
	if r.Status != 200 {
		t.Fatalf("a bulk stop matching nothing: %d %s", r.Status, r.Body)
	}
	if f := env.Must(200, "GET", "/api/v1/audit/bulk/0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e02", env.Operator, nil).JSON(t)["filter"].(map[string]any); f["business_key_given"] != true || strings.Contains(fmt.Sprint(f), "nobody") {
		t.Errorf("the record's filter %v, want the business key said given, not kept", f)
	}
	r = env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "cleanup",
		"filter": map[string]any{"process": "crm_hold", "status": "running"}, "confirm_count": 150, "bulk_id": id},
		relaistest.InjectedFaultHeader, "the second batch fails")
	if r.Status != 500 {
		t.Fatalf("a bulk stop whose second batch fails: %d %s, want 500", r.Status, r.Body)
	}
	rec := env.Must(200, "GET", "/api/v1/audit/bulk/"+id, env.Operator, nil).JSON(t)
	if rec["status"] != "stopped" || rec["applied_count"] != 100.0 || rec["skipped_count"] != 0.0 || rec["matched_count"] != 150.0 || rec["ended_at"] == nil {
		t.Errorf("the record after a failed second batch: %v, want stopped with the first batch's 100 of 150", rec)
	}
	var stopped int
	if err := env.Pool.QueryRow(context.Background(), `select count(*) from instances where status = 'cancelled'`).Scan(&stopped); err != nil || stopped != 100 {
		t.Errorf("%d instances stopped (%v), want the first batch's 100", stopped, err)
	}
}

// A bulk action pinned to a moment (filter.matched_before, the same on
// the count and on its confirmation) counts and acts on the instances
// that matched then: one held since leaves the confirmed count alone and
// is left for the next action, as the record says.
func TestBulkActionPinnedToTheCountsMoment(t *testing.T) {
	t.Parallel()
	env, _, hold := incidents(t)
	first, _ := hold("A")
	at := time.Now().UTC().Format(time.RFC3339Nano)
	filter := map[string]any{"process": "crm_hold", "status": "held", "matched_before": at}
	count := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "incident", "filter": filter}).JSON(t)
	if count["count"] != 1.0 {
		t.Fatalf("count %v, want 1", count["count"])
	}
	later, _ := hold("B")
	done := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "incident", "filter": filter, "confirm_count": 1}).JSON(t)
	if done["applied_count"] != 1.0 {
		t.Fatalf("applied %v, want 1", done)
	}
	for id, want := range map[string]string{first: "failed", later: "held"} {
		if got := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)["status"]; got != want {
			t.Errorf("instance %s is %v, want %s", id, got, want)
		}
	}
	record := env.Must(200, "GET", "/api/v1/audit/bulk/"+done["bulk_id"].(string), env.Operator, nil).JSON(t)
	if got := record["filter"].(map[string]any)["matched_before"]; got == nil {
		t.Errorf("the record's filter %v does not say the moment", record["filter"])
	}
	// Unpinned, the same growth is a changed count, and the answer says
	// how to pin it.
	hold("C")
	r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "incident",
		"filter": map[string]any{"process": "crm_hold", "status": "held"}, "confirm_count": 1})
	if r.Status != 409 || r.Code() != "count_changed" || !strings.Contains(string(r.Body), "matched_before") {
		t.Errorf("unpinned, grown: %d %s, want 409 count_changed naming matched_before", r.Status, r.Body)
	}
}

// A batch of a bulk action that PostgreSQL ends as a deadlock's victim (a
// settlement's transaction locking its instances in another order) is run
// again, not reported as a 500 with the action stopped halfway. The test's
// transaction holds the second instance and then asks for the first, which
// the batch holds; its deadlock_timeout is the longer, so the batch is the
// victim.
func TestBulkBatchRunsAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	var ids []string
	for _, name := range []string{"Acme", "Globex"} {
		ids = append(ids, env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": name}}).JSON(t)["id"].(string))
	}
	first, second := min(ids[0], ids[1]), max(ids[0], ids[1])
	ctx := context.Background()
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "set local deadlock_timeout = '10s'"); err != nil {
		t.Skipf("deadlock_timeout cannot be set by this role: %v", err)
	}
	if _, err := tx.Exec(ctx, "select 1 from instances where id = $1 for update", second); err != nil {
		t.Fatal(err)
	}
	filter := map[string]any{"process": "crm_only", "status": "running"}
	done := make(chan relaistest.Response, 1)
	go func() {
		done <- env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x", "filter": filter, "confirm_count": 2})
	}()
	time.Sleep(500 * time.Millisecond) // the batch holds the first, waits for the second
	if _, err := tx.Exec(ctx, "select 1 from instances where id = $1 for update", first); err != nil {
		t.Fatalf("the test's transaction was the deadlock's victim: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.Status != 200 || r.JSON(t)["applied_count"] != 2.0 {
		t.Fatalf("bulk stop answered %d %s, want both stopped", r.Status, r.Body)
	}
}

// A replica that stops (SIGTERM) ends the bulk actions under way before
// their next batch and records how far they got, where the record read
// "running" for good: the operator is told to act on the filter again.
func TestBulkActionStopsWithItsReplica(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	env.Drain()
	bulk := "01a24700-0000-7000-8000-000000000001"
	r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "x",
		"filter": map[string]any{"process": "crm_only"}, "confirm_count": 1, "bulk_id": bulk})
	if r.Status != 503 || r.Code() != "replica_stopping" || !strings.Contains(string(r.Body), "act on the same filter again") {
		t.Fatalf("a bulk action on a stopping replica: %d %s, want 503 replica_stopping", r.Status, r.Body)
	}
	rec := env.Must(200, "GET", "/api/v1/audit/bulk/"+bulk, env.Operator, nil).JSON(t)
	if rec["status"] != "stopped" || rec["ended_at"] == nil {
		t.Errorf("its record %v, want stopped with its end", rec)
	}
}

// A running instance whose occurrence waits out a retry delay is retried
// now by an operator (the CRM is back: no hour's wait), its attempts left
// unchanged, recorded like any action; with nothing waiting, refused.
func TestRetryBringsAWaitingRetryForward(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_slow", relaistest.CRMProcess(map[string]any{"max_attempts": 3, "retry_delay": "PT1H"}))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	inst := env.Must(201, "POST", "/api/v1/processes/crm_slow/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	id, occ := inst["id"].(string), inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	fetch := func() []any {
		return env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	}
	if got := fetch(); len(got) != 1 {
		t.Fatalf("fetched %v", got)
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w", "error_code": "CRM_DOWN", "retryable": true})
	if got := fetch(); len(got) != 0 {
		t.Fatalf("fetched %v while the retry waits an hour", got)
	}
	if r := env.Do("POST", "/api/v1/instances/"+id+"/retry", env.Operator, map[string]any{}); r.Status != 400 {
		t.Errorf("retry now without a reason: %d, want 400", r.Status)
	}
	before := time.Now()
	if got := env.Must(200, "POST", "/api/v1/instances/"+id+"/retry", env.Operator, map[string]any{"reason": "CRM is back"}).JSON(t); got["status"] != "running" {
		t.Errorf("after retry now: %v, want running", got["status"])
	}
	o := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)
	at, _ := time.Parse(time.RFC3339Nano, o["available_at"].(string))
	if o["status"] != "available" || o["attempts_left"] != 2.0 || at.After(before.Add(time.Minute)) {
		t.Errorf("occurrence %v available at %v with %v attempts left, want available now with its 2 left", o["status"], at, o["attempts_left"])
	}
	got := fetch()
	if len(got) != 1 || got[0].(map[string]any)["attempt"] != 2.0 {
		t.Fatalf("after retry now fetched %v, want attempt 2", got)
	}
	rec := env.Must(200, "GET", "/api/v1/audit/actions?instance="+id, env.Operator, nil).JSON(t)["items"].([]any)
	if len(rec) != 1 || rec[0].(map[string]any)["action"] != "retry" || rec[0].(map[string]any)["occurrence_id"] != occ || rec[0].(map[string]any)["reason"] != "CRM is back" ||
		rec[0].(map[string]any)["brought_forward"] != true {
		t.Errorf("audit log %v, want the retry of %s", rec, occ)
	}
	// Reserved now: nothing waits for a retry.
	if r := env.Do("POST", "/api/v1/instances/"+id+"/retry", env.Operator, map[string]any{"reason": "again"}); r.Status != 409 || r.Code() != "not_held" ||
		!strings.Contains(r.JSON(t)["detail"].(string), "none of its occurrences waits for a retry") {
		t.Errorf("retry of a running instance with nothing waiting: %d %s, want 409 not_held saying so", r.Status, r.Body)
	}
}

// A bulk retry of running instances brings their waiting retries forward
// (the CRM is back after an outage: fifty retries waiting an hour, one
// action): counted by the code their occurrences failed with, only those
// whose retry waits (at the definition retrying_at names, when given),
// applied with their attempts left unchanged. Filters that would match
// nothing are refused.
func TestBulkRetryBringsWaitingRetriesForward(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_slow", relaistest.CRMProcess(map[string]any{"max_attempts": 3, "retry_delay": "PT1H"}))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	for range 4 {
		env.Must(201, "POST", "/api/v1/processes/crm_slow/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	}
	fetch := func(n int) []any {
		t.Helper()
		return env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": n,
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
	}
	// Three fail and wait an hour (two CRM_DOWN, one TIMEOUT); the fourth
	// is reserved: nothing of it waits.
	got := fetch(4)
	if len(got) != 4 {
		t.Fatalf("fetched %d, want 4", len(got))
	}
	for i, code := range []string{"CRM_DOWN", "CRM_DOWN", "TIMEOUT"} {
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+got[i].(map[string]any)["id"].(string)+"/fail", consumer,
			map[string]any{"worker_id": "w", "error_code": code, "retryable": true})
	}
	bulk := func(filter map[string]any, confirm *int) relaistest.Response {
		body := map[string]any{"action": "retry", "reason": "CRM is back", "filter": filter}
		if confirm != nil {
			body["confirm_count"] = *confirm
		}
		return env.Do("POST", "/api/v1/instances/actions", env.Operator, body)
	}
	for _, filter := range []map[string]any{{"status": "running"}, {"retrying_at": "add_company_to_crm"}, {"status": "running", "retrying_at": "add_company_to_crm", "process": "crm_slow"}} {
		r := bulk(filter, nil)
		if r.Status != 200 {
			t.Fatalf("count of %v: %d %s", filter, r.Status, r.Body)
		}
		count := r.JSON(t)
		groups := count["breakdown"].([]any)
		if count["count"] != 3.0 || len(groups) != 2 || groups[0].(map[string]any)["error_code"] != "CRM_DOWN" || groups[0].(map[string]any)["count"] != 2.0 ||
			groups[1].(map[string]any)["error_code"] != "TIMEOUT" {
			t.Errorf("count of %v: %s; want 3, by the codes they wait after (2 CRM_DOWN, 1 TIMEOUT)", filter, r.Body)
		}
		if _, ok := count["not_retryable_count"]; ok {
			t.Errorf("count of %v says not_retryable_count, which is about held instances: %s", filter, r.Body)
		}
	}
	// The lists find them too: their instances, and their occurrences (not
	// the reserved one).
	if items := env.Must(200, "GET", "/api/v1/instances?retrying_at=add_company_to_crm", env.Operator, nil).JSON(t)["items"].([]any); len(items) != 3 {
		t.Errorf("GET /instances?retrying_at= lists %d, want 3", len(items))
	}
	waiting := func() int {
		t.Helper()
		return len(env.Must(200, "GET", "/api/v1/occurrences?waiting_retry=true&definition=add_company_to_crm", env.Operator, nil).JSON(t)["items"].([]any))
	}
	for _, q := range []string{"status=running&error_code=CRM_DOWN", "status=running&held_at=add_company_to_crm"} {
		if r := env.Do("GET", "/api/v1/instances?"+q, env.Operator, nil); r.Status != 400 {
			t.Errorf("GET /instances?%s: %d %s; want 400 (running instances have neither)", q, r.Status, r.Body)
		}
	}
	if n := waiting(); n != 3 {
		t.Errorf("GET /occurrences?waiting_retry=true lists %d, want 3", n)
	}
	if n := len(env.Must(200, "GET", "/api/v1/occurrences?waiting_retry=false&definition=add_company_to_crm", env.Operator, nil).JSON(t)["items"].([]any)); n != 1 {
		t.Errorf("GET /occurrences?waiting_retry=false lists %d, want the reserved one", n)
	}
	for _, q := range []string{"waiting_retry=true&status=reserved", "waiting_retry=yes"} {
		if r := env.Do("GET", "/api/v1/occurrences?"+q, env.Operator, nil); r.Status != 400 || !strings.Contains(string(r.Body), "waiting_retry") {
			t.Errorf("GET /occurrences?%s: %d %s; want 400 at waiting_retry", q, r.Status, r.Body)
		}
	}
	for _, c := range []struct {
		filter  map[string]any
		pointer string
	}{
		{map[string]any{"retrying_at": "add_company_to_cr"}, "/filter/retrying_at"},
		{map[string]any{"retrying_at": "add_company_to_crm", "status": "held"}, "/filter/retrying_at"},
		{map[string]any{"retrying_at": ""}, "/filter/retrying_at"},
		{map[string]any{"status": "failed"}, "/filter/status"},
		// Running instances have no error code: the breakdown's codes
		// are their occurrences', which no filter takes.
		{map[string]any{"status": "running", "error_code": "CRM_DOWN"}, "/filter/error_code"},
		{map[string]any{"retrying_at": "add_company_to_crm", "held_at": "add_company_to_crm"}, "/filter/held_at"},
	} {
		r := bulk(c.filter, nil)
		if r.Status != 400 || !strings.Contains(string(r.Body), c.pointer) {
			t.Errorf("retry of %v: %d %s; want 400 at %s", c.filter, r.Status, r.Body, c.pointer)
		}
	}
	if r := env.Do("POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "abandon", "reason": "x", "filter": map[string]any{"retrying_at": "add_company_to_crm"}}); r.Status != 400 {
		t.Errorf("abandon of retrying_at: %d %s; want 400", r.Status, r.Body)
	}
	for _, q := range []string{"status=held", "error_code=CRM_DOWN", "held_at=add_company_to_crm"} {
		if r := env.Do("GET", "/api/v1/instances?retrying_at=add_company_to_crm&"+q, env.Operator, nil); r.Status != 400 {
			t.Errorf("list of retrying_at and %s: %d %s; want 400", q, r.Status, r.Body)
		}
	}

	three := 3
	r := bulk(map[string]any{"status": "running"}, &three)
	if r.Status != 200 {
		t.Fatalf("bulk retry now: %d %s", r.Status, r.Body)
	}
	if res := r.JSON(t); res["applied_count"] != 3.0 || res["skipped_count"] != 0.0 {
		t.Errorf("bulk retry now: %s; want 3 applied", r.Body)
	}
	if n := waiting(); n != 0 {
		t.Errorf("GET /occurrences?waiting_retry=true lists %d once brought forward, want 0", n)
	}
	again := fetch(4)
	if len(again) != 3 {
		t.Fatalf("after the bulk retry now fetched %d, want the 3 brought forward", len(again))
	}
	for _, o := range again {
		if o.(map[string]any)["attempt"] != 2.0 {
			t.Errorf("brought forward as attempt %v, want 2 (attempts unchanged)", o.(map[string]any)["attempt"])
		}
	}
	recs := env.Must(200, "GET", "/api/v1/audit/actions?action=retry", env.Operator, nil).JSON(t)["items"].([]any)
	if len(recs) != 3 || recs[0].(map[string]any)["bulk_id"] == nil || recs[0].(map[string]any)["occurrence_id"] == nil || recs[0].(map[string]any)["brought_forward"] != true {
		t.Errorf("audit log %v, want 3 retries under the bulk id with their occurrences", recs)
	}
	// Reserved again: nothing waits, nothing counted.
	if r := bulk(map[string]any{"status": "running"}, nil); r.JSON(t)["count"] != 0.0 {
		t.Errorf("count once none waits: %s, want 0", r.Body)
	}
}
