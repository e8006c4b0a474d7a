package camunda_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// typedKey is a definition whose contracts hold every field type.
const typedKey = "crm.typed"

// typedWorking has one input and one output of each contract type, a
// secret input, and a routing output.
func typedWorking() map[string]any {
	field := func(name, typ string, extra ...any) map[string]any {
		f := map[string]any{"name": name, "type": typ}
		for i := 0; i+1 < len(extra); i += 2 {
			f[extra[i].(string)] = extra[i+1]
		}
		return f
	}
	return map[string]any{
		"name": "Typed CRM sync",
		"inputs": map[string]any{"fields": []any{
			field("name", "text", "required", true),
			field("count", "integer"),
			field("big", "integer"),
			field("ratio", "number"),
			field("vip", "boolean"),
			field("since", "date"),
			field("seen_at", "datetime"),
			field("tier", "choice", "values", []any{"gold", "silver"}),
			field("address", "object", "fields", []any{field("city", "text"), field("zip", "text")}),
			field("tags", "list", "items", map[string]any{"type": "text"}),
			field("card", "text", "classification", "secret"),
		}},
		"outputs": map[string]any{"fields": []any{
			field("result", "choice", "required", true, "values", []any{"created", "existing"}),
			field("crm_id", "text", "required", true),
			field("score", "integer"),
			field("rate", "number"),
			field("ok", "boolean"),
			field("due", "date"),
			field("at", "datetime"),
			field("meta", "object", "fields", []any{field("note", "text")}),
			field("items", "list", "items", map[string]any{"type": "integer"}),
		}},
		"routing_output": "result",
	}
}

// typedProcess runs one pull node on crm.typed@1 whose inputs come from the
// instance, routing by result, and by error code on failure.
func typedProcess(policy map[string]any) map[string]any {
	from := func(path string) map[string]any { return map[string]any{"from": "input." + path} }
	inputs := map[string]any{}
	for _, n := range []string{"name", "count", "big", "ratio", "vip", "since", "seen_at", "tier", "address", "tags", "card"} {
		inputs[n] = from(n)
	}
	w := typedWorking()
	pin := map[string]any{"fields": w["inputs"].(map[string]any)["fields"]}
	node := map[string]any{"kind": "pull", "definition": typedKey, "revision": 1, "inputs": inputs,
		"routes":   map[string]any{"created": "done", "existing": "known"},
		"on_error": map[string]any{"CRM_DOWN": "down", "*": "failed"}}
	if policy != nil {
		node["policy"] = policy
	}
	return map[string]any{
		"inputs": pin,
		"start":  "task",
		"nodes": map[string]any{
			"task":   node,
			"done":   map[string]any{"kind": "end"},
			"known":  map[string]any{"kind": "end"},
			"down":   map[string]any{"kind": "end", "status": "failed"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	}
}

// typedInputs is a full set of instance inputs for typedProcess.
func typedInputs(name string) map[string]any {
	return map[string]any{
		"name": name, "count": 42, "big": 5000000000, "ratio": 0.75, "vip": true,
		"since": "2026-12-01", "seen_at": "2026-12-01T15:04:05.123+02:00", "tier": "gold",
		"address": map[string]any{"city": "Lyon", "zip": "69001"}, "tags": []any{"a", "b"},
		"card": "4111111111111111",
	}
}

// facade is a running Relais with the typed definition and process, and a
// consumer granted crm.*.
type facade struct {
	*relaistest.Env
	t        *testing.T
	consumer string // name
	token    string
}

func setup(t *testing.T, policy map[string]any, opts ...relaistest.Option) *facade {
	t.Helper()
	env := relaistest.New(t, opts...)
	env.Must(201, "PUT", "/api/v1/definitions/"+typedKey+"/working", env.Designer, typedWorking())
	env.Must(201, "POST", "/api/v1/definitions/"+typedKey+"/revisions", env.Designer, nil)
	env.Process("typed", typedProcess(policy))
	res := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm-team",
		"grants": []any{map[string]any{"definition": "crm.*"}}})
	return &facade{Env: env, t: t, consumer: "crm-team", token: res.JSON(t)["token"].(string)}
}

