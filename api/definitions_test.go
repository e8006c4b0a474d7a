package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"gopkg.in/yaml.v3"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// exampleWorking reads an example definition file and returns its key and
// Working document (the file minus kind and key).
func exampleWorking(t *testing.T, file string) (string, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile("../examples/definitions/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	key := doc["key"].(string)
	delete(doc, "kind")
	delete(doc, "key")
	return key, doc
}

func TestDefinitionLifecycleAsANewUser(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key, working := exampleWorking(t, "add_company_to_crm.yaml")
	base := "/api/v1/definitions/" + key

	env.Must(201, "PUT", base+"/working", env.Designer, working)
	env.Must(200, "PUT", base+"/working", env.Designer, working)
	// A definition's page lists its revisions and releases, [] before any.
	if d := env.Must(200, "GET", base, env.Designer, nil).JSON(t); fmt.Sprint(d["revisions"], d["releases"]) != "[] []" {
		t.Errorf("a new definition: revisions %v, releases %v; want [] and []", d["revisions"], d["releases"])
	}
	r1 := env.Must(201, "POST", base+"/revisions", env.Designer, nil).JSON(t)
	if r1["revision"] != 1.0 || !strings.HasPrefix(r1["digest"].(string), "sha256:") {
		t.Fatalf("first snapshot = %v", r1)
	}
	again := env.Must(200, "POST", base+"/revisions", env.Designer, nil).JSON(t)
	if again["revision"] != 1.0 || again["digest"] != r1["digest"] {
		t.Fatalf("snapshot of an unchanged Working = %v; want revision 1 again", again)
	}
	before := env.Must(200, "GET", base+"/revisions/1", env.Operator, nil).Body

	// Change the Working: tighten an input, add a required input, add a
	// route value, drop an output.
	inputs := working["inputs"].(map[string]any)["fields"].([]any)
	inputs[0].(map[string]any)["max_length"] = 100
	working["inputs"].(map[string]any)["fields"] = append(inputs, map[string]any{"name": "segment", "type": "text", "required": true})
	// And lower the contact's protection: said as such in the diff.
	for _, f := range inputs {
		if f.(map[string]any)["name"] == "contact" {
			delete(f.(map[string]any), "classification")
		}
	}
	outputs := working["outputs"].(map[string]any)["fields"].([]any)
	outputs[0].(map[string]any)["values"] = []any{"created", "existing", "rejected"}
	working["outputs"].(map[string]any)["fields"] = outputs[:2]
	env.Must(200, "PUT", base+"/working", env.Designer, working)
	r2 := env.Must(201, "POST", base+"/revisions", env.Designer, nil).JSON(t)
	if r2["revision"] != 2.0 {
		t.Fatalf("second snapshot = %v", r2)
	}
	after := env.Must(200, "GET", base+"/revisions/1", env.Operator, nil).Body
	if !bytes.Equal(before, after) {
		t.Fatalf("revision 1 changed after editing the Working:\nbefore %s\nafter  %s", before, after)
	}

	diff := env.Must(200, "GET", base+"/revisions/1/diff/2", env.Operator, nil).JSON(t)
	type change struct {
		Kind            string
		Path            string
		BreaksProcesses bool `json:"breaks_processes"`
		BreaksWorkers   bool `json:"breaks_workers"`
		Lowers          bool `json:"lowers_protection"`
	}
	var changes []change
	b, _ := json.Marshal(diff["changes"])
	_ = json.Unmarshal(b, &changes)
	got := map[string]change{}
	for _, c := range changes {
		got[c.Kind+" "+c.Path] = c
	}
	want := []change{
		{"constraint_changed", "/inputs/company_name", true, false, false},
		{"added", "/inputs/segment", true, false, false},
		{"classification_changed", "/inputs/contact", true, false, true},
		// Its fields were sensitive through it.
		{"classification_changed", "/inputs/contact/email", true, false, true},
		{"classification_changed", "/inputs/contact/phone", true, false, true},
		{"choices_changed", "/outputs/result", true, false, false},
		{"removed", "/outputs/matched_on", true, true, false},
	}
	for _, w := range want {
		g, ok := got[w.Kind+" "+w.Path]
		if !ok {
			t.Errorf("diff lacks %s %s; got %v", w.Kind, w.Path, changes)
			continue
		}
		if g.BreaksProcesses != w.BreaksProcesses || g.BreaksWorkers != w.BreaksWorkers || g.Lowers != w.Lowers {
			t.Errorf("%s %s: breaks processes/workers, lowers protection = %v/%v, %v, want %v/%v, %v", w.Kind, w.Path, g.BreaksProcesses, g.BreaksWorkers, g.Lowers, w.BreaksProcesses, w.BreaksWorkers, w.Lowers)
		}
	}
	if len(changes) != len(want) {
		t.Errorf("diff has %d changes, want %d: %v", len(changes), len(want), changes)
	}

	detail := env.Must(200, "GET", base, env.Operator, nil).JSON(t)
	if detail["latest_revision"] != 2.0 || len(detail["revisions"].([]any)) != 2 || detail["unsnapshotted"] != false {
		t.Errorf("definition detail = %v", detail)
	}
	// A new description changes no contract, so no change is listed, but a
	// snapshot would still make a revision: the detail says so.
	working["description"] = "Reworded."
	env.Must(200, "PUT", base+"/working", env.Designer, working)
	if d := env.Must(200, "GET", base, env.Operator, nil).JSON(t); d["unsnapshotted"] != true || d["unsnapshotted_changes"] != nil {
		t.Errorf("after a new description: unsnapshotted %v, changes %v; want true and none", d["unsnapshotted"], d["unsnapshotted_changes"])
	}
	// The save's own answer, a dry run's too, lists what a snapshot would
	// change, as GET does (designer QA: only apply said it).
	fields := working["inputs"].(map[string]any)["fields"].([]any)
	working["inputs"].(map[string]any)["fields"] = fields[:len(fields)-1]
	removed := "/inputs/" + fields[len(fields)-1].(map[string]any)["name"].(string)
	for _, path := range []string{base + "/working?dry_run=true", base + "/working"} {
		saved := env.Must(200, "PUT", path, env.Designer, working).JSON(t)
		changes, _ := saved["unsnapshotted_changes"].([]any)
		if len(changes) != 1 || changes[0].(map[string]any)["path"] != removed {
			t.Errorf("PUT %s: unsnapshotted_changes %v, want the removal of %s", path, saved["unsnapshotted_changes"], removed)
		}
	}
	list := env.Must(200, "GET", "/api/v1/definitions", env.Operator, nil).JSON(t)
	if items := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["latest_revision"] != 2.0 {
		t.Errorf("definition list = %v", list)
	}
}

func TestServedSchemaAgreesWithServer(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key, working := exampleWorking(t, "add_company_to_crm.yaml")
	base := "/api/v1/definitions/" + key
	env.Must(201, "PUT", base+"/working", env.Designer, working)
	env.Must(201, "POST", base+"/revisions", env.Designer, nil)

	res := env.Must(200, "GET", base+"/revisions/1/schemas/inputs", env.Operator, nil)
	if ct := res.Header.Get("Content-Type"); ct != "application/schema+json" {
		t.Errorf("content type %q", ct)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	if err := c.AddResource("inputs.json", bytes.NewReader(res.Body)); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("inputs.json")
	if err != nil {
		t.Fatalf("served schema does not compile: %v", err)
	}
	rev, err := env.Engine.GetRevision(t.Context(), key, 1)
	if err != nil {
		t.Fatal(err)
	}
	inputs, _, err := env.Engine.Validators(rev)
	if err != nil {
		t.Fatal(err)
	}
	payloads := []string{
		`{"company_name":"Acme","country":"FR","source":"web"}`,
		`{"company_name":"Acme","country":"FR","source":"web","contact":{"email":"a@acme.fr"}}`,
		`{"company_name":"Acme","country":"FR","source":"web","contact":{"email":"not an email"}}`,
		`{"company_name":"Acme","country":"France","source":"web"}`,
		`{"company_name":"Acme","country":"FR","source":"fax"}`,
		`{"company_name":"Acme","country":"FR"}`,
		`{"company_name":"Acme","country":"FR","source":"web","extra":1}`,
		`{"company_name":"` + strings.Repeat("a", 201) + `","country":"FR","source":"web"}`,
		`{"company_name":42,"country":"FR","source":"web"}`,
		`{"company_name":"Acme","country":"FR","source":"web","contact":{"email":"a@acme.fr","fax":"1"}}`,
	}
	for _, p := range payloads {
		var v any
		dec := json.NewDecoder(strings.NewReader(p))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		servedOK := schema.Validate(v) == nil
		serverOK := len(inputs.Validate(json.RawMessage(p))) == 0
		if servedOK != serverOK {
			t.Errorf("payload %.80s: served schema accepts=%v, server accepts=%v", p, servedOK, serverOK)
		}
	}
}

func TestInvalidWorkingIsRefusedWithEveryPointer(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	bad := map[string]any{
		"name": "Broken",
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "a", "type": "texte"},
			map[string]any{"name": "b", "type": "text", "min_length": 5, "max_length": 3},
			map[string]any{"name": "b", "type": "integer", "pattern": "x"},
		}},
		"outputs":        map[string]any{"fields": []any{map[string]any{"name": "r", "type": "text", "required": true}}},
		"routing_output": "r",
	}
	res := env.Do("PUT", "/api/v1/definitions/broken_one/working", env.Designer, bad)
	if res.Status != 422 || res.Code() != "invalid_contract" {
		t.Fatalf("got %d %s; want 422 invalid_contract", res.Status, res.Body)
	}
	var p struct{ Errors []struct{ Path string } }
	_ = json.Unmarshal(res.Body, &p)
	var paths []string
	for _, e := range p.Errors {
		paths = append(paths, e.Path)
	}
	sort.Strings(paths)
	for _, want := range []string{"/inputs/fields/0/type", "/inputs/fields/1/min_length", "/inputs/fields/2/name", "/inputs/fields/2/pattern", "/routing_output"} {
		found := false
		for _, p := range paths {
			found = found || p == want
		}
		if !found {
			t.Errorf("errors lack pointer %s; got %v", want, paths)
		}
	}
	if r := env.Do("GET", "/api/v1/definitions/broken_one", env.Operator, nil); r.Status != 404 {
		t.Errorf("an invalid Working created the definition: %d", r.Status)
	}
	if r := env.Do("PUT", "/api/v1/definitions/Bad-Key/working", env.Designer, bad); r.Status != 400 || r.Code() != "invalid_key" {
		t.Errorf("bad key: %d %s", r.Status, r.Body)
	}
}

