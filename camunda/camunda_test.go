package camunda_test

// Black-box tests of the Camunda 7 external-task facade (DESIGN §14), over
// HTTP against a replica on a real database.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/relaistest"
)

// Every member Camunda's LockedExternalTaskDto has is written, nulls
// included; variables are typed by the pinned revision's inputs contract;
// dates are yyyy-MM-dd'T'HH:mm:ss.SSSZ; the secret reaches the lock holder.
func TestFetchAndLockAnswersCamundaTasks(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"priority": 7, "max_attempts": 3})
	inst, occ := f.start("Acme")
	before := f.Clock.Now()
	tasks := f.fetch("worker-1", 5, map[string]any{"topicName": typedKey, "lockDuration": 30000, "includeExtensionProperties": true})
	if len(tasks) != 1 {
		t.Fatalf("got %d tasks, want 1", len(tasks))
	}
	task := tasks[0]
	want := map[string]any{
		"activityId": "task", "activityInstanceId": nil, "errorMessage": nil, "errorDetails": nil, "executionId": nil,
		"id": occ, "processDefinitionId": nil, "processDefinitionKey": "typed", "processDefinitionVersionTag": nil,
		"processInstanceId": inst, "tenantId": nil, "retries": 3.0, "suspended": false, "workerId": "worker-1",
		"priority": 7.0, "topicName": typedKey, "businessKey": nil,
	}
	for k, v := range want {
		got, ok := task[k]
		if !ok {
			t.Errorf("member %s missing (Camunda always writes it)", k)
		} else if fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	for _, k := range []string{"lockExpirationTime", "createTime", "variables", "extensionProperties"} {
		if _, ok := task[k]; !ok {
			t.Errorf("member %s missing", k)
		}
	}
	if n := len(task); n != len(want)+4 {
		t.Errorf("task has %d members, want %d: %v", n, len(want)+4, task)
	}
	lock := camundaTime(t, "lockExpirationTime", task["lockExpirationTime"])
	if d := lock.Sub(before); d < 29*time.Second || d > 31*time.Second {
		t.Errorf("lock expires %v after the fetch, want about 30s (lockDuration ms)", d)
	}
	if !strings.HasSuffix(task["createTime"].(string), "+0000") {
		t.Errorf("createTime %v, want UTC as +0000", task["createTime"])
	}
	vars := task["variables"].(map[string]any)
	wantVars := map[string][2]any{
		"name":    {"String", "Acme"},
		"count":   {"Integer", 42.0},
		"big":     {"Long", 5000000000.0},
		"ratio":   {"Double", 0.75},
		"vip":     {"Boolean", true},
		"since":   {"Date", "2026-12-01T00:00:00.000+0000"},
		"seen_at": {"Date", "2026-12-01T13:04:05.123+0000"},
		"tier":    {"String", "gold"},
		"address": {"Json", `{"city":"Lyon","zip":"69001"}`},
		"tags":    {"Json", `["a","b"]`},
		"card":    {"String", "4111111111111111"},
	}
	if len(vars) != len(wantVars) {
		t.Errorf("variables %v, want %d", vars, len(wantVars))
	}
	for name, tv := range wantVars {
		v, _ := vars[name].(map[string]any)
		if v["type"] != tv[0] || v["value"] != tv[1] || v["valueInfo"] == nil {
			t.Errorf("variable %s = %v, want type %v value %v with valueInfo", name, v, tv[0], tv[1])
		}
	}
	ext := task["extensionProperties"].(map[string]any)
	if ext["relais.revision"] != "1" || ext["relais.attempt"] != "1" {
		t.Errorf("extensionProperties %v, want relais.revision 1 and relais.attempt 1", ext)
	}
}

// The variables list narrows what is delivered (declared fields): a name
// the contract lacks is refused naming it, and an empty list delivers none.
func TestFetchVariablesAreDeclaredFields(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.start("Acme")
	res := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000, "variables": []any{"name", "nope"}}}})
	mustException(t, res, 400, "InvalidRequestException", "/topics/0/variables/1", `"nope" is no input's name`)
	if strings.Contains(string(res.Body), "/nope") {
		t.Errorf("the refusal says the name as a pointer: %s", res.Body)
	}
	// A name no input can have is said as sent, not as a pointer made of it.
	res = f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000, "variables": []any{"obj/a"}}}})
	mustException(t, res, 400, "InvalidRequestException", "/topics/0/variables/0", `"obj/a" is no input's name`)
	if strings.Contains(string(res.Body), "~1") {
		t.Errorf("the refusal escapes the name as a pointer: %s", res.Body)
	}
	// Every problem of the variables in one answer, each at its own index
	// (verifier QA: the name's first, the others a round later).
	res = f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000, "variables": []any{"nope", "crm_id", "a/b~c", "name"}}}})
	mustException(t, res, 400, "InvalidRequestException", `/topics/0/variables/0`, `"nope" is no input's name`,
		`/topics/0/variables/1`, `"crm_id" is an output`, `/topics/0/variables/2`, `"a/b~c" is no input's name`)
	if strings.Contains(string(res.Body), "variables/3") {
		t.Errorf("a valid variable is refused: %s", res.Body)
	}
	tasks := f.fetch("w", 1, map[string]any{"topicName": typedKey, "lockDuration": 60000, "variables": []any{"name", "address"}})
	vars := tasks[0]["variables"].(map[string]any)
	if len(vars) != 2 || vars["name"] == nil || vars["address"] == nil {
		t.Errorf("variables %v, want only name and address", vars)
	}
	if strings.Contains(string(mustMarshal(tasks)), "4111111111111111") {
		t.Error("the secret card was delivered though not asked for")
	}
	f.start("Beta")
	tasks = f.fetch("w", 1, map[string]any{"topicName": "crm.*", "lockDuration": 60000, "variables": []any{}})
	if len(tasks) != 1 || len(tasks[0]["variables"].(map[string]any)) != 0 {
		t.Errorf("with variables [] got %v, want one task without variables", tasks)
	}
}

