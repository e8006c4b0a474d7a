package api_test

import (
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// A list refuses a query parameter it does not take, naming it: a
// misspelt filter used to be ignored, and the unfiltered list read as its
// result. A dry run asked for with another value than true is refused
// rather than applied.
func TestUnknownQueryParametersAreRefused(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	for _, c := range []struct{ path, token, param string }{
		{"/api/v1/audit/actions?instance_id=01a23630-91c6-71af-a05d-6fe7140276a7", env.Operator, "instance_id"},
		{"/api/v1/instances?proces=crm_only", env.Operator, "proces"},
		{"/api/v1/occurrences?status=failed&definiton=x", env.Operator, "definiton"},
		{"/api/v1/definitions?q=crm", env.Designer, "q"},
		{"/api/v1/audit/reveals?occurence=x", env.Admin, "occurence"},
		{"/api/v1/instances?status=held&status=running", env.Operator, "status"},
		{"/api/v1/instances?limit=5&limit=500", env.Operator, "limit"},
	} {
		r := env.Do("GET", c.path, c.token, nil)
		if r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"path":"`+c.param+`"`) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", c.path, r.Status, r.Body, c.param)
		}
	}
	for _, path := range []string{"/api/v1/instances?process=crm_only&status=held&limit=5", "/api/v1/occurrences?definition=add_company_to_crm&settled_after=2026-01-01",
		"/api/v1/audit/actions?action=retry&limit=1"} {
		env.Must(200, "GET", path, env.Operator, nil)
	}

	doc := relaistest.CRMProcess(nil)
	for _, q := range []string{"dry_run=1", "dry_run=yes", "dry_run=TRUE", "dry_run=", "dry_run", "dry_run=false&dry_run=true", "dryrun=true"} {
		if r := env.Do("POST", "/api/v1/processes/onboard/versions?"+q, env.Designer, doc); r.Status != 400 || r.Code() != "invalid_request" {
			t.Errorf("publish with ?%s: %d %s, want 400", q, r.Status, r.Body)
		}
		body := map[string]any{"url": "https://scoring.example/score", "max_timeout": "PT5S"}
		if r := env.Do("PUT", "/api/v1/destinations/scoring?"+q, env.Admin, body); r.Status != 400 {
			t.Errorf("put destination with ?%s: %d %s, want 400", q, r.Status, r.Body)
		}
	}
	env.Must(404, "GET", "/api/v1/processes/onboard", env.Designer, nil)
	env.Must(404, "GET", "/api/v1/destinations/scoring", env.Admin, nil)
	if r := env.Must(200, "POST", "/api/v1/processes/onboard/versions?dry_run=true", env.Designer, doc); r.Header.Get("Relais-Applied") != "false" {
		t.Errorf("a process's dry run: Relais-Applied %q, want false", r.Header.Get("Relais-Applied"))
	}
	// A refused dry run says so too, malformed bodies included.
	for _, c := range []struct {
		method, path, token string
		body                any
	}{
		{"POST", "/api/v1/processes/onboard/versions?dry_run=true", env.Designer, map[string]any{"start": 3}},
		{"POST", "/api/v1/processes/onboard/versions?dry_run=true", env.Designer, "{"},
		{"PUT", "/api/v1/destinations/scoring?dry_run=true", env.Admin, map[string]any{"url": "ftp://x", "max_timeout": "PT5S"}},
		{"PUT", "/api/v1/destinations/scoring?dry_run=true", env.Admin, "{"},
	} {
		if r := env.Do(c.method, c.path, c.token, c.body); r.Status < 400 || r.Header.Get("Relais-Applied") != "false" {
			t.Errorf("%s %s with %v: %d, Relais-Applied %q; want a refusal saying false", c.method, c.path, c.body, r.Status, r.Header.Get("Relais-Applied"))
		}
	}
	env.Must(201, "POST", "/api/v1/processes/onboard/versions?dry_run=false", env.Designer, doc)
}

// A 404 for an instance or an occurrence says that retention may have
// deleted it: the API cannot tell it from an id that never existed.
// TestListsRefuseKeysNothingHas: a list filtered by a process, a version,
// a definition or a revision nothing has (a typo) is refused, naming the
// parameter, rather than answered empty, which reads as "none left"; a
// key that exists answers its list, empty or not.
func TestListsRefuseKeysNothingHas(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	for path, param := range map[string]string{
		"/api/v1/instances?process=chekout":                            "process",
		"/api/v1/instances?process=crm_only&version=9":                 "version",
		"/api/v1/instances?status=held&held_at=nope":                   "held_at",
		"/api/v1/occurrences?definition=add_company_to_cm":             "definition",
		"/api/v1/occurrences?definition=add_company_to_crm&revision=7": "revision",
		"/api/v1/occurrences?process=chekout":                          "process",
		"/api/v1/occurrences?consumer=999":                             "consumer",
		"/api/v1/occurrences?destination=nope":                         "destination",
	} {
		r := env.Do("GET", path, env.Operator, nil)
		if r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"path":"`+param+`"`) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, r.Status, r.Body, param)
		}
	}
	// With the key it is likely a typo of, and, for held_at, what it
	// takes when nothing is close (a node's name, most likely).
	for path, want := range map[string]string{
		"/api/v1/instances?process=crm_onyl":               `no process has the key \"crm_onyl\" (did you mean \"crm_only\"?)`,
		"/api/v1/instances?held_at=add_company_to_cmr":     `(did you mean \"add_company_to_crm\"?)`,
		"/api/v1/occurrences?definition=add_company_to_cm": `(did you mean \"add_company_to_crm\"?)`,
		"/api/v1/instances?status=hled":                    `(did you mean \"held\"?)`,
		"/api/v1/occurrences?status=held":                  `held is an instance's status (GET /instances?status=held)`,
		"/api/v1/occurrences?status=faild":                 `(did you mean \"failed\"?)`,
		"/api/v1/instances?status=held&held_at=check":      `held_at takes a definition's key: the one the node an instance is held at runs, not the node's name`,
	} {
		if r := env.Do("GET", path, env.Operator, nil); r.Status != 400 || !strings.Contains(string(r.Body), want) {
			t.Errorf("GET %s: %d %s, want %s", path, r.Status, r.Body, want)
		}
	}
	for _, path := range []string{"/api/v1/instances?process=crm_only&version=1&held_at=add_company_to_crm",
		"/api/v1/occurrences?definition=add_company_to_crm&revision=1&process=crm_only"} {
		env.Must(200, "GET", path, env.Operator, nil)
	}
}

func TestNotFoundMentionsRetention(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, path := range []string{"/api/v1/instances/01a23630-91c6-71af-a05d-6fe7140276a7", "/api/v1/occurrences/01a23630-91c6-71af-a05d-6fe7140276a7"} {
		r := env.Must(404, "GET", path, env.Operator, nil)
		if r.Code() != "not_found" || !strings.Contains(string(r.Body), "retention deleted it") {
			t.Errorf("GET %s: %s, want not_found saying retention may have deleted it", path, r.Body)
		}
	}
}
