package apply_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/apply"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// TestClientReportsServerRefusalsAsFilePointerMessage: whatever status the
// server refuses a document with (400 unknown_field, 422 invalid_process),
// relais apply prints each of its problems as file: pointer: message, and
// a dry run reports a process's own problems instead of calling them
// dependencies planned in the same run. Documents are handed to the client
// directly: Load would catch unknown keys locally first.
func TestClientReportsServerRefusalsAsFilePointerMessage(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	c := &apply.Client{URL: env.URL, Token: env.Admin}

	lines := func(docs []apply.Document, dryRun bool) ([]string, []string) {
		t.Helper()
		var results []string
		problems := []string{}
		for _, p := range c.Apply(context.Background(), docs, dryRun, func(r apply.Result) { results = append(results, r.String()) }) {
			problems = append(problems, p.String())
		}
		return results, problems
	}

	working := relaistest.Body(relaistest.ExampleDocs(t, "definitions/score_company.yaml")[0], "key")
	working["colour"] = "red"
	def := apply.Document{File: "defs/score.yaml", Kind: apply.KindDefinition, ID: "score_company", Body: working}
	if _, got := lines([]apply.Document{def}, false); !reflect.DeepEqual(got, []string{`defs/score.yaml: /colour: unknown key "colour"`}) {
		t.Errorf("definition with an unknown key: problems %q", got)
	}

	withUnknownKey := relaistest.CRMProcess(nil)
	withUnknownKey["nodes"].(map[string]any)["crm"].(map[string]any)["colour"] = "blue"
	withUnknownNode := relaistest.CRMProcess(nil)
	withUnknownNode["nodes"].(map[string]any)["crm"].(map[string]any)["inputs"].(map[string]any)["company_name"] = map[string]any{"from": "nodes.ghost.output.name"}
	for _, dryRun := range []bool{true, false} {
		for _, c := range []struct {
			body map[string]any
			want string
		}{
			{withUnknownKey, `procs/crm.yaml: /nodes/crm/colour: unknown key "colour"`},
			{withUnknownNode, `procs/crm.yaml: /nodes/crm/inputs/company_name/from: source "nodes.ghost.output.name" names unknown node "ghost"`},
		} {
			doc := apply.Document{File: "procs/crm.yaml", Kind: apply.KindProcess, ID: "crm_only", Body: c.body}
			if results, got := lines([]apply.Document{doc}, dryRun); !reflect.DeepEqual(got, []string{c.want}) {
				t.Errorf("dry run %v: problems %q, results %q; want %q", dryRun, got, results, c.want)
			}
		}
	}

	// A revision neither the server nor the run has is the process's own
	// problem, named as the real apply would.
	later := relaistest.CRMProcess(nil)
	later["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = 2
	doc := apply.Document{File: "procs/crm.yaml", Kind: apply.KindProcess, ID: "crm_only", Body: later}
	if results, got := lines([]apply.Document{doc}, true); !reflect.DeepEqual(got, []string{"procs/crm.yaml: /nodes/crm/revision: unknown definition revision add_company_to_crm@2 (add_company_to_crm has only revision 1)"}) {
		t.Errorf("dry run of a process on a revision nobody makes: results %q, problems %q", results, got)
	}

	// The run makes revision 2: the process is checked against it, here.
	crm := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	crm["description"] = "revision 2"
	def2 := apply.Document{File: "defs/crm.yaml", Kind: apply.KindDefinition, ID: "add_company_to_crm", Body: crm}
	results, got := lines([]apply.Document{def2, doc}, true)
	if len(got) != 0 || len(results) != 2 || !strings.HasPrefix(results[1], "process crm_only: published (version 1, checked against the definitions or destinations this apply would create first)\n  note: node crm's input company_name is fed from input.name, which lacks or loosens the field's max_length 200") {
		t.Errorf("dry run of a process on a planned revision: results %q, problems %q", results, got)
	}

	// A revision the apply does not make either: named with the one it
	// makes.
	node := later["nodes"].(map[string]any)["crm"].(map[string]any)
	node["revision"] = 3
	if _, got := lines([]apply.Document{def2, doc}, true); !reflect.DeepEqual(got, []string{"procs/crm.yaml: /nodes/crm/revision: unknown definition revision add_company_to_crm@3 (add_company_to_crm has only revision 1); this apply makes revision 2"}) {
		t.Errorf("dry run of a process on a revision beyond the planned one: problems %q", got)
	}
	node["revision"] = 2

	// Revision 2 requires an input the process does not bind, and the
	// process misspells a route: both are reported, the planned revision
	// is not.
	inputs := crm["inputs"].(map[string]any)
	inputs["fields"] = append(slices.Clone(inputs["fields"].([]any)), map[string]any{"name": "region", "type": "text", "required": true})
	typo := relaistest.CRMProcess(nil)
	node = typo["nodes"].(map[string]any)["crm"].(map[string]any)
	node["revision"] = 2
	node["routes"] = map[string]any{"created": "done", "existing": "known", "exisitng": "known"}
	doc.Body = typo
	results, got = lines([]apply.Document{def2, doc}, true)
	want := []string{
		`procs/crm.yaml: /nodes/crm/inputs: required input "region" is not bound`,
		`procs/crm.yaml: /nodes/crm/routes/exisitng: "exisitng" is not a value of routing output result (did you mean "existing"?)`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dry run of a broken process on a planned revision: results %q, problems %q; want %q", results, got, want)
	}
}

// TestDryRunRefusesAReleaseOfAMissingRevision: a dry run refuses a release
// whose revision the real apply would refuse, with the same problem, and
// plans one whose revision exists on the server or is the one a
// Definition of the same run would snapshot.
func TestDryRunRefusesAReleaseOfAMissingRevision(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml") // revision 1
	c := &apply.Client{URL: env.URL, Token: env.Designer}
	crm, err := os.ReadFile(filepath.Join(relaistest.Root(), "examples", "definitions", "add_company_to_crm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(crm), "name: Add company to CRM", "name: Add a company to the CRM", 1) + "revision: 2\n"
	release := func(def string, rev int) string {
		return fmt.Sprintf("kind: Release\ndefinition: %s\nname: r%d\nrevision: %d\n", def, rev, rev)
	}
	const fresh = `kind: Definition
key: fresh
name: Fresh
inputs: {fields: []}
outputs: {fields: []}
`
	for _, tc := range []struct {
		name  string
		files []string
		want  string // the only problem, or "" for none
	}{
		{"existing revision", []string{release(key, 1)}, ""},
		{"missing revision", []string{release(key, 7)}, "rel.yaml:4: /revision: no such revision (" + key + " has only revision 1)"},
		{"revision snapshotted by the same run", []string{release(key, 2), changed}, ""},
		{"revision after the one snapshotted", []string{release(key, 3), changed}, "rel.yaml:4: /revision: no such revision (" + key + " has revisions 1 to 2)"},
		{"definition created by the same run", []string{release("fresh", 1), fresh}, ""},
		{"revision the created definition lacks", []string{release("fresh", 2), fresh}, "rel.yaml:4: /revision: no such revision (fresh has only revision 1)"},
		{"definition on neither side", []string{release("nowhere", 1)}, `rel.yaml:2: /definition: definition "nowhere" not found`},
		{"misspelt definition", []string{release("add_company_to_cmr", 1)}, `rel.yaml:2: /definition: definition "add_company_to_cmr" not found (did you mean "add_company_to_crm"?)`},
	} {
		dir := t.TempDir()
		for i, body := range tc.files {
			name := "rel.yaml"
			if i > 0 {
				name = fmt.Sprintf("def%d.yaml", i)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		docs, problems, err := apply.Load(dir)
		if err != nil || len(problems) > 0 {
			t.Fatalf("%s: load: %v %v", tc.name, err, problems)
		}
		var got []string
		for _, p := range c.Apply(context.Background(), docs, true, func(apply.Result) {}) {
			got = append(got, strings.TrimPrefix(p.String(), dir+string(filepath.Separator)))
		}
		if want := []string{tc.want}; tc.want == "" && len(got) > 0 || tc.want != "" && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: dry run problems %q; want %q", tc.name, got, tc.want)
		}
	}
	if res := env.Do("GET", "/api/v1/definitions/"+key+"/releases", env.Designer, nil); !strings.Contains(string(res.Body), `"items":[]`) {
		t.Errorf("the dry runs changed the server: %d %s", res.Status, res.Body)
	}

	// The real apply refuses the missing revision in the same words.
	doc := apply.Document{File: "rel.yaml", Kind: apply.KindRelease, ID: "r7", Definition: key, Body: map[string]any{"revision": json.Number("7")}}
	var got []string
	for _, p := range c.Apply(context.Background(), []apply.Document{doc}, false, func(apply.Result) {}) {
		got = append(got, p.String())
	}
	// A document built in code has no lines to show.
	if want := []string{"rel.yaml: /revision: no such revision (" + key + " has only revision 1)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("apply problems %q; want %q", got, want)
	}
}

// TestARefusedRevisionAssertionChangesNothing: a Definition whose declared
// revision is not the one it would become is refused before its Working is
// saved or snapshotted, so re-running the refused apply adds no revision
// (revisions are immutable and can never be deleted).
func TestARefusedRevisionAssertionChangesNothing(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	c := &apply.Client{URL: env.URL, Token: env.Designer}
	def := func(typ string) apply.Document {
		return apply.Document{File: "def.yaml", Kind: apply.KindDefinition, ID: "asserted", ExpectRevision: 1, Body: map[string]any{
			"name": "Asserted", "inputs": map[string]any{"fields": []any{map[string]any{"name": "a", "type": typ}}}, "outputs": map[string]any{"fields": []any{}}}}
	}
	if p := c.Apply(context.Background(), []apply.Document{def("text")}, false, func(apply.Result) {}); len(p) != 0 {
		t.Fatalf("first apply: %v", p)
	}
	before := env.Must(200, "GET", "/api/v1/definitions/asserted", env.Designer, nil).JSON(t)
	for range 2 {
		p := c.Apply(context.Background(), []apply.Document{def("integer")}, false, func(apply.Result) {})
		if len(p) != 1 || !strings.Contains(p[0].String(), "/revision: declares 1, the server has or would create 2") {
			t.Fatalf("a changed document still declaring revision 1: problems %v", p)
		}
	}
	after := env.Must(200, "GET", "/api/v1/definitions/asserted", env.Designer, nil).JSON(t)
	if len(after["revisions"].([]any)) != 1 || after["working_digest"] != before["working_digest"] {
		t.Errorf("the refused applies changed the definition: %d revisions, working %v (was %v)", len(after["revisions"].([]any)), after["working_digest"], before["working_digest"])
	}
}

// TestARevertedContractSaysWhichRevisionItEquals: a document reverted to
// an earlier contract makes a new revision (revisions are deduplicated
// against the latest only), and apply says which earlier one it equals.
func TestARevertedContractSaysWhichRevisionItEquals(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	c := &apply.Client{URL: env.URL, Token: env.Designer}
	def := func(typ string) apply.Document {
		return apply.Document{File: "def.yaml", Kind: apply.KindDefinition, ID: "reverted", Body: map[string]any{
			"name": "Reverted", "inputs": map[string]any{"fields": []any{map[string]any{"name": "a", "type": typ}}}, "outputs": map[string]any{"fields": []any{}}}}
	}
	var got []string
	for _, typ := range []string{"text", "integer", "text"} {
		if p := c.Apply(context.Background(), []apply.Document{def(typ)}, false, func(r apply.Result) { got = append(got, r.Action+" "+r.Detail) }); len(p) != 0 {
			t.Fatalf("apply %s: %v", typ, p)
		}
	}
	if len(got) != 3 || !strings.HasPrefix(got[2], "updated revision 3") || !strings.Contains(got[2], "identical to revision 1") || strings.Contains(got[1], "identical") {
		t.Errorf("applies said %q, want the third (revision 3) said identical to revision 1", got)
	}
}

// TestAProcessAssertsItsVersion: a Process document's version: is the
// version it must be (unchanged) or become (published), checked before
// anything is published, in a dry run as in the real one; a document that
// is another version, or would be, is refused at /version and publishes
// nothing.
func TestAProcessAssertsItsVersion(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	c := &apply.Client{URL: env.URL, Token: env.Designer}
	proc := func(version int, policy map[string]any) apply.Document {
		return apply.Document{File: "p.yaml", Kind: apply.KindProcess, ID: "crm_only", ExpectRevision: version, Body: relaistest.CRMProcess(policy)}
	}
	versions := func() int {
		return len(env.Must(200, "GET", "/api/v1/processes/crm_only", env.Designer, nil).JSON(t)["versions"].([]any))
	}
	run := func(d apply.Document, dryRun bool) ([]string, []apply.Problem) {
		var got []string
		p := c.Apply(context.Background(), []apply.Document{d}, dryRun, func(r apply.Result) { got = append(got, r.Action+" "+r.Detail) })
		return got, p
	}
	if got, p := run(proc(2, nil), true); len(p) != 1 || !strings.Contains(p[0].String(), "/version: declares 2, the server has or would publish 1") {
		t.Fatalf("a first version declared 2, dry run: %v %v", got, p)
	}
	if got, p := run(proc(1, nil), false); len(p) != 0 || len(got) != 1 || !strings.HasPrefix(got[0], "published version 1") {
		t.Fatalf("a first version declared 1: %v %v", got, p)
	}
	if got, p := run(proc(1, nil), false); len(p) != 0 || !strings.HasPrefix(got[0], "unchanged version 1") {
		t.Fatalf("the same document again: %v %v", got, p)
	}
	changed := map[string]any{"max_attempts": 5}
	for _, dryRun := range []bool{true, false} {
		if got, p := run(proc(1, changed), dryRun); len(p) != 1 || !strings.Contains(p[0].String(), "/version: declares 1, the server has or would publish 2") {
			t.Fatalf("a changed document still declaring version 1 (dry run %v): %v %v", dryRun, got, p)
		}
	}
	if n := versions(); n != 1 {
		t.Fatalf("%d versions after the refused applies, want 1", n)
	}
	if got, p := run(proc(2, changed), false); len(p) != 0 || !strings.HasPrefix(got[0], "published version 2") {
		t.Fatalf("the changed document declaring version 2: %v %v", got, p)
	}
	// The first document is version 1, as it declares.
	if got, p := run(proc(1, nil), false); len(p) != 0 || !strings.HasPrefix(got[0], "unchanged version 1") {
		t.Fatalf("the first document again: %v %v", got, p)
	}
}

// TestDryRunRefusesWhatTheServerWould: a dry run of a Definition asks the
// server's own checks (PUT .../working?dry_run=true), so a key the server
// refuses is refused by the dry run too, in the same words, and nothing is
// stored.
func TestDryRunRefusesWhatTheServerWould(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	c := &apply.Client{URL: env.URL, Token: env.Designer}
	body := map[string]any{"name": "Bad", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}}
	for _, dryRun := range []bool{true, false} {
		p := c.Apply(context.Background(), []apply.Document{{File: "k.yaml", Kind: apply.KindDefinition, ID: "Bad-Key", Body: body}}, dryRun, func(apply.Result) {})
		if len(p) != 1 || !strings.Contains(p[0].String(), "invalid_key") {
			t.Errorf("dry run %v of a bad key: problems %v, want invalid_key", dryRun, p)
		}
	}
	var results []string
	p := c.Apply(context.Background(), []apply.Document{{File: "ok.yaml", Kind: apply.KindDefinition, ID: "good_key", Body: body}}, true, func(r apply.Result) { results = append(results, r.String()) })
	if len(p) != 0 || len(results) != 1 || !strings.Contains(results[0], "created") {
		t.Errorf("dry run of a good definition: results %q problems %v", results, p)
	}
	if r := env.Do("GET", "/api/v1/definitions/good_key", env.Designer, nil); r.Status != 404 {
		t.Errorf("the dry run stored the definition: %d", r.Status)
	}
}

// TestReapplyingAnOlderProcessSaysWhichVersionStartsRun: publishing is
// idempotent by digest, so re-applying version 1's document after version
// 2 answers version 1 unchanged, and says that starts still run version 2.
func TestReapplyingAnOlderProcessSaysWhichVersionStartsRun(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	c := &apply.Client{URL: env.URL, Token: env.Admin}
	v1 := relaistest.CRMProcess(nil)
	v2 := relaistest.CRMProcess(map[string]any{"max_attempts": 7})
	var results []string
	for _, body := range []map[string]any{v1, v2, v1} {
		doc := apply.Document{File: "p.yaml", Kind: apply.KindProcess, ID: "crm_only", Body: body}
		if p := c.Apply(context.Background(), []apply.Document{doc}, false, func(r apply.Result) { results = append(results, r.String()) }); len(p) != 0 {
			t.Fatalf("apply: %v", p)
		}
	}
	if len(results) != 3 || !strings.Contains(results[2], "unchanged (version 1; starts without a version run version 2, the latest)") {
		t.Errorf("results %q, want the third to say version 1 is unchanged and version 2 runs", results)
	}
}

// TestDryRunAgainstAnOlderServerWritesNothing: a server whose OpenAPI
// document has no dry_run on PUT .../working would store the Working the
// dry run sends, so the dry run does not send it, and says it went
// unchecked.
func TestDryRunAgainstAnOlderServerWritesNothing(t *testing.T) {
	t.Parallel()
	var writes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodGet:
			writes.Add(1)
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/api/v1/openapi.json":
			fmt.Fprint(w, `{"paths":{"/api/v1/definitions/{key}/working":{"parameters":[{"name":"key"}],"put":{"parameters":[]}}}}`)
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"code":"not_found","detail":"definition not found","status":404}`)
		}
	}))
	defer srv.Close()
	c := &apply.Client{URL: srv.URL, Token: "t"}
	body := map[string]any{"name": "Old", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}}
	var results []string
	p := c.Apply(context.Background(), []apply.Document{{File: "d.yaml", Kind: apply.KindDefinition, ID: "old_server", Body: body}}, true, func(r apply.Result) { results = append(results, r.String()) })
	if writes.Load() != 0 || len(p) != 0 || len(results) != 1 || !strings.Contains(results[0], "not checked by the server") {
		t.Errorf("dry run against an older server: %d writes, results %q, problems %v", writes.Load(), results, p)
	}
}

// TestApplySnapshotsOnlyItsOwnWorking: a Working another client saves
// between apply's save and its snapshot is not made into the revision
// apply reports as the document's.
func TestApplySnapshotsOnlyItsOwnWorking(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	target, _ := url.Parse(env.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	key := "raced"
	other := map[string]any{"name": "Theirs", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/definitions/"+key+"/revisions" {
			env.Must(200, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, other)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := &apply.Client{URL: srv.URL, Token: env.Designer}
	mine := map[string]any{"name": "Mine", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}}
	var results []string
	p := c.Apply(context.Background(), []apply.Document{{File: "d.yaml", Kind: apply.KindDefinition, ID: key, Body: mine}}, false, func(r apply.Result) { results = append(results, r.String()) })
	if len(p) != 1 || !strings.Contains(p[0].String(), "working_changed") || !strings.Contains(p[0].String(), "run relais apply again") || len(results) != 0 {
		t.Fatalf("apply raced by another Working: results %q, problems %v; want working_changed", results, p)
	}
	if r := env.Do("GET", "/api/v1/definitions/"+key+"/revisions/1", env.Designer, nil); r.Status != 404 {
		t.Errorf("revision 1 was made of the other Working: %d %s", r.Status, r.Body)
	}
}

// A destination whose max_timeout this apply lowers below a node's timeout
// refuses the process in the dry run, which the real apply runs over the
// whole set first: the server's own dry run judges the node against the
// destination as it is, and passed, so the real apply stopped halfway
// with the destination lowered and a revision made.
func TestALoweredMaxTimeoutRefusesTheProcessInTheDryRun(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	c := &apply.Client{URL: env.URL, Token: env.Admin}
	docs, problems, err := apply.Load(filepath.Join(relaistest.Root(), "examples"))
	if err != nil || len(problems) > 0 {
		t.Fatalf("loading the examples: %v %v", err, problems)
	}
	if p := c.Apply(context.Background(), docs, false, func(apply.Result) {}); len(p) > 0 {
		t.Fatalf("applying the examples: %v", p)
	}
	for _, d := range docs {
		switch {
		case d.Kind == apply.KindDestination && d.ID == "scoring-api":
			d.Body["max_timeout"] = "PT2S" // the score node's timeout is PT3S
		case d.Kind == apply.KindProcess && d.ID == "onboard_company":
			d.Body["name"] = "Onboard company, renamed"
		}
	}
	p := c.Apply(context.Background(), docs, true, func(apply.Result) {})
	if len(p) != 1 || !strings.Contains(p[0].String(), "/nodes/score/timeout") || !strings.Contains(p[0].String(), "max_timeout PT2S") {
		t.Errorf("dry run lowering scoring-api's max_timeout below the score node's timeout: problems %v, want the node's timeout refused", p)
	}
	if got := env.Must(200, "GET", "/api/v1/destinations/scoring-api", env.Admin, nil).JSON(t)["max_timeout"]; got != "PT5S" {
		t.Errorf("the dry run changed the destination: max_timeout %v", got)
	}
}

// A release is immutable, notes included: a document changing only its
// notes is refused saying so, not as if its revision differed.
func TestAChangedReleaseSaysWhatDiffers(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	c := &apply.Client{URL: env.URL, Token: env.Designer}
	docs, problems, err := apply.Load(filepath.Join(relaistest.Root(), "examples", "definitions"))
	if err != nil || len(problems) > 0 {
		t.Fatalf("loading the examples' definitions: %v %v", err, problems)
	}
	if p := c.Apply(context.Background(), docs, false, func(apply.Result) {}); len(p) > 0 {
		t.Fatalf("applying them: %v", p)
	}
	for _, d := range docs {
		if d.Kind == apply.KindRelease {
			d.Body["notes"] = "Reworded."
		}
	}
	if p := c.Apply(context.Background(), docs, true, func(apply.Result) {}); len(p) != 1 || !strings.Contains(p[0].String(), "other notes") {
		t.Errorf("a release's notes changed: %v, want it refused for its notes", p)
	}
}

// A process version published on a revision the live workers of its
// definition do not take says so: its occurrences would wait for a worker
// that takes it. Nothing is said while no worker serves the definition (a
// first deployment); a token that cannot read the worker catalog is told
// the check was not made.
func TestPublishSaysWhenNoLiveWorkerTakesTheRevision(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	// Granted revision 1 only: its worker subscribes without revisions
	// (every revision granted), as the SDK's and the examples' do.
	created := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm-sync",
		"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": []int{1}}}}).JSON(t)
	consumer, consumerID := created["token"].(string), fmt.Sprint(created["id"])
	crm := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	crm["description"] = "revision 2"
	def2 := apply.Document{File: "defs/crm.yaml", Kind: apply.KindDefinition, ID: "add_company_to_crm", Body: crm}
	process := func(rev int) apply.Document {
		body := relaistest.CRMProcess(nil)
		body["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = rev
		return apply.Document{File: "procs/crm.yaml", Kind: apply.KindProcess, ID: "crm_only", Body: body}
	}
	run := func(token string, docs ...apply.Document) []string {
		t.Helper()
		var results []string
		c := &apply.Client{URL: env.URL, Token: token}
		if problems := c.Apply(context.Background(), docs, false, func(r apply.Result) { results = append(results, r.String()) }); len(problems) != 0 {
			t.Fatalf("apply: %v", problems)
		}
		return results
	}
	if got := run(env.Admin, process(1)); len(got) != 1 || strings.Contains(got[0], "no live worker") {
		t.Errorf("no worker serves the definition yet: %q, want nothing said of workers", got)
	}
	// A worker taking revision 1 only, live.
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w1",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}})
	// A dry run, the revision not made yet: the grant can only follow it.
	var dry []string
	if problems := (&apply.Client{URL: env.URL, Token: env.Admin}).Apply(context.Background(), []apply.Document{def2, process(2)}, true,
		func(r apply.Result) { dry = append(dry, r.String()) }); len(problems) != 0 || len(dry) != 2 ||
		!strings.Contains(dry[1], "--grant add_company_to_crm=2, once this apply has made it)") {
		t.Errorf("a dry run making revision 2: %q, %v; want the grant advised once the revision is made", dry, problems)
	}
	got := run(env.Admin, def2, process(2))
	// Its consumer's grant leaves revision 2 out: said too, or a worker
	// started for it is refused not_granted (newcomer QA).
	want := "no live worker takes add_company_to_crm@2 (they take revision 1; consumer(s) \"crm-sync\" (id " + consumerID +
		") are not granted revision 2: add it to their grant (relais consumer grant " + consumerID + " --grant add_company_to_crm=2) before subscribing their workers to it): occurrences of it wait until a worker that takes it connects"
	if len(got) != 2 || !strings.Contains(got[1], "published (version 2; "+want+")") {
		t.Errorf("a version on revision 2 with workers on revision 1: %q, want %q", got, want)
	}
	// A designer cannot read the worker catalog: told the check was not
	// made (designer QA: the warning dropped unsaid).
	designer := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "ci", "role": "designer"}).JSON(t)["token"].(string)
	body := relaistest.CRMProcess(nil)
	body["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = 2
	body["description"] = "version 3"
	if got := run(designer, apply.Document{File: "procs/crm.yaml", Kind: apply.KindProcess, ID: "crm_only", Body: body}); len(got) != 1 || strings.Contains(got[0], "no live worker") ||
		!strings.Contains(got[0], "live workers not checked: this token may not read the worker catalog") {
		t.Errorf("as a designer: %q, want the check said not made", got)
	}
}

// A worker declaring the inputs it reads, naming no revision, takes only
// the revisions whose inputs have them: a version pinning one that lacks
// them is said to have no taker, with the fields it lacks.
func TestPublishSaysWhenLiveWorkersDeclareFieldsTheRevisionLacks(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	if rev := env.AddInput(key, "region"); rev != 2 {
		t.Fatalf("revision %d, want 2", rev)
	}
	consumer := env.Consumer("crm-sync", key)
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "regional",
		"subscriptions": []any{map[string]any{"definition": key, "fields": []string{"/region"}}}})
	process := func(rev int, description string) apply.Document {
		body := relaistest.CRMProcess(nil)
		body["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = rev
		body["description"] = description
		return apply.Document{File: "procs/crm.yaml", Kind: apply.KindProcess, ID: "crm_only", Body: body}
	}
	run := func(doc apply.Document) string {
		t.Helper()
		var results []string
		c := &apply.Client{URL: env.URL, Token: env.Admin}
		if problems := c.Apply(context.Background(), []apply.Document{doc}, false, func(r apply.Result) { results = append(results, r.String()) }); len(problems) != 0 {
			t.Fatalf("apply: %v", problems)
		}
		if len(results) != 1 {
			t.Fatalf("results %q, want one", results)
		}
		return results[0]
	}
	want := "no live worker takes add_company_to_crm@1 (its inputs lack /region, which a live worker declares it reads)"
	if got := run(process(1, "on revision 1")); !strings.Contains(got, want) {
		t.Errorf("a version on revision 1 with a worker declaring /region: %q, want %q", got, want)
	}
	if got := run(process(2, "on revision 2")); strings.Contains(got, "no live worker") {
		t.Errorf("a version on revision 2, which has /region: %q, want nothing said of workers", got)
	}
	// A revision this run would make is judged as the plan has it, in a
	// dry run too (evolution QA: not on the server yet, it was taken as
	// served, and the note came only after the real publication).
	crm := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	crm["description"] = "without /region, a third revision"
	def := apply.Document{File: "defs/crm.yaml", Kind: apply.KindDefinition, ID: key, Body: crm}
	var results []string
	c := &apply.Client{URL: env.URL, Token: env.Admin}
	if problems := c.Apply(context.Background(), []apply.Document{def, process(3, "on revision 3")}, true, func(r apply.Result) { results = append(results, r.String()) }); len(problems) != 0 {
		t.Fatalf("dry run: %v", problems)
	}
	want3 := "no live worker takes add_company_to_crm@3 (its inputs lack /region, which a live worker declares it reads)"
	if len(results) != 2 || !strings.Contains(results[0], "revision 3") || !strings.Contains(results[1], want3) {
		t.Errorf("a dry run making revision 3, lacking /region, and pinning it: %q, want %q", results, want3)
	}
}

// An apply that replaces a Working someone edited without snapshotting
// names the edits it discards (designer QA: a colleague's four changes
// went as "working restored", without a word of them).
func TestApplyNamesTheWorkingEditsItDiscards(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	doc := apply.Document{File: "defs/crm.yaml", Kind: apply.KindDefinition, ID: "add_company_to_crm", Body: crm}
	run := func(dryRun bool) string {
		t.Helper()
		var results []string
		c := &apply.Client{URL: env.URL, Token: env.Admin}
		if problems := c.Apply(context.Background(), []apply.Document{doc}, dryRun, func(r apply.Result) { results = append(results, r.String()) }); len(problems) != 0 {
			t.Fatalf("apply: %v", problems)
		}
		return strings.Join(results, "\n")
	}
	run(false)
	// A colleague's edit through the API: a field removed, not snapshotted.
	working := env.Must(200, "GET", "/api/v1/definitions/add_company_to_crm", env.Designer, nil).JSON(t)["working"].(map[string]any)
	inputs := working["inputs"].(map[string]any)
	fields := inputs["fields"].([]any)
	inputs["fields"] = fields[:len(fields)-1]
	env.Must(200, "PUT", "/api/v1/definitions/add_company_to_crm/working", env.Designer, working)
	removed := fields[len(fields)-1].(map[string]any)["name"].(string)
	for _, dry := range []bool{true, false} {
		verb := map[bool]string{true: "would discard", false: "discards"}[dry]
		want := "definition add_company_to_crm: working restored (revision 1; " + verb + " the Working's unsnapshotted edits, made outside this repository: /inputs/" + removed + " ("
		if got := run(dry); !strings.Contains(got, want) {
			t.Errorf("apply (dry run %v) over an edited Working: %q, want %q", dry, got, want)
		}
	}
	if got := run(false); strings.Contains(got, "discard") {
		t.Errorf("a second apply: %q, want nothing discarded", got)
	}
	// An edit of the description alone, which the diff does not list, is
	// named too.
	working = env.Must(200, "GET", "/api/v1/definitions/add_company_to_crm", env.Designer, nil).JSON(t)["working"].(map[string]any)
	working["description"] = "Reworded by a colleague."
	env.Must(200, "PUT", "/api/v1/definitions/add_company_to_crm/working", env.Designer, working)
	if got, want := run(false), "working restored (revision 1; discards the Working's unsnapshotted edits, made outside this repository: names or descriptions)"; !strings.Contains(got, want) {
		t.Errorf("apply over a reworded Working: %q, want %q", got, want)
	}
}

// A process's problems found against the plan come in file order, as the
// local checks' do: sorted by pointer, a node cut off by a misspelt next
// ("/nodes/done: not reachable") came before the misspelling on an
// earlier line (designer QA).
func TestPlannedProblemsComeInFileOrder(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	c := &apply.Client{URL: env.URL, Token: env.Admin}
	examples := filepath.Join(relaistest.Root(), "examples")
	dir := t.TempDir()
	for _, f := range []string{"definitions/add_company_to_crm.yaml", "definitions/score_company.yaml", "destinations/destinations.yaml", "processes/onboard_company.yaml"} {
		data, err := os.ReadFile(filepath.Join(examples, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(f, "processes/") {
			data = []byte(strings.Replace(strings.Replace(string(data), "routes: {created: score, existing: done}", "routes: {created: score, existing: score}", 1),
				"    next: done\n", "    next: dnoe\n", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	docs, problems, err := apply.Load(dir)
	if err != nil || len(problems) > 0 {
		t.Fatalf("load: %v %v", err, problems)
	}
	var got []string
	for _, p := range c.Apply(context.Background(), docs, true, func(apply.Result) {}) {
		got = append(got, strings.TrimPrefix(p.String(), dir+string(filepath.Separator)))
	}
	if len(got) != 2 || !strings.Contains(got[0], `/nodes/score/next: `) || !strings.Contains(got[1], `/nodes/done: `) {
		t.Errorf("problems %q, want the misspelt next first, then the node it cut off", got)
	}
}

// A new definition key one typo away from an existing one is noted, in a
// dry run as in the real apply (evolution QA: add_company_to_cmr was
// created without a word, and a definition is never deleted).
func TestApplyNotesANewKeyCloseToAnExistingOne(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	body := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	c := &apply.Client{URL: env.URL, Token: env.Admin}
	for _, tc := range []struct {
		key, want string
		dryRun    bool
	}{
		{"add_company_to_cmr", "a new key, close to add_company_to_crm, which exists", true},
		{"add_company_to_cmr", "a new key, close to add_company_to_crm, which exists: if it is a typo, it is made all the same", false},
		{"invoice_customer", "", false},
		// Numbered on purpose: no typo (verifier QA).
		{"add_company_to_crm2", "", false},
	} {
		var results []string
		doc := apply.Document{File: "defs/x.yaml", Kind: apply.KindDefinition, ID: tc.key, Body: body}
		if problems := c.Apply(context.Background(), []apply.Document{doc}, tc.dryRun, func(r apply.Result) { results = append(results, r.String()) }); len(problems) != 0 {
			t.Fatalf("apply %s: %v", tc.key, problems)
		}
		got := strings.Join(results, "\n")
		if tc.want == "" && strings.Contains(got, "a new key, close to") || !strings.Contains(got, tc.want) || !strings.Contains(got, "created") {
			t.Errorf("apply %s (dry run %v): %q, want %q", tc.key, tc.dryRun, got, tc.want)
		}
	}
}

// A new process key one typo away from an existing one is noted as a
// definition's is (verifier QA: onboard_compnay published without a word).
func TestApplyNotesANewProcessKeyCloseToAnExistingOne(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	var results []string
	c := &apply.Client{URL: env.URL, Token: env.Admin}
	doc := apply.Document{File: "procs/x.yaml", Kind: apply.KindProcess, ID: "crm_onyl", Body: relaistest.CRMProcess(nil)}
	if problems := c.Apply(context.Background(), []apply.Document{doc}, false, func(r apply.Result) { results = append(results, r.String()) }); len(problems) != 0 {
		t.Fatalf("apply: %v", problems)
	}
	if len(results) != 1 || !strings.Contains(results[0], "published (version 1; a new key, close to crm_only, which exists: if it is a typo, it is made all the same (a process is never deleted)") {
		t.Errorf("a process crm_onyl: %q", results)
	}
}