// variables choose what a task carries, not which tasks come (Camunda QA:
// a worker updated to read a variable a new revision adds silently stopped
// taking the older revision's tasks): a revision without a name is fetched
// without it; only a name no revision has is refused.
func TestFetchVariablesChooseWhatATaskCarriesNotWhichTasks(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	_, first := f.start("Acme")
	_, second := f.start("Beta")
	w := typedWorking()
	ins := w["inputs"].(map[string]any)
	ins["fields"] = append(ins["fields"].([]any), map[string]any{"name": "channel", "type": "text"})
	f.Must(200, "PUT", "/api/v1/definitions/"+typedKey+"/working", f.Designer, w)
	f.Must(201, "POST", "/api/v1/definitions/"+typedKey+"/revisions", f.Designer, nil)

	for i, topic := range []string{typedKey, "crm.*"} {
		tasks := f.fetch("w", 1, map[string]any{"topicName": topic, "lockDuration": 60000, "variables": []any{"name", "channel"}})
		if len(tasks) != 1 || tasks[0]["id"] != []string{first, second}[i] {
			t.Fatalf("%s: fetched %v, want the revision 1 task %s though it has no channel", topic, tasks, []string{first, second}[i])
		}
		vars := tasks[0]["variables"].(map[string]any)
		if len(vars) != 1 || vars["name"] == nil {
			t.Errorf("%s: variables %v, want name alone (revision 1 has no channel)", topic, vars)
		}
	}
	res := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000, "variables": []any{"name", "chanel"}}}})
	mustException(t, res, 400, "InvalidRequestException", "/topics/0/variables/1", `"chanel" is no input's name (did you mean "channel"?)`)
	// A Camunda worker's camelCase for a snake_case input (verifier QA).
	res = f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000, "variables": []any{"Name"}}}})
	mustException(t, res, 400, "InvalidRequestException", "/topics/0/variables/0", `"Name" is no input's name: a variable is a top-level input, named in lower-case letters, digits and _, from a letter (did you mean "name"?)`)
	// Only an input that is there is suggested (Camunda QA: creditScore
	// was told of a credit_score no revision has).
	res = f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000, "variables": []any{"creditScore"}}}})
	mustException(t, res, 400, "InvalidRequestException", "/topics/0/variables/0", `"creditScore" is no input's name`)
	if msg, _ := res.JSON(t)["message"].(string); strings.Contains(msg, "did you mean") {
		t.Errorf("a name no input has is suggested: %s", msg)
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Completion converts typed variables by the outputs contract, answers 204
// without a body, and the route the outputs give moves the instance.
func TestCompleteWithTypedVariables(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	inst, occ := f.start("Acme")
	f.fetch("w", 1)
	body := map[string]any{"workerId": "w",
		"variables": map[string]any{
			"result": map[string]any{"type": "string", "value": "created"},
			"crm_id": map[string]any{"value": "C-42"},
			"score":  map[string]any{"type": "Integer", "value": 7},
			"rate":   map[string]any{"type": "double", "value": 0.5},
			"ok":     map[string]any{"type": "boolean", "value": true},
			"due":    map[string]any{"type": "date", "value": "2026-12-24T00:00:00.000+0000"},
			"at":     map[string]any{"type": "Date", "value": "2026-12-01T15:04:05.000+0100"},
			"meta":   map[string]any{"type": "json", "value": `{"note":"hi"}`},
			"gone":   map[string]any{"type": "Null", "value": nil},
		},
		"localVariables": map[string]any{
			"items": map[string]any{"type": "Object", "value": "[1,2]",
				"valueInfo": map[string]any{"serializationDataFormat": "application/json", "objectTypeName": "java.util.ArrayList"}},
		},
	}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/complete", body))
	o := f.occurrence(occ)
	want := `{"at":"2026-12-01T15:04:05+01:00","crm_id":"C-42","due":"2026-12-24","items":[1,2],"meta":{"note":"hi"},"ok":true,"rate":0.5,"result":"created","score":7}`
	if got := string(mustMarshal(o["outputs"])); got != want {
		t.Errorf("outputs %s, want %s", got, want)
	}
	if o["status"] != "completed" || o["route"] != "created" {
		t.Errorf("occurrence %v %v, want completed by route created", o["status"], o["route"])
	}
	if ended := f.WaitEnded(inst, 5*time.Second); ended["status"] != "completed" || ended["end_node"] != "done" {
		t.Errorf("instance %v at %v, want completed at done", ended["status"], ended["end_node"])
	}
	// The same completion again is a replay (204); another is refused: the
	// task no longer exists (404, as Camunda answers).
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/complete", body))
	other := map[string]any{"workerId": "w", "variables": map[string]any{"result": map[string]any{"value": "existing"}, "crm_id": map[string]any{"value": "C-1"}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", other), 404, "RestException", "already_settled")
	// So is one whose variables do not convert, and a failure the facade
	// cannot take: the task is done, whatever the report carried
	// (Camunda QA: told its date did not convert, a worker fixes it for
	// nothing).
	bad := map[string]any{"workerId": "w", "variables": map[string]any{"due": map[string]any{"value": "2026-12-24T10:00:00", "type": "Date"}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", bad), 404, "RestException", "already_settled")
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "retries": -1}), 404, "RestException", "already_settled")
	mustException(t, f.call("POST", "/external-task/"+occ+"/bpmnError", map[string]any{"workerId": "w", "errorCode": "X",
		"variables": map[string]any{"a": map[string]any{"value": 1}}}), 404, "RestException", "already_settled")
	if refused := f.refusedReports(occ); refused != nil {
		t.Errorf("reports to a settled task noted as refused on its attempt: %v", refused)
	}
}

// Variables that violate the pinned revision are 400 with every pointer in
// the message, and the lock stays: the worker corrects and completes.
func TestCompleteValidatesAgainstThePinnedRevision(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	bad := map[string]any{"workerId": "w", "variables": map[string]any{
		"result": map[string]any{"type": "String", "value": "maybe"},
		"score":  map[string]any{"type": "String", "value": "seven"},
		"extra":  map[string]any{"type": "String", "value": "x"},
	}}
	// Each pointer names the variable where the worker gave it, as a
	// conversion's refusal does; a missing one, where it belongs.
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", bad), 400, "InvalidRequestException",
		"invalid_outputs", "/variables/result/value", "/variables/score/value", "/variables/crm_id is required", "/variables/extra/value is not a field of the contract")
	// Noted at the pointers the client was told, not the engine's
	// /outputs/… (verifier QA).
	if p := fmt.Sprint(f.refusedReports(occ)["pointers"]); !strings.Contains(p, "/variables/result/value") || strings.Contains(p, "/outputs/") {
		t.Errorf("the refusal noted at %s; want the request's pointers", p)
	}
	// A value that does not convert comes with the contract's problems
	// with the others, in one answer; it is judged by its conversion only.
	both := map[string]any{"workerId": "w", "variables": map[string]any{
		"score":  map[string]any{"type": "Integer", "value": "seven"},
		"result": map[string]any{"type": "String", "value": "maybe"},
		"extra":  map[string]any{"type": "String", "value": "x"},
	}}
	res := f.call("POST", "/external-task/"+occ+"/complete", both)
	mustException(t, res, 400, "InvalidRequestException", "invalid_request", "cannot be converted", "the variables violate revision 1",
		"/variables/score/value", "/variables/result/value", "/variables/crm_id is required", "/variables/extra/value is not a field of the contract")
	if n := strings.Count(string(res.Body), "/variables/score"); n != 1 {
		t.Errorf("score named %d times in %s, want once (its conversion)", n, res.Body)
	}
	local := map[string]any{"workerId": "w", "localVariables": map[string]any{"result": map[string]any{"value": "maybe"}, "crm_id": map[string]any{"value": "C-1"}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", local), 400, "InvalidRequestException", "/localVariables/result/value")
	notJSON := map[string]any{"workerId": "w", "variables": map[string]any{"meta": map[string]any{"type": "Json", "value": "{nope"}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", notJSON), 400, "InvalidRequestException", "/variables/meta/value")
	// A document held in a string is as strict as the body: its duplicate
	// key or lone surrogate would be stored as the last key or U+FFFD.
	for _, v := range []map[string]any{
		{"type": "Json", "value": `{"x":"first","x":"second"}`},
		{"type": "Object", "value": `{"x":"a","x":"b"}`, "valueInfo": map[string]any{"serializationDataFormat": "application/json", "objectTypeName": "java.util.Map"}},
		{"type": "Json", "value": `{"x":"\ud800"}`},
	} {
		loose := map[string]any{"workerId": "w", "variables": map[string]any{"meta": v}}
		mustException(t, f.call("POST", "/external-task/"+occ+"/complete", loose), 400, "InvalidRequestException", "/variables/meta/value", "strict JSON: /x")
	}
	// An Object refused for its serialization is refused at its valueInfo.
	unserialized := map[string]any{"workerId": "w", "variables": map[string]any{"meta": map[string]any{"type": "Object", "value": `{"x":"a"}`,
		"valueInfo": map[string]any{"objectTypeName": "java.util.Map"}}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", unserialized), 400, "InvalidRequestException", "/variables/meta/valueInfo/serializationDataFormat", "application/json only")
	notMidnight := map[string]any{"workerId": "w", "variables": map[string]any{"due": map[string]any{"type": "Date", "value": "2026-12-24T10:00:00.000+0000"}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", notMidnight), 400, "InvalidRequestException", "/variables/due/value", "midnight")
	file := map[string]any{"workerId": "w", "variables": map[string]any{"doc": map[string]any{"type": "File", "value": "aGk="}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", file), 400, "InvalidRequestException", "File")
	clash := map[string]any{"workerId": "w",
		"variables":      map[string]any{"crm_id": map[string]any{"value": "A"}},
		"localVariables": map[string]any{"crm_id": map[string]any{"value": "B"}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", clash), 400, "InvalidRequestException", "/localVariables/crm_id/value")
	if o := f.occurrence(occ); o["status"] != "reserved" {
		t.Fatalf("after refused completions the occurrence is %v, want still reserved", o["status"])
	}
	// Each refusal is noted on the attempt, the facade's own (a value it
	// cannot convert) as the engine's: a client only logs them, and the
	// lock's expiry read as a worker that never answered (Camunda QA).
	// The request log names the code too.
	if refused := f.refusedReports(occ); refused == nil || refused["count"] != 11.0 || refused["code"] != "invalid_request" || !strings.Contains(fmt.Sprint(refused["pointers"]), "/localVariables/crm_id/value") {
		t.Errorf("refused_reports %v; want the 11 refusals, the last the clash at /localVariables/crm_id/value", refused)
	}
	if logs := f.Logs.String(); !strings.Contains(logs, "route=/engine-rest/external-task/{id}/complete") || !strings.Contains(logs, "code=invalid_outputs") {
		t.Errorf("the request log does not name the refusal's code")
	}
	good := map[string]any{"workerId": "w", "variables": map[string]any{
		"result": map[string]any{"value": "existing"}, "crm_id": map[string]any{"value": "C-7"}}}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/complete", good))
}

// Settling needs the live lock: another worker, an expired lock (which
// Camunda would accept) and an unknown or foreign task are refused with
// Camunda's statuses; bad input is never a 500.
func TestSettleRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	_, occ := f.start("Acme")
	tasks := f.fetch("w", 1, map[string]any{"topicName": typedKey, "lockDuration": 1000})
	done := map[string]any{"workerId": "w", "variables": map[string]any{"result": map[string]any{"value": "created"}, "crm_id": map[string]any{"value": "C"}}}
	other := map[string]any{"workerId": "intruder", "variables": done["variables"]}
	// Its advice names the facade's member, not the native API's.
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", other), 400, "RestException", "locked_by_other_worker", "use the workerId that fetched it")
	mustException(t, f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "intruder", "newDuration": 1000}), 400, "RestException")
	f.Clock.AdvanceTo(camundaTime(t, "lockExpirationTime", tasks[0]["lockExpirationTime"]).Add(time.Millisecond))
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", done), 400, "RestException", "lock_expired")
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "retries": 1}), 400, "RestException", "lock_expired")

	unknown := "0190a5f0-0000-7000-8000-000000000000"
	mustException(t, f.call("POST", "/external-task/"+unknown+"/complete", done), 404, "RestException", "External task with id "+unknown+" does not exist")
	mustException(t, f.call("POST", "/external-task/not-a-uuid/complete", done), 404, "RestException")
	mustException(t, f.call("GET", "/external-task/"+unknown, nil), 404, "RestException")
	// Another consumer, granted something else, sees nothing of it.
	f.Must(201, "PUT", "/api/v1/definitions/billing.charge/working", f.Designer, map[string]any{"name": "Charge",
		"inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}})
	stranger := f.Consumer("stranger", "billing.charge")
	res := f.Do("POST", "/engine-rest/external-task/"+occ+"/complete", stranger, done)
	mustException(t, res, 404, "RestException", "does not exist")
	mustException(t, f.Do("GET", "/engine-rest/external-task/"+occ, stranger, nil), 404, "RestException")

	for name, body := range map[string]string{
		"malformed JSON": `{"workerId":`,
		"unknown field":  `{"workerId":"w","bogus":1}`,
		"wrong type":     `{"workerId":"w","variables":[]}`,
		"no worker":      `{"variables":{}}`,
	} {
		res := f.call("POST", "/external-task/"+occ+"/complete", body)
		if res.Status != 400 {
			t.Errorf("%s: status %d, want 400; body %s", name, res.Status, res.Body)
		}
	}
}

// failure follows Camunda's retries (how many more runs), within the
// occurrence's budget: retries above it leave it as it is, 0 is terminal
// and routes by external_task_failure; retryTimeout delays the next offer.
func TestFailureRetries(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 3, "retry_delay": "PT10S"})
	inst, occ := f.start("Acme")
	task := f.fetch("w", 1)[0]
	if task["retries"] != 3.0 {
		t.Fatalf("first fetch retries %v, want 3 (the budget, this run included)", task["retries"])
	}
	// Outputs are refused where they were sent (localVariables alone was
	// told of /variables: Camunda QA).
	for _, list := range []string{"variables", "localVariables"} {
		refused := f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "retries": 1,
			list: map[string]any{"a": map[string]any{"value": 1}}})
		mustException(t, refused, 400, "InvalidRequestException", "not_supported", "/"+list+" is not supported")
	}
	// Above the budget: the budget stays (2 more runs).
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w",
		"errorMessage": "CRM timed out", "errorDetails": "stack…", "retries": 10, "retryTimeout": 2000}))
	o := f.occurrence(occ)
	if o["status"] != "available" || o["attempts_left"] != 2.0 || o["error_code"] != "external_task_failure" {
		t.Fatalf("after failure: %v attempts_left %v code %v, want available, 2, external_task_failure", o["status"], o["attempts_left"], o["error_code"])
	}
	got := f.call("GET", "/external-task/"+occ, nil)
	mustJSON(t, got, 200)
	view := got.JSON(t)
	if view["errorMessage"] != "CRM timed out" || view["retries"] != 2.0 || view["lockExpirationTime"] != nil {
		t.Errorf("GET after failure %v, want errorMessage, retries 2, no lock", view)
	}
	if tasks := f.fetch("w", 1); len(tasks) != 0 {
		t.Fatalf("fetched %d tasks during the 2 s retryTimeout, want none", len(tasks))
	}
	f.Clock.Advance(2100 * time.Millisecond)
	task = f.fetch("w", 1)[0]
	if task["retries"] != 2.0 || task["errorMessage"] != "CRM timed out" {
		t.Fatalf("second fetch %v, want retries 2 with the last error message", task)
	}
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "retries": -1}), 400, "InvalidRequestException", "/retries")
	// retries lowered to 0: terminal now, on_error "*" decides (the retryTimeout Camunda clients send with every failure is ignored, as Camunda does).
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "errorMessage": "gave up", "retries": 0, "retryTimeout": 1000}))
	if o := f.occurrence(occ); o["status"] != "failed" {
		t.Fatalf("after retries 0: %v, want failed", o["status"])
	}
	if ended := f.WaitEnded(inst, 5*time.Second); ended["end_node"] != "failed" {
		t.Errorf("instance ended at %v, want failed (on_error *)", ended["end_node"])
	}
	// Settled, the task is gone, whatever the report (a 400 would send
	// its worker to fix what no longer matters).
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "retries": -1}), 404, "RestException", "already_settled")
}

