package relaistest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Root is the repository's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ExampleDocs reads every YAML document of an examples file (relative to
// examples/) as maps.
func ExampleDocs(t testing.TB, rel string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(Root(), "examples", rel))
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	for _, part := range strings.Split(string(raw), "\n---\n") {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(part), &doc); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	return docs
}

// Body returns a document without its apply envelope (kind and the
// identifying key or name).
func Body(doc map[string]any, drop ...string) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		out[k] = v
	}
	delete(out, "kind")
	for _, d := range drop {
		delete(out, d)
	}
	return out
}

// Definition saves an example definition's Working and snapshots it; it
// returns the key.
func (e *Env) Definition(file string) string {
	e.T.Helper()
	doc := ExampleDocs(e.T, "definitions/"+file)[0]
	key := doc["key"].(string)
	e.Must(201, "PUT", "/api/v1/definitions/"+key+"/working", e.Designer, Body(doc, "key"))
	e.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", e.Designer, nil)
	return key
}

// AddInput adds an optional text input named field to key's Working and
// snapshots it; it returns the new revision's number.
func (e *Env) AddInput(key, field string) int {
	e.T.Helper()
	working := e.Must(200, "GET", "/api/v1/definitions/"+key, e.Designer, nil).JSON(e.T)["working"].(map[string]any)
	inputs := working["inputs"].(map[string]any)
	inputs["fields"] = append(inputs["fields"].([]any), map[string]any{"name": field, "type": "text"})
	e.Must(200, "PUT", "/api/v1/definitions/"+key+"/working", e.Designer, working)
	return int(e.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", e.Designer, nil).JSON(e.T)["revision"].(float64))
}

// Consumer creates a consumer granted every revision of the keys and
// returns its token.
func (e *Env) Consumer(name string, keys ...string) string {
	e.T.Helper()
	grants := []map[string]any{}
	for _, k := range keys {
		grants = append(grants, map[string]any{"definition": k, "revisions": "all"})
	}
	res := e.Must(201, "POST", "/api/v1/consumers", e.Admin, map[string]any{"name": name, "grants": grants})
	return res.JSON(e.T)["token"].(string)
}

// CRMOnly sets env up with the add_company_to_crm definition, crm_only
// (CRMProcess without a policy) and a consumer crm-sync granted the
// definition, whose token it returns.
func (e *Env) CRMOnly() string {
	e.T.Helper()
	e.Definition("add_company_to_crm.yaml")
	e.Process("crm_only", CRMProcess(nil))
	return e.Consumer("crm-sync", "add_company_to_crm")
}

// HeldCRMInstance sets env up with crm_hold, CRMProcess whose node holds
// on the error code CRM_LOCKED (and fails on any other), and a consumer
// crm-sync; it starts an instance for name, fails its occurrence with
// CRM_LOCKED, not retryable, and returns the held instance's id. Call it
// once per Env.
func (e *Env) HeldCRMInstance(name string) string {
	e.T.Helper()
	e.Definition("add_company_to_crm.yaml")
	doc := CRMProcess(nil)
	doc["nodes"].(map[string]any)["crm"].(map[string]any)["on_error"] = map[string]any{"CRM_LOCKED": "hold", "*": "failed"}
	e.Process("crm_hold", doc)
	consumer := e.Consumer("crm-sync", "add_company_to_crm")
	id := e.Must(201, "POST", "/api/v1/processes/crm_hold/instances", e.Operator, map[string]any{
		"inputs": map[string]any{"name": name}}).JSON(e.T)["id"].(string)
	occ := e.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(e.T)["occurrences"].([]any)[0].(map[string]any)
	e.Must(200, "POST", "/api/v1/pull/occurrences/"+occ["id"].(string)+"/fail", consumer, map[string]any{"worker_id": "w",
		"error_code": "CRM_LOCKED", "message": "locked", "retryable": false})
	return id
}

// ConsumerID returns the id of the consumer named name.
func (e *Env) ConsumerID(name string) int64 {
	e.T.Helper()
	for _, c := range e.Must(200, "GET", "/api/v1/consumers?limit=500", e.Admin, nil).JSON(e.T)["items"].([]any) {
		if c := c.(map[string]any); c["name"] == name {
			return int64(c["id"].(float64))
		}
	}
	e.T.Fatalf("no consumer named %q", name)
	return 0
}

// Process publishes a process version document and returns its version.
func (e *Env) Process(key string, doc any) int {
	e.T.Helper()
	res := e.Do("POST", "/api/v1/processes/"+key+"/versions", e.Designer, doc)
	if res.Status != 201 && res.Status != 200 {
		e.T.Fatalf("publish %s: %d %s", key, res.Status, res.Body)
	}
	return int(res.JSON(e.T)["version"].(float64))
}

// CRMProcess is a pull-only process on add_company_to_crm revision 1 with
// the given policy, routing created and existing to two end nodes.
func CRMProcess(policy map[string]any) map[string]any {
	node := map[string]any{
		"kind": "pull", "definition": "add_company_to_crm", "revision": 1,
		"inputs": map[string]any{
			"company_name": map[string]any{"from": "input.name"},
			"country":      map[string]any{"value": "FR"},
			"source":       map[string]any{"value": "web"},
		},
		"routes":   map[string]any{"created": "done", "existing": "known"},
		"on_error": "failed",
	}
	if policy != nil {
		node["policy"] = policy
	}
	return map[string]any{
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "name", "type": "text", "required": true}}},
		"start":  "crm",
		"nodes": map[string]any{
			"crm":    node,
			"done":   map[string]any{"kind": "end"},
			"known":  map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	}
}
