package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// TestFreeTextBounds: every free-text field has a documented maximum; a
// value above it is refused naming the field (400 for request fields, 422
// invalid_contract or invalid_process inside documents), never a 500 (a
// 2.7 KB business_key or consumer name used to break a btree index), and
// a value at the maximum is accepted.
func TestFreeTextBounds(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_flow", relaistest.CRMProcess(nil))
	working := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{}
		for kk, vv := range m {
			out[kk] = vv
		}
		out[k] = v
		return out
	}
	huge := strings.Repeat("x", 2700)
	start := func(bk string) map[string]any {
		return map[string]any{"business_key": bk, "inputs": map[string]any{"name": "Acme"}}
	}
	for _, c := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		pointer                   string
	}{
		{"business key", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start(huge), 400, "/business_key"},
		{"business key at its maximum", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start(strings.Repeat("b", 200)), 201, ""},
		// Stored as sent, these could never be filtered on.
		{"empty business key", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start(""), 400, "/business_key"},
		{"blank business key", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start(" \t "), 400, "/business_key"},
		{"business key with a trailing space", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start("acme "), 400, "/business_key"},
		{"business key with a byte order mark", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start("\ufeffacme"), 400, "/business_key"},
		{"business key with a control character", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start("a\u0007b"), 400, "/business_key"},
		{"business key with accents", "POST", "/api/v1/processes/crm_flow/instances", env.Operator, start("société-générale"), 201, ""},
		{"consumer name", "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": huge, "grants": []any{}}, 400, "/name"},
		{"consumer name at its maximum", "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": strings.Repeat("c", 200), "grants": []any{}}, 201, ""},
		{"token name", "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": huge, "role": "operator"}, 400, "/name"},
		// Read as an actor in the audit log and filtered by exactly, or
		// listed in the worker catalog: a name nobody could read or type
		// again names nobody.
		{"blank consumer name", "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "  ", "grants": []any{}}, 400, "/name"},
		{"consumer name with a line break and a direction mark", "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "evil\nname\u202e", "grants": []any{}}, 400, "/name"},
		{"consumer name with a trailing space", "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm ", "grants": []any{}}, 400, "/name"},
		{"token name with a bell and a tab", "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "ops\u0007\t", "role": "operator"}, 400, "/name"},
		{"token name with a line separator", "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "ab\u2028c", "role": "operator"}, 400, "/name"},
		{"consumer name with a paragraph separator", "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "ab\u2029c", "grants": []any{}}, 400, "/name"},
		{"token name with accents and spaces", "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "équipe de nuit", "role": "operator"}, 201, ""},
		{"release notes", "POST", "/api/v1/definitions/" + key + "/releases", env.Designer, map[string]any{"name": "r1", "revision": 1, "notes": strings.Repeat("n", 10_001)}, 400, "/notes"},
		{"release name", "POST", "/api/v1/definitions/" + key + "/releases", env.Designer, map[string]any{"name": huge, "revision": 1}, 400, "/name"},
		{"destination url", "PUT", "/api/v1/destinations/d1", env.Admin, map[string]any{"url": "https://x.example/" + strings.Repeat("p", 2048), "max_timeout": "PT1S"}, 400, "/url"},
		{"destination max_timeout under the floor", "PUT", "/api/v1/destinations/d1", env.Admin, map[string]any{"url": "https://x.example/", "max_timeout": "PT0.001S"}, 400, "/max_timeout"},
		{"destination header value", "PUT", "/api/v1/destinations/d1", env.Admin, map[string]any{"url": "https://x.example/", "max_timeout": "PT1S",
			"headers": map[string]string{"X-Key": strings.Repeat("k", 8193)}}, 400, "/headers/X-Key"},
		{"destination header name", "PUT", "/api/v1/destinations/d1", env.Admin, map[string]any{"url": "https://x.example/", "max_timeout": "PT1S",
			"headers": map[string]string{"X-" + strings.Repeat("n", 199): "v"}}, 400, "/headers/X-" + strings.Repeat("n", 199)},
		{"destination header name with a slash", "PUT", "/api/v1/destinations/d1", env.Admin, map[string]any{"url": "https://x.example/", "max_timeout": "PT1S",
			"headers": map[string]string{"X/Y": "v"}}, 400, "/headers/X~1Y"},
		{"definition name", "PUT", "/api/v1/definitions/bounded/working", env.Designer, with(working, "name", huge), 422, "/name"},
		{"definition description", "PUT", "/api/v1/definitions/bounded/working", env.Designer, with(working, "description", strings.Repeat("d", 10_001)), 422, "/description"},
		{"process name", "POST", "/api/v1/processes/bounded/versions", env.Designer, with(relaistest.CRMProcess(nil), "name", huge), 422, "/name"},
		{"worker id", "POST", "/api/v1/pull/fetch-and-lock", env.Consumer("c1", key), map[string]any{"worker_id": huge,
			"subscriptions": []any{map[string]any{"definition": key}}}, 400, "/worker_id"},
		{"grant of a revision that does not exist", "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "c2",
			"grants": []any{map[string]any{"definition": key, "revisions": []int{1, 7}}}}, 422, "/grants/0/revisions/1"},
	} {
		r := env.Do(c.method, c.path, c.token, c.body)
		if r.Status != c.status {
			t.Errorf("%s: %d %.300s; want %d", c.name, r.Status, r.Body, c.status)
			continue
		}
		if c.pointer == "" {
			continue
		}
		found := false
		for _, e := range r.JSON(t)["errors"].([]any) {
			found = found || e.(map[string]any)["path"] == c.pointer
		}
		if !found {
			t.Errorf("%s: %s; want an error at %s", c.name, r.Body, c.pointer)
		}
	}

	batch := env.Do("POST", "/api/v1/processes/crm_flow/instances/batch", env.Operator, map[string]any{"items": []any{start("")}})
	if !strings.Contains(string(batch.Body), `"status":400`) || !strings.Contains(string(batch.Body), `"/items/0/business_key"`) {
		t.Errorf("a batch item with an empty business key: %d %s; want its problem at /items/0/business_key", batch.Status, batch.Body)
	}

	for _, h := range [][]string{{strings.Repeat("i", 201)}, {"k\xff"}, {""}, {"  "}, {"k-a", "k-b"}} {
		var headers []string
		for _, v := range h {
			headers = append(headers, "Idempotency-Key", v)
		}
		r := env.Do("POST", "/api/v1/processes/crm_flow/instances", env.Operator, start("ok"), headers...)
		if r.Status != 400 || r.Code() != "invalid_request" {
			t.Errorf("Idempotency-Key %.20q: %d %s; want 400", h, r.Status, r.Body)
		}
	}
	if r := env.Do("POST", "/api/v1/processes/crm_flow/instances/batch", env.Operator, map[string]any{"items": []any{
		map[string]any{"idempotency_key": "", "inputs": map[string]any{"name": "a"}}}}); r.Status != 400 || !strings.Contains(string(r.Body), "/items/0/idempotency_key") {
		t.Errorf("a batch item's empty idempotency_key: %d %s; want 400 at /items/0/idempotency_key", r.Status, r.Body)
	}
	for _, path := range []string{"/api/v1/instances?business_key=%FF", "/api/v1/definitions/%FF%FE", "/api/v1/occurrences?definition=a%C3"} {
		if r := env.Do("GET", path, env.Operator, nil); r.Status != 400 || r.Code() != "invalid_request" {
			t.Errorf("GET %s: %d %s; want 400 invalid_request", path, r.Status, r.Body)
		}
	}
}

// TestNothingAskedIsIgnored: a query parameter on a route that reads none,
// or an Idempotency-Key on a write that does not honour it, is refused at
// its name, never ignored: ?version=2 on a start would otherwise start the
// latest version, and a retried token creation would make two tokens.
func TestNothingAskedIsIgnored(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_flow", relaistest.CRMProcess(nil))
	start := map[string]any{"inputs": map[string]any{"name": "Acme"}}
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	for _, c := range []struct {
		method, path, token string
		body                any
		header              []string
		at                  string
	}{
		{"POST", "/api/v1/processes/crm_flow/instances?version=99", env.Operator, start, nil, "version"},
		{"GET", "/api/v1/definitions/add_company_to_crm?foo=1", env.Designer, nil, nil, "foo"},
		{"POST", "/api/v1/pull/fetch-and-lock?max_tasks=5", consumer, map[string]any{}, nil, "max_tasks"},
		{"POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}, []string{"Idempotency-Key", "k-0"}, "Idempotency-Key"},
		{"GET", "/api/v1/whoami?as=admin", env.Operator, nil, nil, "as"},
		{"POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "ci", "role": "operator"}, []string{"Idempotency-Key", "k-1"}, "Idempotency-Key"},
		{"POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "c", "grants": []any{}}, []string{"Idempotency-Key", "k-2"}, "Idempotency-Key"},
	} {
		r := env.Do(c.method, c.path, c.token, c.body, c.header...)
		if r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"path":"`+c.at+`"`) {
			t.Errorf("%s %s: %d %s; want 400 at %s", c.method, c.path, r.Status, r.Body, c.at)
		}
	}
	if n := len(env.Must(200, "GET", "/api/v1/instances", env.Operator, nil).JSON(t)["items"].([]any)); n != 0 {
		t.Errorf("a refused start started %d instances", n)
	}
	// Where they are read, they still work.
	if r := env.Do("POST", "/api/v1/processes/crm_flow/instances", env.Operator, start, "Idempotency-Key", "k-3"); r.Status != 201 {
		t.Errorf("a start with its Idempotency-Key: %d %s", r.Status, r.Body)
	}
	env.Must(200, "GET", "/api/v1/instances?status=running&limit=5", env.Operator, nil)
}

// TestCreationsSayWhere: every 201 names what it created in Location,
// which a GET then reads.
func TestCreationsSayWhere(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	working := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	for _, c := range []struct {
		method, path, token string
		body                any
	}{
		{"PUT", "/api/v1/definitions/crm.located/working", env.Designer, working},
		{"POST", "/api/v1/definitions/crm.located/revisions", env.Designer, nil},
		{"POST", "/api/v1/definitions/crm.located/releases", env.Designer, map[string]any{"name": "2026.12", "revision": 1}},
		{"POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "located", "grants": []any{}}},
		{"PUT", "/api/v1/destinations/located", env.Admin, map[string]any{"url": "https://scoring.example/v1", "max_timeout": "PT5S"}},
	} {
		r := env.Do(c.method, c.path, c.token, c.body)
		where := r.Header.Get("Location")
		if r.Status != 201 || where == "" {
			t.Errorf("%s %s: %d, Location %q; want 201 with a Location", c.method, c.path, r.Status, where)
			continue
		}
		env.Must(200, "GET", where, env.Admin, nil)
	}
	env.Definition("add_company_to_crm.yaml")
	if r := env.Do("POST", "/api/v1/processes/located/versions", env.Designer, relaistest.CRMProcess(nil)); r.Status != 201 || r.Header.Get("Location") != "/api/v1/processes/located/versions/1" {
		t.Errorf("a process version: %d, Location %q", r.Status, r.Header.Get("Location"))
	}
	r := env.Do("POST", "/api/v1/processes/located/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	if r.Status != 201 || r.Header.Get("Location") != "/api/v1/instances/"+r.JSON(t)["id"].(string) {
		t.Errorf("a start: %d, Location %q", r.Status, r.Header.Get("Location"))
	}
}

// A write that takes no body refuses one, as any route refuses a body's
// unknown members: its client would believe it was read.
func TestBodilessWritesRefuseABody(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	c := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "c", "grants": []any{}}).JSON(t)
	for _, route := range [][2]string{
		{"POST", "/api/v1/definitions/add_company_to_crm/revisions"},
		{"DELETE", fmt.Sprintf("/api/v1/consumers/%v", c["id"])},
		{"DELETE", "/api/v1/destinations/nope"},
		{"DELETE", "/api/v1/tokens/1"},
	} {
		for body, code := range map[string]string{`{"revision":5}`: "unknown_field", `[1]`: "invalid_json"} {
			r := env.Do(route[0], route[1], env.Admin, json.RawMessage(body))
			if route[0] == "POST" {
				r = env.Do(route[0], route[1], env.Designer, json.RawMessage(body))
			}
			if r.Status != 400 || r.Code() != code {
				t.Errorf("%s %s with %s: %d %s, want 400 %s", route[0], route[1], body, r.Status, r.Body, code)
			}
		}
	}
	// Nothing was done: the consumer is still there, and a snapshot with
	// no body (or a blank one) still works.
	env.Must(200, "GET", fmt.Sprintf("/api/v1/consumers/%v", c["id"]), env.Admin, nil)
	env.Must(200, "POST", "/api/v1/definitions/add_company_to_crm/revisions", env.Designer, nil)
}

// PUT .../grants replaces the grants with the list sent: an absent list is
// refused rather than read as empty (which withdraws every grant), and a
// revision listed twice is refused at its pointer.
func TestGrantsAreSentWhole(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	c := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "c",
		"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": "all"}}}).JSON(t)
	path := fmt.Sprintf("/api/v1/consumers/%v/grants", c["id"])
	for _, body := range []string{`{}`, `{"grants":null}`} {
		if r := env.Do("PUT", path, env.Admin, json.RawMessage(body)); r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"/grants"`) {
			t.Errorf("grants %s: %d %s, want 400 at /grants", body, r.Status, r.Body)
		}
	}
	r := env.Do("PUT", path, env.Admin, map[string]any{"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": []int{1, 1}}}})
	if r.Status != 422 || r.Code() != "invalid_grants" || !strings.Contains(string(r.Body), `/grants/0/revisions/1`) {
		t.Errorf("a revision listed twice: %d %s, want 422 invalid_grants at /grants/0/revisions/1", r.Status, r.Body)
	}
	// A misspelt key is told the one it may mean, as a fetch's is.
	r = env.Do("PUT", path, env.Admin, map[string]any{"grants": []any{map[string]any{"definition": "add_company_to_cmr"}}})
	if r.Status != 422 || !strings.Contains(string(r.Body), `unknown definition \"add_company_to_cmr\" (did you mean \"add_company_to_crm\"?)`) {
		t.Errorf("a misspelt grant: %d %s, want 422 suggesting add_company_to_crm", r.Status, r.Body)
	}
	got := env.Must(200, "GET", fmt.Sprintf("/api/v1/consumers/%v", c["id"]), env.Admin, nil).JSON(t)
	if gs, _ := got["grants"].([]any); len(gs) != 1 {
		t.Errorf("grants after refused changes: %v, want the one granted", got["grants"])
	}
	env.Must(200, "PUT", path, env.Admin, map[string]any{"grants": []any{}})
}

// A compressed body is refused as such, not as JSON with an invalid
// character.
func TestCompressedBodyIsRefusedAsSuch(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	r := env.Do("POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "c", "grants": []any{}}, "Content-Encoding", "gzip")
	if r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"path":"Content-Encoding"`) {
		t.Errorf("a gzip body: %d %s, want 400 invalid_request at Content-Encoding", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "c", "grants": []any{}}, "Content-Encoding", "identity"); r.Status != 201 {
		t.Errorf("an identity body: %d %s, want 201", r.Status, r.Body)
	}
}

// An empty filter is refused rather than ignored: ?status= (an unset
// variable) would list every status. An empty cursor is the first page.
func TestEmptyFiltersAreRefused(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, path := range []string{"/api/v1/instances?status=", "/api/v1/occurrences?definition=", "/api/v1/instances?status=running&business_key="} {
		if r := env.Do("GET", path, env.Operator, nil); r.Status != 400 || r.Code() != "invalid_request" || !strings.Contains(string(r.Body), "is empty") {
			t.Errorf("GET %s: %d %s, want 400 naming the empty parameter", path, r.Status, r.Body)
		}
	}
	env.Must(200, "GET", "/api/v1/instances?cursor=&limit=5", env.Operator, nil)
}