// TestSnapshotIfMatch: a snapshot names the Working it means; one saved
// by someone else in between is refused, not made into the revision.
func TestSnapshotIfMatch(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key, working := exampleWorking(t, "score_company.yaml")
	base := "/api/v1/definitions/" + key
	mine := env.Must(201, "PUT", base+"/working", env.Designer, working).JSON(t)["working_digest"].(string)
	working["description"] = "another designer's"
	theirs := env.Must(200, "PUT", base+"/working", env.Designer, working).JSON(t)["working_digest"].(string)
	for _, tag := range []string{strconv.Quote(mine), mine} {
		r := env.Do("POST", base+"/revisions", env.Designer, nil, "If-Match", tag)
		if r.Status != 412 || r.Code() != "working_changed" || !strings.Contains(string(r.Body), theirs) {
			t.Errorf("If-Match %s against another Working: %d %s; want 412 working_changed naming the digest now", tag, r.Status, r.Body)
		}
	}
	// A weak tag never matches, the current digest's included: said so,
	// not that the Working changed meanwhile (API client QA).
	if r := env.Do("POST", base+"/revisions", env.Designer, nil, "If-Match", "W/"+strconv.Quote(theirs)); r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), "weak tags only") {
		t.Errorf("If-Match with the current digest's weak tag: %d %s; want 400 saying weak tags never match (not working_changed, which a client retries)", r.Status, r.Body)
	}
	if d := env.Must(200, "GET", base, env.Designer, nil).JSON(t); d["latest_revision"] != nil && d["latest_revision"] != 0.0 {
		t.Fatalf("a refused snapshot made revision %v", d["latest_revision"])
	}
	for _, tag := range []string{" , ", `"abc"`} {
		if r := env.Do("POST", base+"/revisions", env.Designer, nil, "If-Match", tag); r.Status != 400 {
			t.Errorf("If-Match %s, no digest: %d %s; want 400, not a change meanwhile", tag, r.Status, r.Body)
		}
	}
	// The tag quoted once, as sent (API client QA: \"abc\").
	if r := env.Do("POST", base+"/revisions", env.Designer, nil, "If-Match", `"abc"`); !strings.Contains(r.JSON(t)["detail"].(string), `If-Match "abc" is not`) {
		t.Errorf("detail %q, want the tag as sent", r.JSON(t)["detail"])
	}
	for i, tag := range []string{strconv.Quote(mine) + ", " + strconv.Quote(theirs), "*"} {
		want := 201
		if i > 0 {
			want = 200 // the same Working again
		}
		if r := env.Do("POST", base+"/revisions", env.Designer, nil, "If-Match", tag); r.Status != want || r.JSON(t)["digest"] != theirs {
			t.Errorf("If-Match %s: %d %s; want %d, revision of %s", tag, r.Status, r.Body, want, theirs)
		}
	}
}