// A failure without retries is terminal, as in Camunda, whose REST API
// reads an absent retries as 0: the process's on_error decides (an
// incident with hold). Variables are refused.
func TestFailureWithoutRetriesIsTerminal(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 2})
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "variables": map[string]any{"x": map[string]any{"value": 1}}}),
		400, "InvalidRequestException", "not_supported")
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "errorMessage": "flaky", "retryTimeout": 0}))
	if o := f.occurrence(occ); o["status"] != "failed" || o["error_code"] != "external_task_failure" {
		t.Errorf("after a failure without retries: %v with %v, want failed with external_task_failure", o["status"], o["error_code"])
	}
}

// A failure's report is never lost to its form, which a Camunda client
// would not rewrite (the lock's expiry would then spend the attempt, the
// message lost): a retryTimeout above Relais's ceiling is the ceiling (as
// retries above the budget are the budget), and a message cut inside an
// emoji (an escaped lone surrogate), holding a NUL character or invalid
// UTF-8 is stored with U+FFFD in their place. Anything else in the body is
// as strict as ever.
func TestFailureReportIsRepairedNotRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 5})
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	before := f.Clock.Now()
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "retries": 3, "retryTimeout": (48 * time.Hour).Milliseconds()}))
	o := f.occurrence(occ)
	at, err := time.Parse(time.RFC3339Nano, o["available_at"].(string))
	if err != nil || o["status"] != "available" || at.Sub(before) > 24*time.Hour+time.Minute || at.Sub(before) < 24*time.Hour-time.Minute {
		t.Fatalf("after a 48 h retryTimeout: %v available at %v (%v), want available again in 24 h, the ceiling", o["status"], o["available_at"], err)
	}
	f.Clock.Advance(24*time.Hour + time.Second)
	for i, c := range []struct{ body, want string }{
		{`{"workerId":"w","retries":2,"errorMessage":"Lieferant \ud83d","errorDetails":"at \u0000 line 1"}`, "Lieferant \uFFFD"},
		{"{\"workerId\":\"w\",\"retries\":2,\"errorMessage\":\"caf\xe9\"}", "caf\uFFFD"},
	} {
		f.fetch("w", 1)
		mustNoContent(t, f.call("POST", "/external-task/"+occ+"/failure", json.RawMessage(c.body)))
		if got := f.occurrence(occ)["error_message"]; got != c.want {
			t.Errorf("report %d stored the message %q, want %q", i, got, c.want)
		}
		f.Clock.Advance(11 * time.Second)
	}
	// Strict elsewhere: a lone surrogate in the worker id, an unknown member.
	f.fetch("w", 1)
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", json.RawMessage(`{"workerId":"w\ud83d","retries":1}`)), 400, "InvalidRequestException", "/workerId")
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", json.RawMessage(`{"workerId":"w","retries":1,"errorMessage":"\ud83d","colour":"red"}`)), 400, "InvalidRequestException", "colour")
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/bpmnError", json.RawMessage(`{"workerId":"w","errorCode":"CRM_DOWN","errorMessage":"down \ud83d"}`)))
	if got := f.occurrence(occ)["error_message"]; got != "down \uFFFD" {
		t.Errorf("BPMN error stored the message %q, want it repaired", got)
	}
}

// A BPMN error fails the occurrence for good with its code, and on_error
// routes by it.
func TestBpmnErrorRoutesByCode(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 5})
	inst, occ := f.start("Acme")
	f.fetch("w", 1)
	mustException(t, f.call("POST", "/external-task/"+occ+"/bpmnError", map[string]any{"workerId": "w", "errorCode": "not a code!"}),
		400, "InvalidRequestException", "/errorCode")
	if p := fmt.Sprint(f.refusedReports(occ)["pointers"]); p != "[/errorCode]" {
		t.Errorf("the refused code noted at %s; want /errorCode, the request's", p)
	}
	mustException(t, f.call("POST", "/external-task/"+occ+"/bpmnError", map[string]any{"workerId": "w", "errorCode": "X",
		"variables": map[string]any{"a": map[string]any{"value": 1}}}), 400, "InvalidRequestException", "not_supported")
	if r := f.refusedReports(occ); r["code"] != "not_supported" || fmt.Sprint(r["pointers"]) != "[/variables]" {
		t.Errorf("variables on a BPMN error noted %v; want not_supported at /variables (verifier QA: no pointer)", r)
	}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/bpmnError", map[string]any{"workerId": "w", "errorCode": "CRM_DOWN", "errorMessage": "CRM is down"}))
	o := f.occurrence(occ)
	if o["status"] != "failed" || o["error_code"] != "CRM_DOWN" || o["error_message"] != "CRM is down" {
		t.Fatalf("after bpmnError: %v %v %v", o["status"], o["error_code"], o["error_message"])
	}
	if ended := f.WaitEnded(inst, 5*time.Second); ended["end_node"] != "down" {
		t.Errorf("instance ended at %v, want down (on_error CRM_DOWN)", ended["end_node"])
	}
}

