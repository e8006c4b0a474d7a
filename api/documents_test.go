package api_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// problemPaths checks an error answer's status and code and returns the
// pointers of its errors, sorted.
func problemPaths(t *testing.T, what string, r relaistest.Response, status int, code string) []string {
	t.Helper()
	if r.Status != status || r.Code() != code || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s: %d %s %s; want %d %s problem+json", what, r.Status, r.Header.Get("Content-Type"), r.Body, status, code)
		return nil
	}
	var p struct {
		Errors []struct{ Path, Message string }
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	paths := []string{}
	for _, e := range p.Errors {
		if e.Message == "" {
			t.Errorf("%s: error at %q has no message", what, e.Path)
		}
		paths = append(paths, e.Path)
	}
	sort.Strings(paths)
	return paths
}

// unknownFirst checks that an unknown_field answer lists the unknown keys
// (in any order), then the document's other problems.
func unknownFirst(t *testing.T, what string, r relaistest.Response, unknown, other []string) {
	t.Helper()
	var p struct{ Errors []struct{ Path string } }
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Path)
	}
	if len(got) != len(unknown)+len(other) {
		t.Errorf("%s: pointers %v, want the unknown keys %v, then %v", what, got, unknown, other)
		return
	}
	head, tail := slices.Clone(got[:len(unknown)]), slices.Clone(got[len(unknown):])
	slices.Sort(head)
	slices.Sort(tail)
	if !slices.Equal(head, unknown) || !slices.Equal(tail, other) {
		t.Errorf("%s: pointers %v, want the unknown keys %v, then %v", what, got, unknown, other)
	}
}

// TestDocumentsRefuseUnknownKeysAndMalformedJSONWith400: DESIGN §8 rejects
// unknown JSON fields with 400, and the Working and process documents are
// request bodies like any other: every unknown key, at any depth, is
// listed in a 400 unknown_field, followed by the document's other
// problems (one answer says all that is wrong), malformed JSON is 400
// invalid_json, and only well-formed documents with known keys get the
// 422 with every pointer.
func TestDocumentsRefuseUnknownKeysAndMalformedJSONWith400(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")

	_, working := exampleWorking(t, "score_company.yaml")
	working["colour"] = "red"
	working["inputs"].(map[string]any)["strict"] = true
	working["inputs"].(map[string]any)["fields"].([]any)[0].(map[string]any)["default"] = "x"
	working["inputs"].(map[string]any)["fields"].([]any)[0].(map[string]any)["type"] = "texte" // 422 alone, listed after
	unknown, other := []string{"/colour", "/inputs/fields/0/default", "/inputs/strict"}, []string{"/inputs/fields/0/type"}
	res := env.Do("PUT", "/api/v1/definitions/unknown_keys/working", env.Designer, working)
	problemPaths(t, "Working with unknown keys", res, 400, "unknown_field")
	unknownFirst(t, "Working with unknown keys", res, unknown, other)
	if r := env.Do("GET", "/api/v1/definitions/unknown_keys", env.Operator, nil); r.Status != 404 {
		t.Errorf("a refused Working created the definition: %d", r.Status)
	}
	for _, body := range []string{`{"name": "x",`, ``, `{"name": "x"} {}`, `[1 2]`} {
		res := env.Do("PUT", "/api/v1/definitions/malformed/working", env.Designer, body)
		problemPaths(t, "Working "+body, res, 400, "invalid_json")
	}

	proc := relaistest.CRMProcess(nil)
	proc["version"] = 2
	nodes := proc["nodes"].(map[string]any)
	crm := nodes["crm"].(map[string]any)
	crm["colour"] = "blue"
	crm["policy"] = map[string]any{"backoff": "PT1S", "priority": 42} // priority: 422 alone
	crm["inputs"].(map[string]any)["source"] = map[string]any{"value": "web", "default": "x"}
	proc["inputs"].(map[string]any)["fields"].([]any)[0].(map[string]any)["colour"] = "x"
	nodes["done"].(map[string]any)["next"] = "known" // foreign to end nodes: 422, not unknown
	unknown = []string{"/inputs/fields/0/colour", "/nodes/crm/colour", "/nodes/crm/inputs/source/default", "/nodes/crm/policy/backoff", "/version"}
	other = []string{"/nodes/crm/policy/priority", "/nodes/done/next"}
	for _, path := range []string{"/api/v1/processes/unknown_keys/versions", "/api/v1/processes/unknown_keys/versions?dry_run=true"} {
		res := env.Do("POST", path, env.Designer, proc)
		problemPaths(t, "process with unknown keys", res, 400, "unknown_field")
		unknownFirst(t, "POST "+path+" with unknown keys", res, unknown, other)
		for _, body := range []string{`{"start": "a",`, ``, `{}{}`} {
			problemPaths(t, "process "+body, env.Do("POST", path, env.Designer, body), 400, "invalid_json")
		}
	}

	// Without unknown keys, the other problems are the usual 422.
	delete(proc, "version")
	delete(crm, "colour")
	crm["policy"] = map[string]any{"priority": 42}
	crm["inputs"].(map[string]any)["source"] = map[string]any{"value": "web"}
	delete(proc["inputs"].(map[string]any)["fields"].([]any)[0].(map[string]any), "colour")
	res = env.Do("POST", "/api/v1/processes/unknown_keys/versions", env.Designer, proc)
	if got := problemPaths(t, "invalid process", res, 422, "invalid_process"); !reflect.DeepEqual(got, []string{"/nodes/crm/policy/priority", "/nodes/done/next"}) {
		t.Errorf("invalid process: pointers %v", got)
	}
	if r := env.Do("GET", "/api/v1/processes/unknown_keys", env.Operator, nil); r.Status != 404 {
		t.Errorf("a refused process was stored: %d", r.Status)
	}
}