func TestConcurrentSnapshotsGiveOneRevision(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key, working := exampleWorking(t, "score_company.yaml")
	base := "/api/v1/definitions/" + key
	env.Must(201, "PUT", base+"/working", env.Designer, working)
	var wg sync.WaitGroup
	revisions := make([]any, 20)
	for i := range revisions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := env.Do("POST", base+"/revisions", env.Designer, nil)
			if r.Status != 200 && r.Status != 201 {
				t.Errorf("snapshot: %d %s", r.Status, r.Body)
				return
			}
			revisions[i] = r.JSON(t)["revision"]
		}()
	}
	wg.Wait()
	for _, r := range revisions {
		if r != 1.0 {
			t.Fatalf("revisions returned %v; want all 1", revisions)
		}
	}
	var n int
	if err := env.Pool.QueryRow(t.Context(), "select count(*) from revisions where definition_key = $1", key).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d revisions stored (%v); want 1", n, err)
	}
}

func TestReleasesAndImmutability(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key, working := exampleWorking(t, "score_company.yaml")
	base := "/api/v1/definitions/" + key
	env.Must(201, "PUT", base+"/working", env.Designer, working)
	env.Must(201, "POST", base+"/revisions", env.Designer, nil)

	rel := map[string]any{"name": "2026.11", "revision": 1, "notes": "first"}
	first := env.Must(201, "POST", base+"/releases", env.Designer, rel).JSON(t)
	// The same release again (a retry after a lost answer) is that
	// release; the name with anything else is refused.
	if again := env.Must(200, "POST", base+"/releases", env.Designer, rel).JSON(t); again["created_at"] != first["created_at"] || again["notes"] != "first" {
		t.Errorf("the same release again answered %v, want the first %v", again, first)
	}
	other := maps.Clone(rel)
	other["notes"] = "other"
	if r := env.Do("POST", base+"/releases", env.Designer, other); r.Status != 409 || r.Code() != "release_exists" || !strings.Contains(string(r.Body), "the same revision, other notes") {
		t.Errorf("release name again with other notes: %d %s; want 409 release_exists saying the notes differ", r.Status, r.Body)
	}
	if r := env.Do("POST", base+"/releases", env.Designer, map[string]any{"name": "later", "revision": 7}); r.Status != 422 || r.Code() != "unknown_revision" {
		t.Errorf("release of unknown revision: %d %s", r.Status, r.Body)
	}
	list := env.Must(200, "GET", base+"/releases", env.Operator, nil).JSON(t)
	if n := len(list["items"].([]any)); n != 1 {
		t.Errorf("%d releases listed, want 1", n)
	}
	for _, c := range []struct{ method, path, instead string }{
		{"DELETE", base + "/revisions/1", "snapshot a new revision"}, {"PUT", base + "/revisions/1", "edit the definition's working copy"},
		{"PATCH", base + "/revisions/1", "PUT /api/v1/definitions/" + key + "/working"},
		{"DELETE", base + "/releases/2026.11", "under another name"}, {"PUT", base + "/releases/2026.11", "under another name"},
	} {
		// Refused, saying what to do instead.
		if r := env.Do(c.method, c.path, env.Admin, `{}`); r.Status != 405 || r.Code() != "immutable" || !strings.Contains(string(r.Body), c.instead) {
			t.Errorf("%s %s: %d %s; want 405 immutable saying %q", c.method, c.path, r.Status, r.Body, c.instead)
		}
	}
	if _, err := env.Pool.Exec(t.Context(), "update revisions set digest = 'x'"); err == nil {
		t.Error("the database let a revision be updated")
	}
	if _, err := env.Pool.Exec(t.Context(), "delete from releases"); err == nil {
		t.Error("the database let a release be deleted")
	}
}