// extendLock sets the lock to newDuration from now; above the ceiling it is
// refused, unless the task is settled (said first).
func TestExtendLock(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	_, occ := f.start("Acme")
	f.fetch("w", 1, map[string]any{"topicName": typedKey, "lockDuration": 1000})
	before := f.Clock.Now()
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "w", "newDuration": 120000}))
	view := f.call("GET", "/external-task/"+occ, nil).JSON(t)
	if d := camundaTime(t, "lockExpirationTime", view["lockExpirationTime"]).Sub(before); d < 119*time.Second || d > 121*time.Second {
		t.Errorf("lock ends %v from now, want about 120s", d)
	}
	over := f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "w", "newDuration": (time.Hour).Milliseconds()})
	mustException(t, over, 400, "InvalidRequestException", "bound_exceeded", "/newDuration")
	// Said once: the detail names the member, its one error is not repeated.
	if msg, _ := over.JSON(t)["message"].(string); strings.Count(msg, "600000") != 1 {
		t.Errorf("message %q, want the ceiling said once", msg)
	}
	mustException(t, f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "w"}), 400, "InvalidRequestException", "/newDuration")
	// Under a second, as the native protocol: the lock would lapse at once.
	for _, ms := range []int{60, 0, -5} { // one floor, whatever the mistake
		mustException(t, f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "w", "newDuration": ms}), 400,
			"InvalidRequestException", "/newDuration", "at least 1000 milliseconds", "seconds")
	}
	// One trailing slash changes nothing, as on /api/v1 (a client's base
	// URL ending in a slash should not make every route 404).
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/extendLock/", map[string]any{"workerId": "w", "newDuration": 60000}))
	if view := f.call("GET", "/external-task/"+occ+"/", nil); view.Status != 200 {
		t.Errorf("GET /external-task/{id}/ = %d, want 200", view.Status)
	}
	// Settled, it is said so first, as to a report: the worker is not
	// sent to fix a duration that no longer matters (Camunda QA).
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"result": map[string]any{"value": "created"}, "crm_id": map[string]any{"value": "C"}}}))
	for _, body := range []map[string]any{{"workerId": "w", "newDuration": 500}, {"workerId": "w", "newDuration": 700000}, {"workerId": "w"}} {
		mustException(t, f.call("POST", "/external-task/"+occ+"/extendLock", body), 404, "RestException", "already_settled")
	}
}

// unlock hands the task back without spending an attempt, whichever worker
// of the consumer holds it; an unlocked task unlocks again harmlessly.
func TestUnlockReleases(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 2})
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/unlock", nil))
	o := f.occurrence(occ)
	if o["status"] != "available" || o["attempts_left"] != 2.0 {
		t.Fatalf("after unlock: %v with %v left, want available with 2", o["status"], o["attempts_left"])
	}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/unlock", nil))
	if tasks := f.fetch("other", 1); len(tasks) != 1 || tasks[0]["retries"] != 2.0 {
		t.Errorf("after unlock, another worker fetched %v, want the task with retries 2", tasks)
	}
	mustException(t, f.call("POST", "/external-task/0190a5f0-0000-7000-8000-000000000000/unlock", nil), 404, "RestException")
	// Unlocked, it is not the worker's to report on: told to fetch it, in
	// Camunda's words (a Camunda worker has no stream: Camunda QA).
	_, second := f.start("Globex")
	res := f.call("POST", "/external-task/"+second+"/failure", map[string]any{"workerId": "w", "retries": 1})
	mustException(t, res, 400, "RestException", "not_reserved", "fetch and lock it first")
	if msg, _ := res.JSON(t)["message"].(string); strings.Contains(msg, "stream") {
		t.Errorf("a Camunda worker is told of streams: %s", msg)
	}
}

// unlock of a task whose retry waits out a failure's retryTimeout makes it
// fetchable at once, its retries unchanged: Camunda's unlock clears the
// lock the failure set (a 204 that changed nothing let it wait on: QA).
// A task not yet tried, or due already, is left as it is.
func TestUnlockOffersAWaitingRetryNow(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 3, "retry_delay": "PT1H"})
	_, occ := f.start("Acme")
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/unlock", nil))
	if o := f.occurrence(occ); o["status"] != "available" || o["attempts_left"] != 3.0 {
		t.Fatalf("unlock before any fetch: %v with %v left, want it untouched", o["status"], o["attempts_left"])
	}
	f.fetch("w", 1)
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{
		"workerId": "w", "errorMessage": "CRM timed out", "retries": 2, "retryTimeout": 3_600_000}))
	if tasks := f.fetch("w", 1); len(tasks) != 0 {
		t.Fatalf("fetched %d tasks during the hour's retryTimeout, want none", len(tasks))
	}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/unlock", nil))
	tasks := f.fetch("other", 1)
	if len(tasks) != 1 || tasks[0]["id"] != occ || tasks[0]["retries"] != 2.0 {
		t.Fatalf("after unlock, fetched %v; want the task at once with retries 2", tasks)
	}
}

// GET /external-task lists the consumer's open tasks with Camunda's
// filters, sorting and paging; count agrees; settled tasks are gone; no
// variables (and so no secret) appear.
func TestListAndCount(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	inst1, occ1 := f.start("One")
	_, occ2 := f.start("Two")
	_, occ3 := f.start("Three")
	f.fetch("w1", 1) // occ1
	list := func(query string) []map[string]any {
		t.Helper()
		res := f.call("GET", "/external-task"+query, nil)
		mustJSON(t, res, 200)
		var out []map[string]any
		if err := json.Unmarshal(res.Body, &out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(res.Body), "4111111111111111") {
			t.Errorf("GET /external-task%s shows the secret", query)
		}
		return out
	}
	ids := func(tasks []map[string]any) string {
		var s []string
		for _, task := range tasks {
			s = append(s, task["id"].(string))
		}
		return strings.Join(s, ",")
	}
	count := func(query string) float64 {
		t.Helper()
		res := f.call("GET", "/external-task/count"+query, nil)
		mustJSON(t, res, 200)
		return res.JSON(t)["count"].(float64)
	}
	all := occ1 + "," + occ2 + "," + occ3
	for query, want := range map[string]string{
		"":                                       all,
		"?topicName=" + typedKey:                 all,
		"?topicname=nothing":                     all, // unknown, ignored as Camunda does
		"?topicName=crm.other":                   "",
		"?locked=true":                           occ1,
		"?notLocked=true":                        occ2 + "," + occ3,
		"?workerId=w1":                           occ1,
		"?processInstanceId=" + inst1:            occ1,
		"?externalTaskIdIn=" + occ2 + "," + occ3: occ2 + "," + occ3,
		"?externalTaskId=nope":                   "",
		"?activityId=task":                       all,
		"?activityIdIn=other":                    "",
		"?processDefinitionKey=typed":            all,
		"?withRetriesLeft=true":                  all,
		"?noRetriesLeft=true":                    "",
		"?tenantIdIn=t1":                         "",
		"?executionId=x":                         "",
		"?suspended=true":                        "",
		"?active=true":                           all,
		"?priorityHigherThanOrEquals=5&priorityLowerThanOrEquals=5": all,
		"?priorityHigherThanOrEquals=6":                             "",
		"?sortBy=id&sortOrder=desc":                                 occ3 + "," + occ2 + "," + occ1,
		"?sortBy=id&sortOrder=asc&firstResult=1&maxResults=1":       occ2,
		"?sortBy=createTime&sortOrder=desc":                         occ3 + "," + occ2 + "," + occ1,
		"?maxResults=0":                                             "",
	} {
		if got := ids(list(query)); got != want {
			t.Errorf("GET /external-task%s = %s, want %s", query, got, want)
		}
		if !strings.Contains(query, "Result") && !strings.Contains(query, "sort") {
			wantN := 0
			if want != "" {
				wantN = len(strings.Split(want, ","))
			}
			if n := count(query); int(n) != wantN {
				t.Errorf("count%s = %v, want %d", query, n, wantN)
			}
		}
	}
	view := f.call("GET", "/external-task/"+occ1, nil).JSON(t)
	if view["workerId"] != "w1" || view["retries"] != 3.0 || view["lockExpirationTime"] == nil || view["suspended"] != false {
		t.Errorf("GET %s = %v", occ1, view)
	}
	for _, k := range []string{"variables", "errorDetails", "extensionProperties"} {
		if _, ok := view[k]; ok {
			t.Errorf("GET /external-task/{id} has %s: Camunda's ExternalTaskDto has not", k)
		}
	}
	// Settled: no longer an external task.
	mustNoContent(t, f.call("POST", "/external-task/"+occ1+"/complete", map[string]any{"workerId": "w1",
		"variables": map[string]any{"result": map[string]any{"value": "created"}, "crm_id": map[string]any{"value": "C"}}}))
	mustException(t, f.call("GET", "/external-task/"+occ1, nil), 404, "RestException")
	if got := ids(list("")); got != occ2+","+occ3 {
		t.Errorf("after completion the list is %s", got)
	}
	for query, fragment := range map[string]string{
		"?locked=maybe":                    "locked",
		"?sortBy=id":                       "sortOrder",
		"?sortBy=name&sortOrder=asc":       "sortBy",
		"?maxResults=5000":                 "maxResults",
		"?lockExpirationAfter=yesterday":   "lockExpirationAfter",
		"?processVariables=a_eq_b":         "processVariables",
		"?priorityHigherThanOrEquals=high": "priorityHigherThanOrEquals",
		"?topicName=crm%00typed":           "NUL",
		"?workerId=%00":                    "NUL",
		"?workerId=%ff":                    "UTF-8",
		"?activityIdIn=a,%ff":              "UTF-8",
		// Unreadable, the filter would be dropped and every task listed.
		"?topicName=nothing_here%":  "percent sign",
		"?topicName=nothing_here;x": "semicolon",
	} {
		mustException(t, f.call("GET", "/external-task"+query, nil), 400, "InvalidRequestException", fragment)
	}
	mustException(t, f.call("GET", "/external-task/count?topicName=%ff", nil), 400, "InvalidRequestException", "UTF-8")
}

