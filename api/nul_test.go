package api_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// TestNULCharacterIsRefusedWithItsPointer: JSON may carry the NUL character
// (\u0000) but PostgreSQL stores it in neither text nor jsonb, which made
// these requests fail with 500. A Working or process document holding it
// is refused as 400 invalid_json, a request field as 400 invalid_json, and
// instance inputs as 422 invalid_inputs, each naming the pointer; nothing
// is stored.
func TestNULCharacterIsRefusedWithItsPointer(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	const message = `the NUL character (\u0000) is not allowed`
	check := func(what string, r relaistest.Response, status int, code string, paths ...string) {
		t.Helper()
		var p struct {
			Errors []struct{ Path, Message string }
		}
		_ = json.Unmarshal(r.Body, &p)
		var got []string
		for _, e := range p.Errors {
			got = append(got, e.Path)
			if e.Message != message {
				t.Errorf("%s: message %q at %s, want %q", what, e.Message, e.Path, message)
			}
		}
		if r.Status != status || r.Code() != code || !reflect.DeepEqual(got, paths) {
			t.Errorf("%s: %d %s; want %d %s at %q", what, r.Status, r.Body, status, code, paths)
		}
	}

	_, working := exampleWorking(t, "score_company.yaml")
	working["description"] = "risk\x00score"
	check("Working", env.Do("PUT", "/api/v1/definitions/nul_working/working", env.Designer, working), 400, "invalid_json", "/description")
	if r := env.Do("GET", "/api/v1/definitions/nul_working", env.Operator, nil); r.Status != 404 {
		t.Errorf("the refused Working was stored: %d", r.Status)
	}

	proc := relaistest.CRMProcess(nil)
	proc["description"] = "nightly\x00"
	proc["nodes"].(map[string]any)["crm"].(map[string]any)["inputs"].(map[string]any)["source"] = map[string]any{"value": "web\x00"}
	for _, path := range []string{"/api/v1/processes/nul_process/versions?dry_run=true", "/api/v1/processes/nul_process/versions"} {
		check("process "+path, env.Do("POST", path, env.Designer, proc), 400, "invalid_json", "/description", "/nodes/crm/inputs/source/value")
	}
	if r := env.Do("GET", "/api/v1/processes/nul_process", env.Operator, nil); r.Status != 404 {
		t.Errorf("the refused process was stored: %d", r.Status)
	}

	env.Process("crm_only", relaistest.CRMProcess(nil))
	start := "/api/v1/processes/crm_only/instances"
	check("inputs", env.Do("POST", start, env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme\x00"}}), 422, "invalid_inputs", "/inputs/name")
	check("business key", env.Do("POST", start, env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}, "business_key": "\x00"}), 400, "invalid_json", "/business_key")
	if items := env.Must(200, "GET", "/api/v1/instances", env.Operator, nil).JSON(t)["items"].([]any); len(items) != 0 {
		t.Errorf("%d instances were started; want none", len(items))
	}
}

// TestNULInTheAddressIsRefused: a filter, cursor or name holding the NUL
// character is a 400 naming it, never a 500 from the database.
func TestNULInTheAddressIsRefused(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	for _, tc := range []struct{ path, at string }{
		{"/api/v1/instances?business_key=acme%00", "business_key"},
		{"/api/v1/occurrences?definition=add_company_to_crm%00&status=available", "definition"},
		{"/api/v1/definitions/add_company_to_crm/releases/2026%00", "path"},
		{"/api/v1/processes?cursor=%00", "cursor"},
	} {
		r := env.Do("GET", tc.path, env.Admin, nil)
		var p struct {
			Errors []struct{ Path, Message string }
		}
		_ = json.Unmarshal(r.Body, &p)
		if r.Status != 400 || r.Code() != "invalid_request" || len(p.Errors) != 1 || p.Errors[0].Path != tc.at {
			t.Errorf("GET %s: %d %s; want 400 invalid_request at %s", tc.path, r.Status, r.Body, tc.at)
		}
	}
	if r := env.Do("GET", "/api/v1/instances?business_key=%00", "", nil); r.Status != 401 {
		t.Errorf("without a token: %d, want 401 (every route needs a token)", r.Status)
	}
}