func TestDefinitionRoles(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key, working := exampleWorking(t, "score_company.yaml")
	base := "/api/v1/definitions/" + key
	for _, tok := range []string{env.Operator} {
		if r := env.Do("PUT", base+"/working", tok, working); r.Status != 403 {
			t.Errorf("operator saving a Working: %d", r.Status)
		}
	}
	env.Must(201, "PUT", base+"/working", env.Admin, working)
	env.Must(200, "GET", base, env.Designer, nil)
	if r := env.Do("GET", base, "", nil); r.Status != 401 {
		t.Errorf("anonymous read: %d", r.Status)
	}
	for i := 0; i < 3; i++ {
		env.Must(201, "PUT", fmt.Sprintf("/api/v1/definitions/def_%d/working", i), env.Designer, working)
	}
	p1 := env.Must(200, "GET", "/api/v1/definitions?limit=2", env.Operator, nil).JSON(t)
	if len(p1["items"].([]any)) != 2 || p1["next_cursor"] == nil {
		t.Fatalf("page 1 = %v", p1)
	}
	p2 := env.Must(200, "GET", "/api/v1/definitions?limit=2&cursor="+p1["next_cursor"].(string), env.Operator, nil).JSON(t)
	if len(p2["items"].([]any)) != 2 || p2["next_cursor"] != nil {
		t.Fatalf("page 2 = %v", p2)
	}
}

