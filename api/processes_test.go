package api_test

import (
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