// start starts an instance of typed and returns its id and its occurrence's.
func (f *facade) start(name string) (instance, occurrence string) {
	f.t.Helper()
	inst := f.Must(201, "POST", "/api/v1/processes/typed/instances", f.Operator, map[string]any{"inputs": typedInputs(name)}).JSON(f.t)
	return inst["id"].(string), inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
}

// call calls the facade with the consumer's token as Bearer.
func (f *facade) call(method, path string, body any) relaistest.Response {
	f.t.Helper()
	return f.Do(method, "/engine-rest"+path, f.token, body)
}

// basic calls the facade with HTTP Basic credentials.
func (f *facade) basic(name, token, method, path string, body any) relaistest.Response {
	f.t.Helper()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"+token))
	return f.Do(method, "/engine-rest"+path, "", body, "Authorization", auth)
}

// fetch fetches and locks for worker, failing the test unless 200.
func (f *facade) fetch(worker string, maxTasks int, topics ...map[string]any) []map[string]any {
	f.t.Helper()
	if len(topics) == 0 {
		topics = []map[string]any{{"topicName": typedKey, "lockDuration": 60000}}
	}
	res := f.call("POST", "/external-task/fetchAndLock", map[string]any{"workerId": worker, "maxTasks": maxTasks, "topics": topics})
	mustJSON(f.t, res, 200)
	var tasks []map[string]any
	if err := json.Unmarshal(res.Body, &tasks); err != nil {
		f.t.Fatalf("fetchAndLock body %s: %v", res.Body, err)
	}
	return tasks
}

// occurrence reads an occurrence as operator.
func (f *facade) occurrence(id string) map[string]any {
	f.t.Helper()
	return f.Must(200, "GET", "/api/v1/occurrences/"+id, f.Operator, nil).JSON(f.t)
}

// mustJSON fails unless res has the status and Content-Type:
// application/json exactly (the official JavaScript client parses nothing
// else).
func mustJSON(t *testing.T, res relaistest.Response, status int) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status %d, want %d; body %s", res.Status, status, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json exactly", ct)
	}
}

// mustException fails unless res is a Camunda error body with the status
// and type, whose message holds every fragment.
func mustException(t *testing.T, res relaistest.Response, status int, typ string, fragments ...string) {
	t.Helper()
	mustJSON(t, res, status)
	var e struct {
		Type    string
		Message string
		Code    *int
	}
	if err := json.Unmarshal(res.Body, &e); err != nil {
		t.Fatalf("body %s: %v", res.Body, err)
	}
	if e.Type != typ || e.Code == nil {
		t.Fatalf("exception %s, want type %s and a code", res.Body, typ)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Message, f) {
			t.Errorf("message %q lacks %q", e.Message, f)
		}
	}
}

// mustNoContent fails unless res is 204 without a body.
func mustNoContent(t *testing.T, res relaistest.Response) {
	t.Helper()
	if res.Status != 204 || len(res.Body) != 0 {
		t.Fatalf("status %d body %q, want 204 without a body", res.Status, res.Body)
	}
}

// camundaTime reads a Camunda date (yyyy-MM-dd'T'HH:mm:ss.SSSZ).
func camundaTime(t *testing.T, what string, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	at, err := time.Parse("2006-01-02T15:04:05.000-0700", s)
	if err != nil {
		t.Fatalf("%s = %v, want yyyy-MM-dd'T'HH:mm:ss.SSSZ: %v", what, v, err)
	}
	return at
}

// waitForWaiters waits until the replica holds n long-polling fetches (its
// relais_pull_waiters gauge).
func (f *facade) waitForWaiters(n int) {
	f.t.Helper()
	want := fmt.Sprintf("relais_pull_waiters %d\n", n)
	relaistest.WaitFor(f.t, 10*time.Second, "the long poll waits", func() (bool, string) {
		res := f.Do("GET", "/metrics", "", nil)
		return strings.Contains(string(res.Body), want), "no " + strings.TrimSpace(want)
	})
}

// refusedReports is what the first attempt of occurrence notes of the
// reports Relais refused (nil when none).
func (f *facade) refusedReports(occurrence string) map[string]any {
	f.t.Helper()
	obs := f.Must(200, "GET", "/api/v1/occurrences/"+occurrence, f.Operator, nil).JSON(f.t)
	refused, _ := obs["attempts"].([]any)[0].(map[string]any)["refused_reports"].(map[string]any)
	return refused
}
