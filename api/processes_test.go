package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// TestLiteralIntoProtectedFieldIsRefusedAtPublish: a literal is part of the
// version document, which operators read in clear, so a literal bound to a
// sensitive field is refused with a pointer to the binding and a way out;
// the same value bound from a sensitive process input publishes, and the
// document then holds only the path.
func TestLiteralIntoProtectedFieldIsRefusedAtPublish(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	const email = "ceo@acme.example"
	doc := relaistest.CRMProcess(nil)
	inputs := doc["nodes"].(map[string]any)["crm"].(map[string]any)["inputs"].(map[string]any)
	inputs["contact"] = map[string]any{"value": map[string]any{"email": email}}

	for _, path := range []string{"/api/v1/processes/onboard/versions?dry_run=true", "/api/v1/processes/onboard/versions"} {
		res := env.Do("POST", path, env.Designer, doc)
		if res.Status != 422 || res.Code() != "invalid_process" {
			t.Fatalf("POST %s: %d %s; want 422 invalid_process", path, res.Status, res.Body)
		}
		errs := res.JSON(t)["errors"].([]any)
		if len(errs) != 1 {
			t.Fatalf("POST %s: errors %v; want exactly one", path, errs)
		}
		e := errs[0].(map[string]any)
		if e["path"] != "/nodes/crm/inputs/contact" || !strings.Contains(e["message"].(string), `bind it from a process input declared sensitive, as in {"from": "input.<path>"}`) {
			t.Errorf("POST %s: error %v; want one at /nodes/crm/inputs/contact saying to bind from a sensitive process input", path, e)
		}
		if strings.Contains(string(res.Body), email) {
			t.Errorf("POST %s: the refusal echoes the protected value: %s", path, res.Body)
		}
	}
	env.Must(404, "GET", "/api/v1/processes/onboard", env.Operator, nil)

	fields := doc["inputs"].(map[string]any)["fields"].([]any)
	doc["inputs"].(map[string]any)["fields"] = append(fields, map[string]any{"name": "contact", "type": "object", "classification": "sensitive",
		"fields": []any{map[string]any{"name": "email", "type": "text", "required": true}}})
	inputs["contact"] = map[string]any{"from": "input.contact"}
	if v := env.Process("onboard", doc); v != 1 {
		t.Fatalf("version %d, want 1", v)
	}
	got := env.Must(200, "GET", "/api/v1/processes/onboard/versions/1", env.Operator, nil)
	if strings.Contains(string(got.Body), email) || !strings.Contains(string(got.Body), "input.contact") {
		t.Errorf("version document: %s; want the contact bound from input.contact", got.Body)
	}
}

// TestAnUnknownReferenceSaysWhatExists: a pinned revision that does not
// exist names the definition's revisions, and a misspelt definition or
// destination the one it most likely meant, each at its own member.
func TestAnUnknownReferenceSaysWhatExists(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Must(201, "PUT", "/api/v1/destinations/claims-notifier", env.Admin, map[string]any{"url": "https://notify.example.com/", "max_timeout": "PT5S"})
	for _, c := range []struct {
		name, field string
		value       any
		want        string
	}{
		{"revision", "revision", 9, "unknown definition revision add_company_to_crm@9 (add_company_to_crm has only revision 1)"},
		{"definition", "definition", "add_company_to_cmr", `unknown definition revision add_company_to_cmr@1 (did you mean "add_company_to_crm"?)`},
		{"destination", "destination", "claims-notifer", `unknown destination "claims-notifer" (did you mean "claims-notifier"?)`},
	} {
		doc := relaistest.CRMProcess(nil)
		node := doc["nodes"].(map[string]any)["crm"].(map[string]any)
		node[c.field] = c.value
		if c.field == "destination" {
			node["kind"] = "push"
		}
		res := env.Do("POST", "/api/v1/processes/onboard/versions?dry_run=true", env.Designer, doc)
		said := false
		if res.Status == 422 {
			for _, e := range res.JSON(t)["errors"].([]any) {
				// At the member that is wrong: the revision of a known
				// definition, the key of an unknown one.
				e := e.(map[string]any)
				said = said || e["message"] == c.want && e["path"] == "/nodes/crm/"+c.field
			}
		}
		if !said {
			t.Errorf("%s: %d %s; want 422 saying %q", c.name, res.Status, res.Body, c.want)
		}
	}
	// A dotted key, as definitions take, is told what a process's is.
	res := env.Do("POST", "/api/v1/processes/shop.order/versions?dry_run=true", env.Designer, relaistest.CRMProcess(nil))
	if res.Status != 400 || res.Code() != "invalid_key" || !strings.Contains(res.JSON(t)["detail"].(string), "(a process key has no dots, unlike a definition's: shop_order, say)") {
		t.Errorf("a dotted process key: %d %s", res.Status, res.Body)
	}
}

// A process version that protects an input less than the version before
// it says so in the answer that makes it and in its dry run, as a
// definition's diff does: the API said nothing, only relais apply and the
// replica's log did (designer QA).
func TestAVersionLoweringProtectionSaysSo(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	withMemo := func(class string) map[string]any {
		doc := relaistest.CRMProcess(nil)
		fields := doc["inputs"].(map[string]any)["fields"].([]any)
		doc["inputs"].(map[string]any)["fields"] = append(fields, map[string]any{"name": "memo", "type": "text", "classification": class})
		return doc
	}
	first := env.Must(201, "POST", "/api/v1/processes/memo/versions", env.Designer, withMemo("sensitive")).JSON(t)
	if _, ok := first["lowers_protection"]; ok {
		t.Errorf("a first version lowers protection: %v", first)
	}
	const want = "[/inputs/memo (classification sensitive → normal)]"
	dry := env.Must(200, "POST", "/api/v1/processes/memo/versions?dry_run=true", env.Designer, withMemo("normal")).JSON(t)
	if got := fmt.Sprint(dry["lowers_protection"]); got != want {
		t.Errorf("dry run: lowers_protection %s, want %s", got, want)
	}
	made := env.Must(201, "POST", "/api/v1/processes/memo/versions", env.Designer, withMemo("normal")).JSON(t)
	if got := fmt.Sprint(made["lowers_protection"]); got != want || made["version"] != float64(2) {
		t.Errorf("publication: %v, want version 2 lowering %s", made, want)
	}
	// Published again, nothing is made, and nothing lowered.
	again := env.Must(200, "POST", "/api/v1/processes/memo/versions", env.Designer, withMemo("normal")).JSON(t)
	if _, ok := again["lowers_protection"]; ok {
		t.Errorf("the same document again: %v", again)
	}
	// An older document published again answers its version and the
	// latest, which it does not become (evolution QA: nothing said so).
	older := env.Must(200, "POST", "/api/v1/processes/memo/versions", env.Designer, withMemo("sensitive")).JSON(t)
	if older["version"] != 1.0 || older["created"] != false || older["latest_version"] != 2.0 {
		t.Errorf("version 1's document again: %v, want version 1, latest_version 2", older)
	}
	if dry := env.Must(200, "POST", "/api/v1/processes/memo/versions?dry_run=true", env.Designer, withMemo("sensitive")).JSON(t); dry["exists"] != true || dry["latest_version"] != 2.0 {
		t.Errorf("a dry run of version 1's document: %v, want exists and latest_version 2", dry)
	}
	if _, ok := made["latest_version"]; ok {
		t.Errorf("a new version's answer carries latest_version: %v", made)
	}
}
