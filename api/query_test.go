package api_test

import (
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// A query string that cannot be read is refused, never read without the
// parameters it could not parse: a ?dry_run=true% was applied for real, a
// start's ?version=%zz started the latest version, a filter with a bad
// escape answered the whole list.
func TestUnreadableQueryIsRefused(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_flow", relaistest.CRMProcess(nil))
	working := map[string]any{"name": "probe", "inputs": map[string]any{"fields": []any{}}, "outputs": map[string]any{"fields": []any{}}}
	for _, c := range []struct {
		method, path string
		body         any
		says         string
	}{
		{"PUT", "/api/v1/definitions/dryrun_probe/working?dry_run=true%", working, "percent sign"},
		{"POST", "/api/v1/processes/crm_flow/instances?version=%zz", map[string]any{"inputs": map[string]any{"name": "Acme"}}, "percent sign"},
		{"GET", "/api/v1/instances?business_key=50%off", nil, "percent sign"},
		{"GET", "/api/v1/instances?status=held;limit=1", nil, "semicolon"},
		{"GET", "/api/v1/occurrences?status=%zz", nil, "percent sign"},
	} {
		r := env.Do(c.method, c.path, env.Admin, c.body)
		if r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"path":"query"`) || !strings.Contains(string(r.Body), c.says) {
			t.Errorf("%s %s: %d %s, want 400 invalid_request at query about a %s", c.method, c.path, r.Status, r.Body, c.says)
		}
	}
	if r := env.Do("GET", "/api/v1/definitions/dryrun_probe", env.Admin, nil); r.Status != 404 {
		t.Errorf("the refused dry run stored the definition: GET %d", r.Status)
	}
	if items := env.Must(200, "GET", "/api/v1/instances", env.Operator, nil).JSON(t)["items"].([]any); len(items) != 0 {
		t.Errorf("the refused start started %d instances", len(items))
	}
	// Without a token, 401 comes first, as for every other refusal.
	if r := env.Do("GET", "/api/v1/instances?status=%zz", "", nil); r.Status != 401 {
		t.Errorf("unreadable query without a token: %d, want 401", r.Status)
	}
	// Escapes that are right still pass.
	env.Must(200, "GET", "/api/v1/instances?business_key=50%25off", env.Operator, nil)
}

// A time filter's offset sent with an unencoded + (read as a space, as in
// any query string) is refused with the encoding to use.
func TestTimeFilterPlusSentUnencodedIsExplained(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	r := env.Do("GET", "/api/v1/occurrences?created_after=2026-12-05T07:01:30+01:00", env.Operator, nil)
	if r.Status != 400 || !strings.Contains(string(r.Body), "2026-12-05T07:01:30%2B01:00") {
		t.Errorf("unencoded +: %d %s, want 400 showing %%2B", r.Status, r.Body)
	}
	env.Must(200, "GET", "/api/v1/occurrences?created_after=2026-12-05T07:01:30%2B01:00", env.Operator, nil)
}