func TestConsumersReadOnlyGrantedSchemas(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Definition("score_company.yaml")
	token := env.Consumer("crm-sync", "add_company_to_crm")
	env.Must(200, "GET", "/api/v1/definitions/add_company_to_crm/revisions/1/schemas/outputs", token, nil)
	if r := env.Do("GET", "/api/v1/definitions/score_company/revisions/1/schemas/inputs", token, nil); r.Status != 404 {
		t.Errorf("a consumer read a schema outside its grants: %d", r.Status)
	}
	if r := env.Do("GET", "/api/v1/definitions/add_company_to_crm", token, nil); r.Status != 403 {
		t.Errorf("a consumer read a definition: %d", r.Status)
	}
}

// PUT .../working?dry_run=true runs every check and stores nothing.
func TestWorkingDryRun(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	body := map[string]any{"name": "Dry", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}}
	r := env.Do("PUT", "/api/v1/definitions/dry_key/working?dry_run=true", env.Designer, body)
	if r.Status != 201 || r.Header.Get("Relais-Applied") != "false" || r.JSON(t)["key"] != "dry_key" || r.Header.Get("Location") != "" {
		t.Errorf("dry run of a new definition: %d %s (Relais-Applied %q), want 201 as the save would answer, not applied", r.Status, r.Body, r.Header.Get("Relais-Applied"))
	}
	// Its times are written as every other, to the microsecond (evaluator
	// QA: nine digits).
	for _, field := range []string{"created_at", "updated_at"} {
		v, _ := r.JSON(t)[field].(string)
		if _, frac, _ := strings.Cut(strings.TrimSuffix(v, "Z"), "."); v == "" || len(frac) > 6 {
			t.Errorf("dry run's %s %q, want a time to the microsecond", field, v)
		}
	}
	if r := env.Do("GET", "/api/v1/definitions/dry_key", env.Designer, nil); r.Status != 404 {
		t.Errorf("the dry run stored the definition: %d", r.Status)
	}
	if r := env.Do("PUT", "/api/v1/definitions/Bad-Key/working?dry_run=true", env.Designer, body); r.Status != 400 || r.Code() != "invalid_key" {
		t.Errorf("dry run of a bad key: %d %s, want 400 invalid_key", r.Status, r.Body)
	}
	if r := env.Do("PUT", "/api/v1/definitions/dry_key/working?dry_run=1", env.Designer, body); r.Status != 400 {
		t.Errorf("dry_run=1: %d, want 400 (it would have saved)", r.Status)
	}
	if r := env.Do("GET", "/api/v1/definitions/dry_key", env.Designer, nil); r.Status != 404 {
		t.Errorf("a refused dry_run value stored the definition: %d", r.Status)
	}
}

