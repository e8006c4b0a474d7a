package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

func TestObservationFiltersAndPagination(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	var ids []string
	for i := range 5 {
		inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{
			"inputs": map[string]any{"name": fmt.Sprint("c", i)}, "business_key": fmt.Sprint("bk-", i)}).JSON(t)
		ids = append(ids, inst["id"].(string))
	}
	// Complete one, so statuses differ.
	fetched := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+fetched["id"].(string)+"/complete", consumer, map[string]any{"worker_id": "w",
		"outputs": map[string]any{"result": "created", "crm_id": "C"}})

	// Instances: newest first, keyset pages, filters.
	var seen []string
	cursor := ""
	for page := 0; page < 5; page++ {
		res := env.Must(200, "GET", "/api/v1/instances?limit=2&cursor="+cursor, env.Operator, nil).JSON(t)
		for _, it := range res["items"].([]any) {
			seen = append(seen, it.(map[string]any)["id"].(string))
		}
		next, _ := res["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 5 || seen[0] != ids[4] || seen[4] != ids[0] {
		t.Fatalf("paged instances %v; want the 5 newest first", seen)
	}
	if got := env.Must(200, "GET", "/api/v1/instances?business_key=bk-2", env.Operator, nil).JSON(t)["items"].([]any); len(got) != 1 || got[0].(map[string]any)["id"] != ids[2] {
		t.Errorf("business key filter: %v", got)
	}
	if got := env.Must(200, "GET", "/api/v1/instances?status=completed", env.Operator, nil).JSON(t)["items"].([]any); len(got) != 1 {
		t.Errorf("status filter: %d items", len(got))
	}
	if r := env.Do("GET", "/api/v1/instances?status=finished", env.Operator, nil); r.Status != 400 {
		t.Errorf("bad status filter: %d", r.Status)
	}

	// Occurrences: filters by definition, status, instance, revision, consumer.
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"definition=add_company_to_crm", 5},
		{"definition=add_company_to_crm&status=available", 4},
		{"status=completed", 1},
		{"instance=" + fetched["instance_id"].(string), 1},
		{"definition=add_company_to_crm&revision=1", 5},
		{"consumer=1", 1},
	} {
		got := env.Must(200, "GET", "/api/v1/occurrences?"+tc.query, env.Operator, nil).JSON(t)["items"].([]any)
		if len(got) != tc.want {
			t.Errorf("occurrences?%s: %d items, want %d", tc.query, len(got), tc.want)
		}
	}
	// A revision alone would mix revision 1 of every definition.
	if r := env.Do("GET", "/api/v1/occurrences?revision=1", env.Operator, nil); r.Status != 400 || !strings.Contains(string(r.Body), "give definition too") {
		t.Errorf("occurrences?revision=1: %d %s, want 400 asking for the definition", r.Status, r.Body)
	}
	// A list reads no values (each may be a megabyte); the detail shows them.
	for _, it := range env.Must(200, "GET", "/api/v1/occurrences?status=completed", env.Operator, nil).JSON(t)["items"].([]any) {
		for _, side := range []string{"inputs", "outputs"} {
			if v, has := it.(map[string]any)[side]; has {
				t.Errorf("a listed occurrence carries its %s: %v", side, v)
			}
		}
	}
	detail := env.Must(200, "GET", "/api/v1/occurrences/"+fetched["id"].(string), env.Operator, nil).JSON(t)
	if detail["inputs"] == nil || detail["outputs"] == nil {
		t.Errorf("the completed occurrence's detail shows inputs %v and outputs %v", detail["inputs"], detail["outputs"])
	}
	attempts := detail["attempts"].([]any)
	if len(attempts) != 1 || attempts[0].(map[string]any)["outcome"] != "completed" || attempts[0].(map[string]any)["worker_id"] != "w" {
		t.Errorf("attempts = %v", attempts)
	}
	// A settled occurrence holds no lock: the reservation's end is its
	// attempt's history, not the occurrence's state.
	if detail["lock_expires_at"] != nil || attempts[0].(map[string]any)["lock_expires_at"] == nil {
		t.Errorf("a completed occurrence's lock_expires_at %v, its attempt's %v; want null and the attempt's lock", detail["lock_expires_at"], attempts[0].(map[string]any)["lock_expires_at"])
	}
	// An occurrence never claimed has no attempts: [], not a missing member.
	var unclaimed string
	for _, it := range env.Must(200, "GET", "/api/v1/occurrences?status=available&limit=1", env.Operator, nil).JSON(t)["items"].([]any) {
		unclaimed = it.(map[string]any)["id"].(string)
	}
	if got, has := env.Must(200, "GET", "/api/v1/occurrences/"+unclaimed, env.Operator, nil).JSON(t)["attempts"]; !has || got == nil || len(got.([]any)) != 0 {
		t.Errorf("an unclaimed occurrence's attempts = %v (present: %t), want []", got, has)
	}
	if p := detail["policy"].(map[string]any); p["max_attempts"] != 3.0 || p["retry_delay"] != "PT10S" || p["priority"] != 5.0 {
		t.Errorf("policy = %v", p)
	}
	if r := env.Do("GET", "/api/v1/occurrences?cursor=garbage", env.Operator, nil); r.Status != 400 || r.Code() != "invalid_cursor" {
		t.Errorf("bad cursor: %d %s", r.Status, r.Body)
	}
}