// Authentication: the consumer's token as Bearer, or Basic with its name;
// nothing else, and every refusal in Camunda's body.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	mustJSON(t, f.basic(f.consumer, f.token, "GET", "/external-task/count", nil), 200)
	mustJSON(t, f.call("GET", "/external-task/count", nil), 200)
	res := f.Do("GET", "/engine-rest/external-task/count", "", nil)
	mustException(t, res, 401, "AuthenticationException")
	if len(res.Header.Values("WWW-Authenticate")) != 2 {
		t.Errorf("WWW-Authenticate %v, want Basic and Bearer challenges", res.Header.Values("WWW-Authenticate"))
	}
	mustException(t, f.basic("someone-else", f.token, "GET", "/external-task/count", nil), 401, "AuthenticationException")
	mustException(t, f.basic(f.consumer, "rls_wrong", "GET", "/external-task/count", nil), 401, "AuthenticationException")
	mustException(t, f.Do("GET", "/engine-rest/external-task/count", "", nil, "Authorization", "Basic %%%"), 401, "AuthenticationException")
	// The token given as the user, no password: said so, not "a bearer
	// token is required".
	mustException(t, f.basic(f.token, "", "GET", "/external-task/count", nil), 401, "AuthenticationException", "carry no token", "the password its token")
	// A consumer whose name holds a colon: the token (which has none)
	// follows the last one.
	colon := f.Must(201, "POST", "/api/v1/consumers", f.Admin, map[string]any{"name": "team:crm",
		"grants": []any{map[string]any{"definition": "crm.*"}}}).JSON(t)["token"].(string)
	mustJSON(t, f.basic("team:crm", colon, "GET", "/external-task/count", nil), 200)
	mustException(t, f.Do("GET", "/engine-rest/external-task/count", f.Operator, nil), 403, "AuthorizationException")
	mustException(t, f.Do("GET", "/engine-rest/nope", "", nil), 401, "AuthenticationException")
	mustException(t, f.call("GET", "/nope", nil), 404, "NotFoundException")
	// Camunda's topic list is no task of id "topic-names".
	mustException(t, f.call("GET", "/external-task/topic-names", nil), 404, "NotFoundException", "GET /engine-rest/external-task/topic-names is not served by the facade")
	mustException(t, f.call("DELETE", "/external-task/count", nil), 405, "NotAllowedException")
	// A revoked consumer is refused at once.
	consumers := f.Must(200, "GET", "/api/v1/consumers", f.Admin, nil).JSON(t)["items"].([]any)
	id := consumers[0].(map[string]any)["id"]
	f.Must(204, "DELETE", fmt.Sprintf("/api/v1/consumers/%v", id), f.Admin, nil)
	mustException(t, f.call("GET", "/external-task/count", nil), 401, "AuthenticationException")
}

// A fetch long-polls up to asyncResponseTimeout and wakes when an
// occurrence arrives; Camunda's and Relais's ceilings are refusals.
func TestFetchLongPolls(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, func(c *config.Config) { c.Pull.MaxWaiters = 1 })
	done := make(chan []map[string]any, 1)
	go func() {
		res := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "asyncResponseTimeout": 20000,
			"topics": []any{map[string]any{"topicName": "crm.*", "lockDuration": 60000}}})
		var tasks []map[string]any
		_ = json.Unmarshal(res.Body, &tasks)
		done <- tasks
	}()
	f.waitForWaiters(1)
	// The replica's waiter bound applies to the facade too: past it a fetch
	// that would wait is 429, with Retry-After.
	full := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w2", "maxTasks": 1, "asyncResponseTimeout": 20000,
		"topics": []any{map[string]any{"topicName": "crm.*", "lockDuration": 60000}}})
	mustException(t, full, 429, "RestException", "too_many_waiters")
	if full.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	start := time.Now()
	_, occ := f.start("Late")
	select {
	case tasks := <-done:
		if len(tasks) != 1 || tasks[0]["id"] != occ {
			t.Fatalf("long poll answered %v, want %s", tasks, occ)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("long poll woke %v after the start, want at once", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not wake")
	}
	empty := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "asyncResponseTimeout": 100,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000}}})
	mustJSON(t, empty, 200)
	if strings.TrimSpace(string(empty.Body)) != "[]" {
		t.Errorf("an empty long poll answered %s, want []", empty.Body)
	}
	// A granted topic no task can have (no such key, no such revision)
	// matches nothing, as in Camunda; the native protocols refuse it.
	unknown := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "asyncResponseTimeout": 100,
		"topics": []any{map[string]any{"topicName": "crm.no_such_key", "lockDuration": 1000}}})
	mustJSON(t, unknown, 200)
	if strings.TrimSpace(string(unknown.Body)) != "[]" {
		t.Errorf("a fetch of an unknown topic answered %s, want []", unknown.Body)
	}
	// A lock under a second (a lockDuration written in seconds, say) would
	// lapse before any completion, each lapse spending an attempt: refused,
	// as the native protocol refuses it.
	mustException(t, f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 60}}}), 400, "InvalidRequestException", "/topics/0/lockDuration", "at least 1000 milliseconds")
	mustException(t, f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "asyncResponseTimeout": 1800001,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000}}}), 400, "InvalidRequestException", "1800000")
	mustException(t, f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "asyncResponseTimeout": 120000,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000}}}), 400, "InvalidRequestException", "bound_exceeded", "/asyncResponseTimeout")
}

// A fetch waiting with a token rotated meanwhile claims nothing when work
// arrives: it is refused, and the task stays available.
func TestWaitingFetchWithARotatedTokenClaimsNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	done := make(chan relaistest.Response, 1)
	go func() {
		done <- f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "asyncResponseTimeout": 20000,
			"topics": []any{map[string]any{"topicName": "crm.*", "lockDuration": 60000}}})
	}()
	f.waitForWaiters(1)
	consumers := f.Must(200, "GET", "/api/v1/consumers", f.Admin, nil).JSON(t)["items"].([]any)
	f.Must(200, "POST", fmt.Sprintf("/api/v1/consumers/%v/rotate", consumers[0].(map[string]any)["id"]), f.Admin, nil)
	_, occ := f.start("Late")
	select {
	case res := <-done:
		mustException(t, res, 401, "AuthenticationException")
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not wake")
	}
	if o := f.Must(200, "GET", "/api/v1/occurrences/"+occ, f.Operator, nil).JSON(t); o["status"] != "available" {
		t.Errorf("task %v after the refused fetch, want available", o["status"])
	}
}

// Fetch bounds and Camunda filters Relais cannot honour are refused, never
// clamped or ignored; topics not granted are refused.
func TestFetchRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, func(c *config.Config) { c.Pull.MaxTasks = 5 })
	topic := func(extra ...any) []any {
		m := map[string]any{"topicName": typedKey, "lockDuration": 1000}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return []any{m}
	}
	for name, c := range map[string]struct {
		body     map[string]any
		status   int
		fragment string
	}{
		"no worker":         {map[string]any{"maxTasks": 1, "topics": topic()}, 400, "/workerId"},
		"no maxTasks":       {map[string]any{"workerId": "w", "topics": topic()}, 400, "/maxTasks"},
		"maxTasks ceiling":  {map[string]any{"workerId": "w", "maxTasks": 6, "topics": topic()}, 400, "bound_exceeded"},
		"lock ceiling":      {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic("lockDuration", 3600000)}, 400, "/topics/0/lockDuration"},
		"zero lock":         {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic("lockDuration", 0)}, 400, "/topics/0/lockDuration"},
		"no topic name":     {map[string]any{"workerId": "w", "maxTasks": 1, "topics": []any{map[string]any{"lockDuration": 1000}}}, 400, "/topics/0/topicName"},
		"business key":      {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic("businessKey", "b")}, 400, "businessKey"},
		"process key":       {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic("processDefinitionKeyIn", []any{"typed"})}, 400, "/topics/0/processDefinitionKeyIn is not supported"},
		"process ids":       {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic("processDefinitionIdIn", []any{"x"})}, 400, "/topics/0/processDefinitionIdIn is not supported"},
		"sorting no order":  {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic(), "sorting": []any{map[string]any{"sortBy": "createTime"}}}, 400, "/sorting/0/sortOrder is required"},
		"tenants":           {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic("tenantIdIn", []any{"t"})}, 400, "tenantIdIn"},
		"process vars":      {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic("processVariables", map[string]any{"a": 1})}, 400, "processVariables"},
		"sorting desc":      {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic(), "sorting": []any{map[string]any{"sortBy": "createTime", "sortOrder": "desc"}}}, 400, "sortOrder"},
		"unknown member":    {map[string]any{"workerId": "w", "maxTasks": 1, "topics": topic(), "bogus": true}, 400, "bogus"},
		"bad pattern":       {map[string]any{"workerId": "w", "maxTasks": 1, "topics": []any{map[string]any{"topicName": "crm*", "lockDuration": 1000}}}, 400, "/topics/0/topicName"},
		"not granted":       {map[string]any{"workerId": "w", "maxTasks": 1, "topics": []any{map[string]any{"topicName": "billing.charge", "lockDuration": 1000}}}, 403, "not_granted"},
		"not granted, none": {map[string]any{"workerId": "w", "maxTasks": 0, "topics": []any{map[string]any{"topicName": "billing.charge", "lockDuration": 1000}}}, 403, "not_granted"},
	} {
		t.Run(name, func(t *testing.T) {
			res := f.call("POST", "/external-task/fetchAndLock", c.body)
			typ := "InvalidRequestException"
			if c.status == 403 {
				typ = "AuthorizationException"
			}
			mustException(t, res, c.status, typ, c.fragment)
		})
	}
	// Accepted and honoured as Camunda means them.
	ok := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "usePriority": false,
		"topics":  topic("withoutTenantId", true, "localVariables", true, "deserializeValues", true),
		"sorting": []any{map[string]any{"sortBy": "createTime", "sortOrder": "asc"}}})
	mustJSON(t, ok, 200)
}