// A definition's revisions and a process's versions are listed where they
// are made, oldest first, a page at a time (evaluator QA: GET answered 405
// there); an unknown key is 404.
func TestRevisionsAndVersionsAreListed(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key, doc := exampleWorking(t, "add_company_to_crm.yaml")
	env.Must(201, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, doc)
	env.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", env.Designer, nil)
	doc["description"] = "second"
	env.Must(200, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, doc)
	env.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", env.Designer, nil)
	first := relaistest.CRMProcess(nil)
	env.Process("crm_listed", first)
	first["nodes"].(map[string]any)["known"] = map[string]any{"kind": "end", "status": "failed"}
	env.Process("crm_listed", first)

	for _, c := range []struct{ path, member string }{
		{"/api/v1/definitions/" + key + "/revisions", "revision"},
		{"/api/v1/processes/crm_listed/versions", "version"},
	} {
		page := env.Must(200, "GET", c.path+"?limit=1", env.Operator, nil).JSON(t)
		items, next := page["items"].([]any), page["next_cursor"]
		if len(items) != 1 || items[0].(map[string]any)[c.member] != 1.0 || next == nil {
			t.Fatalf("%s first page: %v; want %s 1 and a next cursor", c.path, page, c.member)
		}
		if _, ok := items[0].(map[string]any)["digest"].(string); !ok {
			t.Errorf("%s: an item without its digest: %v", c.path, items[0])
		}
		page = env.Must(200, "GET", c.path+"?limit=1&cursor="+next.(string), env.Designer, nil).JSON(t)
		items = page["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)[c.member] != 2.0 {
			t.Fatalf("%s second page: %v; want %s 2", c.path, page, c.member)
		}
		if page := env.Must(200, "GET", c.path, env.Operator, nil).JSON(t); len(page["items"].([]any)) != 2 || page["next_cursor"] != nil {
			t.Errorf("%s whole: %v; want both, no next cursor", c.path, page)
		}
	}
	env.Must(404, "GET", "/api/v1/definitions/no_such_thing/revisions", env.Operator, nil)
	env.Must(404, "GET", "/api/v1/processes/no_such_thing/versions", env.Operator, nil)
	if r := env.Do("GET", "/api/v1/definitions/"+key+"/revisions", env.Consumer("c", key), nil); r.Status != 403 {
		t.Errorf("a consumer lists revisions: %d, want 403", r.Status)
	}
}