// TestProcessProblemsInOneAnswer: a process whose only parse problems are
// leaf values (a policy's duration) is checked statically all the same,
// and one 422 lists both kinds; a problem in the graph's own structure
// (a next that is not a name) is reported alone, the graph unjudged.
func TestProcessProblemsInOneAnswer(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	proc := relaistest.CRMProcess(map[string]any{"retry_delay": "10s", "priority": 42})
	crm := proc["nodes"].(map[string]any)["crm"].(map[string]any)
	crm["inputs"].(map[string]any)["company_name"] = map[string]any{"from": "input.nmae"}
	crm["routes"].(map[string]any)["existing"] = "knwon"
	res := env.Do("POST", "/api/v1/processes/one_answer/versions?dry_run=true", env.Designer, proc)
	got := problemPaths(t, "leaf and static problems", res, 422, "invalid_process")
	want := []string{"/nodes/crm/inputs/company_name/from", "/nodes/crm/policy/priority", "/nodes/crm/policy/retry_delay", "/nodes/crm/routes/existing", "/nodes/known"}
	if !slices.Equal(got, want) {
		t.Errorf("pointers %v, want %v (the durations', then the graph's)", got, want)
	}

	// next on an end node, and routes that are not an object: the graph
	// cannot be judged, only the parse problems are said.
	proc = relaistest.CRMProcess(map[string]any{"retry_delay": "10s"})
	proc["nodes"].(map[string]any)["crm"].(map[string]any)["routes"] = "done"
	res = env.Do("POST", "/api/v1/processes/one_answer/versions?dry_run=true", env.Designer, proc)
	if got := problemPaths(t, "structural problem", res, 422, "invalid_process"); !slices.Equal(got, []string{"/nodes/crm/policy/retry_delay", "/nodes/crm/routes"}) {
		t.Errorf("structural problem: pointers %v, want the two parse problems only", got)
	}
}

// A start whose inputs were sent at the top level, without "inputs", is
// told where they go; a misspelt member is told the one it means instead.
func TestStartInputsOutsideInputsAreToldWhereTheyGo(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	res := env.Do("POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"name": "Acme"})
	if res.Status != 400 || res.Code() != "unknown_field" || !strings.Contains(res.JSON(t)["detail"].(string), `the process's inputs go under "inputs"`) {
		t.Errorf("inputs at the top level: %d %s, want 400 unknown_field saying they go under inputs", res.Status, res.Body)
	}
	// The same slips in a batch: a single start's body, an item's inputs.
	res = env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	if res.Status != 400 || !strings.Contains(res.JSON(t)["detail"].(string), `a batch takes {"items"`) {
		t.Errorf("a single start's body to the batch route: %d %s, want it told a batch takes items", res.Status, res.Body)
	}
	res = env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"items": []any{map[string]any{"name": "Acme"}}})
	if res.Status != 400 || !strings.Contains(res.JSON(t)["detail"].(string), `go under each item's "inputs"`) {
		t.Errorf("an item's inputs at its top level: %d %s, want it told they go under the item's inputs", res.Status, res.Body)
	}
	res = env.Do("POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"input": map[string]any{"name": "Acme"}})
	if d := res.JSON(t)["detail"].(string); res.Code() != "unknown_field" || !strings.Contains(d, `did you mean "inputs"`) || strings.Contains(d, "go under") {
		t.Errorf("a misspelt inputs: %d %s, want its suggestion alone", res.Status, res.Body)
	}
}