// usePriority: the highest priority is claimed first; topics with their
// own lockDuration get their own lock.
func TestPriorityAndPerTopicLocks(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"priority": 2})
	_, low := f.start("Low")
	// A second process on the same definition, at a higher priority.
	f.Process("urgent", typedProcess(map[string]any{"priority": 9}))
	inst := f.Must(201, "POST", "/api/v1/processes/urgent/instances", f.Operator, map[string]any{"inputs": typedInputs("High")}).JSON(t)
	high := inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	tasks := f.fetch("w", 1, map[string]any{"topicName": typedKey, "lockDuration": 60000})
	if len(tasks) != 1 || tasks[0]["id"] != high || tasks[0]["priority"] != 9.0 {
		t.Fatalf("usePriority fetched %v, want %s first", tasks, high)
	}
	before := f.Clock.Now()
	tasks = f.fetch("w", 1,
		map[string]any{"topicName": typedKey, "lockDuration": 5000},
		map[string]any{"topicName": "crm.*", "lockDuration": 300000})
	if len(tasks) != 1 || tasks[0]["id"] != low {
		t.Fatalf("fetched %v, want %s", tasks, low)
	}
	if d := camundaTime(t, "lockExpirationTime", tasks[0]["lockExpirationTime"]).Sub(before); d < 4*time.Second || d > 6*time.Second {
		t.Errorf("the first matching topic asked 5 s, the lock ends in %v", d)
	}
}

// A deferred occurrence (DESIGN §11) is listed as an unlocked task whose
// run is still counted; unlock refuses it (it holds no lock), and any
// worker of the consumer may complete it. Another consumer granted the
// same definition may not unlock what this one holds.
func TestDeferredAndForeignTasks(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 3})
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	other := f.Consumer("other-team", typedKey)
	mustException(t, f.Do("POST", "/engine-rest/external-task/"+occ+"/unlock", other, nil), 400, "RestException", "locked_by_other_worker")
	f.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/defer", f.token, map[string]any{"worker_id": "w", "reason": "waiting for a signature"})
	view := f.call("GET", "/external-task/"+occ, nil)
	mustJSON(t, view, 200)
	if v := view.JSON(t); v["lockExpirationTime"] != nil || v["retries"] != 3.0 {
		t.Errorf("a deferred task shows %v, want no lock and retries 3 (its run counted)", v)
	}
	if n := f.call("GET", "/external-task/count?notLocked=true", nil).JSON(t)["count"]; n != 1.0 {
		t.Errorf("notLocked count = %v, want the deferred task", n)
	}
	mustException(t, f.call("POST", "/external-task/"+occ+"/unlock", nil), 400, "RestException", "deferred")
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/complete", map[string]any{"workerId": "front-end",
		"variables": map[string]any{"result": map[string]any{"value": "created"}, "crm_id": map[string]any{"value": "C-9"}}}))
}

// A worker polling through the facade is in the worker catalog (DESIGN
// §10) like the pull protocol's pollers, under the camunda protocol, so
// that an operator sees who serves a definition; its appearance is logged.
func TestFacadeWorkersAreInTheCatalog(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.fetch("camunda-w", 1)
	items := f.Must(200, "GET", "/api/v1/definitions/"+typedKey+"/workers", f.Operator, nil).JSON(t)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("workers of %s: %v, want the facade's poller", typedKey, items)
	}
	if w := items[0].(map[string]any); w["worker_id"] != "camunda-w" || w["protocol"] != "camunda" || w["consumer"].(map[string]any)["name"] != "crm-team" {
		t.Errorf("catalog row %v, want camunda-w of crm-team over camunda", w)
	}
	if logs := f.Logs.String(); !strings.Contains(logs, "event=worker.connected protocol=camunda") {
		t.Errorf("no worker.connected event for the facade's worker in the log")
	}
}

// An integer written as an integral decimal (3.0, 2e0: valid integers) is
// stored and delivered written as an integer, whichever way it came (a
// start, a native completion, a Camunda Double): typed workers (Go's
// int64, Java's Integer) refuse to decode 42.0.
func TestIntegralDecimalsAreDeliveredAsIntegers(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	inputs := strings.Replace(string(mustMarshal(typedInputs("Acme"))), `"count":42`, `"count":42.0`, 1)
	f.Must(201, "POST", "/api/v1/processes/typed/instances", f.Operator, json.RawMessage(`{"inputs":`+inputs+`}`))
	res := f.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.token, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": typedKey}}})
	if !strings.Contains(string(res.Body), `"count":42,`) {
		t.Errorf("delivered inputs %s, want count written 42", res.Body)
	}
	occ := res.JSON(t)["occurrences"].([]any)[0].(map[string]any)["id"].(string)
	f.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/complete", f.token,
		json.RawMessage(`{"worker_id":"w","outputs":{"result":"created","crm_id":"C-1","score":3.0,"rate":3.0,"items":[1.0,2e0]}}`))
	// The observation API shows the stored document as it is: a number
	// field keeps its literal.
	raw := string(f.Must(200, "GET", "/api/v1/occurrences/"+occ, f.Operator, nil).Body)
	for _, want := range []string{`"score":3}`, `"items":[1,2]`, `"rate":3.0`} {
		if !strings.Contains(raw, want) {
			t.Errorf("occurrence %s, want %s in its outputs", raw, want)
		}
	}

	_, occ = f.start("Globex")
	f.fetch("w", 1)
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/complete", json.RawMessage(
		`{"workerId":"w","variables":{"result":{"value":"created"},"crm_id":{"value":"C-2"},"score":{"type":"Double","value":3.0}}}`)))
	raw = string(f.Must(200, "GET", "/api/v1/occurrences/"+occ, f.Operator, nil).Body)
	if !strings.Contains(raw, `"score":3}`) {
		t.Errorf("occurrence %s, want score written 3", raw)
	}
}