// Inputs may be left out of a start only for a process that declares
// none: a client's unset variable (JavaScript drops an undefined member)
// must not start an instance without them because they are all optional.
func TestStartWithoutInputs(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Process("optional", map[string]any{"name": "optional", "start": "done", "nodes": map[string]any{"done": map[string]any{"kind": "end"}},
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "note", "type": "text"}}}})
	for _, body := range []map[string]any{{}, {"business_key": "k1"}} {
		r := env.Do("POST", "/api/v1/processes/optional/instances", env.Operator, body)
		if r.Status != 422 || !strings.Contains(string(r.Body), `"code":"invalid_inputs"`) || !strings.Contains(string(r.Body), `"path":"/inputs"`) {
			t.Errorf("start %v: %d %s; want 422 invalid_inputs at /inputs", body, r.Status, r.Body)
		}
	}
	env.Must(201, "POST", "/api/v1/processes/optional/instances", env.Operator, map[string]any{"inputs": map[string]any{}})
	batch := env.Must(200, "POST", "/api/v1/processes/optional/instances/batch", env.Operator, map[string]any{"items": []any{map[string]any{}, map[string]any{"inputs": map[string]any{}}}}).JSON(t)
	items := batch["items"].([]any)
	if s0, s1 := items[0].(map[string]any)["status"], items[1].(map[string]any)["status"]; s0 != 422.0 || s1 != 201.0 {
		t.Errorf("batch: %v; want the item without inputs 422, the other 201", items)
	}
	if n := len(env.Must(200, "GET", "/api/v1/instances?process=optional", env.Operator, nil).JSON(t)["items"].([]any)); n != 2 {
		t.Errorf("%d instances started; want 2", n)
	}
}

// A node whose inputs Relais cannot build fails from birth: the start's
// answer says why at the step (pointers, never values), so that a
// designer testing a version, who may not read occurrences, learns it.
func TestStartSaysWhyAStepFailedFromBirth(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("long_names", map[string]any{"name": "long names", "start": "crm",
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "name", "type": "text", "required": true}}},
		"nodes": map[string]any{
			"crm": map[string]any{"kind": "pull", "definition": "add_company_to_crm", "revision": 1,
				"inputs": map[string]any{"company_name": map[string]any{"from": "input.name"}, "country": map[string]any{"value": "FR"}, "source": map[string]any{"value": "web"}},
				"routes": map[string]any{"created": "done", "existing": "done"}},
			"done": map[string]any{"kind": "end"}}})
	designer := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "designer", "role": "designer"}).JSON(t)["token"].(string)
	long := strings.Repeat("n", 201)
	started := env.Must(201, "POST", "/api/v1/processes/long_names/instances", designer, map[string]any{"inputs": map[string]any{"name": long}}).JSON(t)
	step := started["path"].([]any)[0].(map[string]any)
	if step["error_code"] != "invalid_inputs" || step["error_message"] != "inputs violate the pinned revision: /company_name: must be at most 200 characters" {
		t.Errorf("step %v; want invalid_inputs saying why", step)
	}
	if strings.Contains(fmt.Sprint(step), long) {
		t.Errorf("the step shows the value: %v", step)
	}
	detail := env.Must(200, "GET", "/api/v1/instances/"+started["id"].(string), env.Operator, nil).JSON(t)
	if got := detail["path"].([]any)[0].(map[string]any)["error_message"]; got != step["error_message"] {
		t.Errorf("detail's step says %v; want what the start said", got)
	}
}

// An instance that entered no task node has an empty path, not none: the
// OpenAPI document requires it, and typed clients map over it.
func TestInstanceDetailAlwaysHasAPath(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Process("noop", map[string]any{"name": "noop", "inputs": map[string]any{"fields": []any{}}, "start": "done",
		"nodes": map[string]any{"done": map[string]any{"kind": "end"}}})
	started := env.Must(201, "POST", "/api/v1/processes/noop/instances", env.Operator, map[string]any{})
	if !strings.Contains(string(started.Body), `"path":[]`) {
		t.Errorf("start answer without an empty path: %s", started.Body)
	}
	got := env.Must(200, "GET", "/api/v1/instances/"+started.JSON(t)["id"].(string), env.Operator, nil)
	if !strings.Contains(string(got.Body), `"path":[]`) {
		t.Errorf("detail without an empty path: %s", got.Body)
	}
}
