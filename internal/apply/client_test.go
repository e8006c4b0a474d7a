package apply_test

import (
	"context"
	"reflect"
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

	// A process whose only problem is a definition revision planned in the
	// same dry run is still planned, to be checked once it exists.
	later := relaistest.CRMProcess(nil)
	later["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = 2
	doc := apply.Document{File: "procs/crm.yaml", Kind: apply.KindProcess, ID: "crm_only", Body: later}
	if results, got := lines([]apply.Document{doc}, true); len(got) != 0 || !reflect.DeepEqual(results, []string{"process crm_only: published (version 1, checked when its dependencies exist)"}) {
		t.Errorf("dry run of a process on a planned revision: results %q, problems %q", results, got)
	}
}