// The facade takes Basic credentials, which browsers remember: a body not
// declared JSON (a form, text/plain) is 415 as in Camunda, and a
// state-changing request a browser sends from another site is 403, so no
// web page can lock or fail its visitor's tasks. Workers are unaffected.
func TestBrowserRequestsFromElsewhereAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	_, occ := f.start("Acme")
	fetch := `{"workerId":"x","maxTasks":1,"topics":[{"topicName":"*","lockDuration":600000}]}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"} {
		mustException(t, f.Do("POST", "/engine-rest/external-task/fetchAndLock", f.token, fetch, "Content-Type", ct), 415, "NotSupportedException", "unsupported_media_type", ct)
	}
	mustException(t, f.Do("POST", "/engine-rest/external-task/fetchAndLock", f.token, fetch, "Content-Type", ""), 415, "NotSupportedException", "none")
	// A body above RELAIS_MAX_BODY_BYTES, as the README's table says.
	huge := `{"workerId":"` + strings.Repeat("x", 2<<20) + `"}`
	mustException(t, f.Do("POST", "/engine-rest/external-task/fetchAndLock", f.token, huge, "Content-Type", "application/json"), 413, "InvalidRequestException")
	mustException(t, f.Do("POST", "/engine-rest/external-task/fetchAndLock", f.token, fetch, "Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"), 403, "AuthorizationException", "cross_origin")
	// Credentials are checked first, as on every route.
	mustException(t, f.Do("POST", "/engine-rest/external-task/fetchAndLock", "", fetch, "Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"), 401, "AuthenticationException")
	mustException(t, f.Do("POST", "/engine-rest/external-task/fetchAndLock", f.token, fetch, "Content-Type", "application/json", "Origin", "https://evil.example"), 403, "AuthorizationException", "cross_origin")
	if o := f.occurrence(occ); o["status"] != "available" {
		t.Fatalf("a refused request locked the task: %v", o["status"])
	}
	// A worker: JSON with a charset, no Origin; a page of the same site.
	mustJSON(t, f.Do("POST", "/engine-rest/external-task/fetchAndLock", f.token, fetch, "Content-Type", "application/json; charset=utf-8", "Sec-Fetch-Site", "same-origin"), 200)
	// unlock without a body needs no Content-Type, as Camunda's clients send it.
	mustNoContent(t, f.Do("POST", "/engine-rest/external-task/"+occ+"/unlock", f.token, nil))
}

// unlock takes no body: one sent anyway is refused when malformed or not
// empty, as every other route refuses what it would ignore.
func TestUnlockRefusesABody(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	mustException(t, f.call("POST", "/external-task/"+occ+"/unlock", "{not json"), 400, "InvalidRequestException", "invalid_json")
	mustException(t, f.call("POST", "/external-task/"+occ+"/unlock", map[string]any{"bogus": 1}), 400, "InvalidRequestException", "bogus")
	if o := f.occurrence(occ); o["status"] != "reserved" {
		t.Fatalf("a refused unlock released the task: %v", o["status"])
	}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/unlock", map[string]any{}))
	// Camunda's Java client sends unlock's absent body as JSON null.
	f.fetch("w", 1)
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/unlock", "null"))
	if o := f.occurrence(occ); o["status"] != "available" {
		t.Fatalf("unlock with a null body left the task %v", o["status"])
	}
}

// A 405 says which methods the route takes (RFC 9110), and an unknown
// route's message starts with Relais's code like every other.
func TestMethodNotAllowedListsTheMethods(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	for path, allow := range map[string]string{
		"/external-task/fetchAndLock": "GET, HEAD, POST", // GET is /external-task/{id}
		"/external-task":              "GET, HEAD",
		"/external-task/count":        "GET, HEAD",
		"/external-task/0190a5f0-0000-7000-8000-000000000000/complete": "POST",
	} {
		res := f.call("PUT", path, map[string]any{})
		mustException(t, res, 405, "NotAllowedException", "method_not_allowed")
		if got := res.Header.Get("Allow"); got != allow {
			t.Errorf("PUT %s: Allow %q, want %q", path, got, allow)
		}
	}
	mustException(t, f.call("GET", "/process-instance", nil), 404, "NotFoundException", "not_found: ")
	// The API's own 405s list them too.
	res := f.Do("DELETE", "/api/v1/definitions", f.Operator, nil)
	if res.Status != 405 || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE /api/v1/definitions: %d Allow %q, want 405 with GET, HEAD", res.Status, res.Header.Get("Allow"))
	}
}

// A topic's variables list is bounded, and says so; a Long or an Integer
// beyond Java's range is refused rather than stored for a Java worker that
// cannot read it back.
func TestVariableBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	names := make([]any, 101)
	for i := range names {
		names[i] = "name"
	}
	mustException(t, f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000, "variables": names}}}), 400, "InvalidRequestException", "bound_exceeded", "/topics/0/variables is above Relais's ceiling of 100 names")
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	complete := func(score any, typ string) relaistest.Response {
		return f.call("POST", "/external-task/"+occ+"/complete", map[string]any{"workerId": "w", "variables": map[string]any{
			"result": map[string]any{"value": "created", "type": "String"}, "crm_id": map[string]any{"value": "c1", "type": "String"},
			"score": map[string]any{"value": score, "type": typ}}})
	}
	mustException(t, complete(json.Number("99999999999999999999999"), "Long"), 400, "InvalidRequestException", "/variables/score/value", "Long must be a whole number between")
	mustException(t, complete(json.Number("2147483648"), "Integer"), 400, "InvalidRequestException", "Integer must be a whole number between")
	mustException(t, complete(json.Number("40000"), "Short"), 400, "InvalidRequestException", "Short must be a whole number between")
	// Spelt with an exponent or a fraction, as JavaScript writes large numbers.
	mustException(t, complete(json.Number("1e19"), "Long"), 400, "InvalidRequestException", "Long must be a whole number between")
	mustException(t, complete(json.Number("40000.0"), "Short"), 400, "InvalidRequestException", "Short must be a whole number between")
	mustException(t, complete(json.Number("1.5"), "Integer"), 400, "InvalidRequestException", "Integer must be a whole number between")
	mustNoContent(t, complete(json.Number("9223372036854775807"), "Long"))
}

// A task fetched by a pattern answers with that pattern as its topicName:
// the official clients find their handler by it. With both the key and a
// pattern asked, the key's topic answers; the key itself is an extension
// property.
func TestTopicNameIsTheSubscribedTopic(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.start("Acme")
	got := f.fetch("w", 1, map[string]any{"topicName": "crm.*", "lockDuration": 60000, "includeExtensionProperties": true})
	if len(got) != 1 || got[0]["topicName"] != "crm.*" {
		t.Fatalf("fetched by crm.*: %v, want topicName crm.*", got)
	}
	if props, _ := got[0]["extensionProperties"].(map[string]any); props["relais.definition"] != typedKey {
		t.Errorf("extension properties %v, want relais.definition %s", got[0]["extensionProperties"], typedKey)
	}
	f.start("Globex")
	got = f.fetch("w", 1, map[string]any{"topicName": "crm.*", "lockDuration": 60000}, map[string]any{"topicName": typedKey, "lockDuration": 60000})
	if len(got) != 1 || got[0]["topicName"] != typedKey {
		t.Errorf("fetched by crm.* and its key: %v, want topicName %s", got, typedKey)
	}
}

// Messages read as written: an unknown member is named once, and a type
// takes its article ("an Integer").
func TestExceptionMessagesReadWell(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	res := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "foo": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 1000}}})
	mustException(t, res, 400, "InvalidRequestException")
	if msg := res.JSON(t)["message"]; msg != "unknown_field: unknown field(s): /foo" {
		t.Errorf("message %q, want the member named once", msg)
	}
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	res = f.call("POST", "/external-task/"+occ+"/complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"score": map[string]any{"type": "Integer", "value": 99999999999}}})
	mustException(t, res, 400, "InvalidRequestException", "an Integer must be a whole number")
}

// A task past its deadline is no longer a task: its completion is 404
// (it fails as deadline_exceeded), its unlock a no-op (204).
func TestATaskPastItsDeadlineIsGone(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"deadline": "PT1H"})
	_, occ := f.start("Acme")
	f.fetch("w", 1)
	_, waiting := f.start("Beta") // never fetched: available when its deadline passes
	f.Clock.Advance(time.Hour + time.Second)
	if r := f.call("POST", "/external-task/"+waiting+"/unlock", nil); r.Status != 404 {
		t.Errorf("unlock of an unlocked task past its deadline: %d %s, want 404", r.Status, r.Body)
	}
	done := map[string]any{"workerId": "w", "variables": map[string]any{
		"result": map[string]any{"type": "String", "value": "created"}, "crm_id": map[string]any{"type": "String", "value": "C-1"}}}
	mustException(t, f.call("POST", "/external-task/"+occ+"/complete", done), 404, "RestException", "deadline_exceeded")
	// Gone for an unlock too, before the timer fails it as after.
	if r := f.call("POST", "/external-task/"+occ+"/unlock", nil); r.Status != 404 {
		t.Errorf("unlock past the deadline: %d %s, want 404", r.Status, r.Body)
	}
	relaistest.WaitFor(t, 10*time.Second, "the timer failed it", func() (bool, string) {
		status := f.Must(200, "GET", "/api/v1/occurrences/"+occ, f.Operator, nil).JSON(t)["status"]
		return status == "failed", fmt.Sprint(status)
	})
	if r := f.call("POST", "/external-task/"+occ+"/unlock", nil); r.Status != 404 {
		t.Errorf("unlock once the timer failed it: %d %s, want 404", r.Status, r.Body)
	}
}

// The facade's fetches are counted as the pull protocol's are: an operator
// whose Camunda clients stopped fetching, or fetch nothing, sees it.
func TestFetchesAreCounted(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	metric := func(name string, labels ...string) float64 {
		t.Helper()
		got, ok := f.Metrics().Get(name, labels...)
		if !ok {
			t.Fatalf("%s%v missing from /metrics", name, labels)
		}
		return got
	}
	for _, result := range []string{"claimed", "empty", "too_many_waiters"} {
		if got := metric("relais_camunda_fetches_total", "result", result); got != 0 {
			t.Errorf("relais_camunda_fetches_total{result=%q} = %v before any fetch, want 0", result, got)
		}
	}
	if tasks := f.fetch("worker-1", 5); len(tasks) != 0 {
		t.Fatalf("fetched %v from an empty queue", tasks)
	}
	f.start("Acme")
	f.start("Globex")
	if tasks := f.fetch("worker-1", 5); len(tasks) != 2 {
		t.Fatalf("fetched %d tasks, want 2", len(tasks))
	}
	if got := metric("relais_camunda_fetches_total", "result", "empty"); got != 1 {
		t.Errorf("empty fetches = %v, want 1", got)
	}
	if got := metric("relais_camunda_fetches_total", "result", "claimed"); got != 1 {
		t.Errorf("claiming fetches = %v, want 1", got)
	}
	if got := metric("relais_camunda_claimed_total"); got != 2 {
		t.Errorf("relais_camunda_claimed_total = %v, want 2", got)
	}
	// The pull protocol's own counters are its own.
	if got := metric("relais_pull_claimed_total"); got != 0 {
		t.Errorf("relais_pull_claimed_total = %v after the facade's fetches, want 0", got)
	}
}

// TestAnotherConsumersTasksStayItsOwn: a consumer sharing a definition with
// another lists and reads the tasks anyone may fetch, and its own, but not
// another consumer's live lock (its worker, its business key, its last
// error) nor its deferral; a lock that lapsed is anyone's task again,
// without the other consumer's worker named.
func TestAnotherConsumersTasksStayItsOwn(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	res := f.Must(201, "POST", "/api/v1/consumers", f.Admin, map[string]any{"name": "audit-team",
		"grants": []any{map[string]any{"definition": typedKey, "revisions": []int{1}}}})
	other := res.JSON(t)["token"].(string)
	_, locked := f.start("Locked")
	f.fetch("team-a-worker", 1)
	_, deferred := f.start("Deferred")
	f.fetch("team-a-worker", 1)
	f.Must(200, "POST", "/api/v1/pull/occurrences/"+deferred+"/defer", f.token, map[string]any{"worker_id": "team-a-worker", "reason": "waits for a signature"})
	_, open := f.start("Open")

	seen := func(token string) []string {
		t.Helper()
		res := f.Do("GET", "/engine-rest/external-task", token, nil)
		mustJSON(t, res, 200)
		var tasks []map[string]any
		if err := json.Unmarshal(res.Body, &tasks); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, task := range tasks {
			ids = append(ids, task["id"].(string))
			if task["id"] != open && task["workerId"] != nil && token == other {
				t.Errorf("another consumer's worker named: %v", task)
			}
		}
		count := f.Do("GET", "/engine-rest/external-task/count", token, nil).JSON(t)["count"]
		if count != float64(len(ids)) {
			t.Errorf("count %v, list %d", count, len(ids))
		}
		return ids
	}
	if got, want := strings.Join(seen(f.token), ","), locked+","+deferred+","+open; got != want {
		t.Errorf("the holder lists %s, want %s", got, want)
	}
	if got := strings.Join(seen(other), ","); got != open {
		t.Errorf("another consumer lists %s, want only the open task %s", got, open)
	}
	for _, id := range []string{locked, deferred} {
		mustException(t, f.Do("GET", "/engine-rest/external-task/"+id, other, nil), 404, "RestException")
		mustJSON(t, f.call("GET", "/external-task/"+id, nil), 200)
	}
	mustJSON(t, f.Do("GET", "/engine-rest/external-task/"+open, other, nil), 200)

	f.Clock.Advance(2 * time.Minute) // the lock lapses
	task := f.Do("GET", "/engine-rest/external-task/"+locked, other, nil)
	mustJSON(t, task, 200)
	if w := task.JSON(t)["workerId"]; w != nil {
		t.Errorf("a lapsed lock's task names the other consumer's worker %v", w)
	}
	if got := strings.Join(seen(other), ","); got != locked+","+open {
		t.Errorf("after the lock lapsed another consumer lists %s, want %s", got, locked+","+open)
	}
	// Nor is it matched: a filter by the other consumer's worker would
	// confirm a guessed worker id.
	for _, path := range []string{"/engine-rest/external-task?workerId=team-a-worker", "/engine-rest/external-task/count?workerId=team-a-worker"} {
		if body := strings.TrimSpace(string(f.Do("GET", path, other, nil).Body)); body != "[]" && !strings.Contains(body, `"count":0`) {
			t.Errorf("GET %s by another consumer: %s, want nothing", path, body)
		}
	}
	if body := string(f.call("GET", "/external-task/count?workerId=team-a-worker", nil).Body); !strings.Contains(body, `"count":2`) {
		t.Errorf("the holder's count by its worker: %s, want 2", body)
	}
}

// Camunda's REST layer reads an Integer, Long, Short, Double or Boolean
// variable, and a request's integer members, from a string holding one
// (Jackson's coercion): a client that writes every value as a string
// completes, fails and fetches as it does against Camunda. A string that
// holds no such value is refused at its pointer.
func TestScalarsGivenAsStrings(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]any{"max_attempts": 5})
	_, occ := f.start("Acme")
	// Integral decimals and booleans in strings too, as Jackson reads
	// them (Camunda QA: 1.0 and "true" refused the whole fetch).
	res := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": "1", "asyncResponseTimeout": " 0 ",
		"usePriority": "true", "topics": []any{map[string]any{"topicName": typedKey, "lockDuration": json.Number("60000.0"), "localVariables": "FALSE"}}})
	mustJSON(t, res, 200)
	if !strings.Contains(string(res.Body), occ) {
		t.Fatalf("fetch with string numbers got %s, want task %s", res.Body, occ)
	}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "w", "newDuration": "30000"}))
	for _, c := range []struct {
		name string
		v    map[string]any
		want string
	}{
		{"score", map[string]any{"type": "Integer", "value": "abc"}, "/variables/score/value an Integer given as a string must hold a whole number, not \"abc\""},
		{"score", map[string]any{"type": "Integer", "value": "1.5"}, "/variables/score/value an Integer given as a string must hold a whole number"},
		{"score", map[string]any{"type": "Short", "value": "40000"}, "/variables/score/value a Short must be a whole number between -32768 and 32767"},
		{"rate", map[string]any{"type": "Double", "value": "NaN"}, "/variables/rate/value a Double given as a string must hold a number"},
		{"ok", map[string]any{"type": "Boolean", "value": "yes"}, "/variables/ok/value a Boolean given as a string must hold true or false"},
	} {
		body := map[string]any{"workerId": "w", "variables": map[string]any{"result": map[string]any{"value": "created"}, "crm_id": map[string]any{"value": "C-1"}, c.name: c.v}}
		mustException(t, f.call("POST", "/external-task/"+occ+"/complete", body), 400, "InvalidRequestException", c.want)
	}
	mustException(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "retries": "two"}), 400, "InvalidRequestException",
		`/retries must be a whole number (or a string holding one, as "two" does not)`)
	mustException(t, f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "w", "newDuration": 1.5}), 400, "InvalidRequestException",
		"/newDuration must be a whole number, not 1.5")
	mustException(t, f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1, "usePriority": "yes",
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 60000}}}), 400, "InvalidRequestException",
		`/usePriority must be a boolean (or a string holding one, as "yes" does not)`)
	mustException(t, f.call("POST", "/external-task/"+occ+"/extendLock", map[string]any{"workerId": "w", "newDuration": json.Number("99999999999999999999")}), 400, "InvalidRequestException",
		"/newDuration is out of range")
	// A retryable failure with its numbers as strings, then the next run
	// completes with every scalar as a string.
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/failure", map[string]any{"workerId": "w", "errorMessage": "down", "retries": "2", "retryTimeout": "0"}))
	if tasks := f.fetch("w", 1); len(tasks) != 1 || tasks[0]["id"] != occ || tasks[0]["retries"] != float64(2) {
		t.Fatalf("after a failure with retries \"2\" the fetch got %v, want task %s with retries 2", tasks, occ)
	}
	good := map[string]any{"workerId": "w", "variables": map[string]any{
		"result": map[string]any{"type": "String", "value": "created"}, "crm_id": map[string]any{"value": "C-7"},
		"score": map[string]any{"type": "Long", "value": " 5000000000 "}, "rate": map[string]any{"type": "Double", "value": "1.5e2"},
		"ok": map[string]any{"type": "boolean", "value": "TRUE"}, "items": map[string]any{"type": "Json", "value": "[1,2]"},
		"at": map[string]any{"type": "Integer", "value": ""}, "due": map[string]any{"type": "String", "value": "2026-12-24"}}}
	// A text field takes a string whatever its type name: an Integer
	// "C-7" or "42" is the text as sent (verifier QA: it was refused).
	good["variables"].(map[string]any)["crm_id"] = map[string]any{"type": "Integer", "value": "42"}
	mustNoContent(t, f.call("POST", "/external-task/"+occ+"/complete", good))
	out := f.occurrence(occ)["outputs"].(map[string]any)
	if out["crm_id"] != "42" {
		t.Errorf("crm_id %v, want the text \"42\" an Integer-typed string gave a text field", out["crm_id"])
	}
	if out["score"] != float64(5000000000) || out["rate"] != float64(150) || out["ok"] != true {
		t.Fatalf("outputs %v, want score 5000000000, rate 150, ok true (the strings' values)", out)
	}
	if _, set := out["at"]; set {
		t.Fatalf("outputs %v: an empty string is Camunda's null and leaves at unset", out)
	}
}

// A fetch that asks for an output by name is told it is one.
func TestFetchVariablesNamingAnOutput(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	res := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []any{map[string]any{"topicName": typedKey, "lockDuration": 60000, "variables": []any{"name", "crm_id"}}}})
	mustException(t, res, 400, "InvalidRequestException", "/topics/0/variables/1", `"crm_id" is an output, not an input`)
}

// Camunda routes the facade does not serve say what to do instead: setting
// retries, Camunda's way to resolve an incident, is an operator's retry
// (Camunda QA: a generic 404, and PUT /external-task/retries a 405 whose
// Allow offered a GET).
func TestUnservedRoutesSayWhatToDoInstead(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	id := "0190a5f0-0000-7000-8000-000000000000"
	for _, c := range []struct{ method, path, want string }{
		{"PUT", "/external-task/" + id + "/retries", "/api/v1/instances/{instance id}/retry"},
		{"PUT", "/external-task/retries", "/api/v1/instances/{instance id}/retry"},
		{"POST", "/external-task/retries-async", "/api/v1/instances/{instance id}/retry"},
		{"PUT", "/external-task/" + id + "/priority", "policy.priority"},
		{"POST", "/external-task/" + id + "/lock", "fetchAndLock"},
		{"GET", "/external-task/" + id + "/errorDetails", "error_message"},
	} {
		res := f.call(c.method, c.path, map[string]any{"retries": 3})
		mustException(t, res, 404, "NotFoundException", "not served by the facade", c.want)
		if res.Header.Get("Allow") != "" {
			t.Errorf("%s %s: Allow %q, want none", c.method, c.path, res.Header.Get("Allow"))
		}
	}
}
