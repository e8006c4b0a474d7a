package openapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relais/relais/api/openapi"
)

// document is the served document, decoded.
func document(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// at follows the JSON pointer p (components/schemas/Consumer) in doc,
// resolving every $ref met on the way and at the end; nil when there is
// nothing there.
func at(doc map[string]any, p string) map[string]any {
	var v any = doc
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		m := resolve(doc, v)
		if m == nil {
			return nil
		}
		v = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	return resolve(doc, v)
}

// resolve is v as an object, its $ref followed (within the document).
func resolve(doc map[string]any, v any) map[string]any {
	m, _ := v.(map[string]any)
	for range 10 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		m = at(doc, strings.TrimPrefix(ref, "#/"))
	}
	return nil
}

// pathKey escapes a path for a JSON pointer.
func pathKey(path string) string {
	return strings.ReplaceAll(strings.ReplaceAll(path, "~", "~0"), "/", "~1")
}

// parameter is the schema of the parameter name (in: where) of method on
// path, declared on the operation or on its path.
func parameter(doc map[string]any, path, method, where, name string) map[string]any {
	item := at(doc, "paths/"+pathKey(path))
	op := resolve(doc, item[method])
	for _, list := range []any{op["parameters"], item["parameters"]} {
		params, _ := list.([]any)
		for _, p := range params {
			p := resolve(doc, p)
			if p["name"] == name && p["in"] == where {
				return resolve(doc, p["schema"])
			}
		}
	}
	return nil
}

// An id a client reads in a body is the id it puts in a path or a filter:
// a generated client types both from the document, and a consumer's id
// that is a number in Consumer but a string in /consumers/{id} must be
// converted by hand at every call.
func TestIDsAreTypedAlike(t *testing.T) {
	t.Parallel()
	doc := document(t)
	type param struct{ path, method, in, name string }
	for _, c := range []struct {
		body   string // pointer to the member bodies carry
		params []param
	}{
		{"components/schemas/Consumer/properties/id", []param{
			{"/api/v1/consumers/{id}", "get", "path", "id"},
			{"/api/v1/consumers/{id}", "delete", "path", "id"},
			{"/api/v1/consumers/{id}/grants", "put", "path", "id"},
			{"/api/v1/consumers/{id}/rotate", "post", "path", "id"},
			{"/api/v1/occurrences", "get", "query", "consumer"},
		}},
		{"components/schemas/StaffToken/properties/id", []param{
			{"/api/v1/tokens/{id}", "delete", "path", "id"},
		}},
		{"components/schemas/Release/properties/revision", []param{
			{"/api/v1/definitions/{key}/revisions/{n}", "get", "path", "n"},
			{"/api/v1/definitions/{key}/revisions/{n}/schemas/inputs", "get", "path", "n"},
			{"/api/v1/definitions/{key}/revisions/{n}/schemas/outputs", "get", "path", "n"},
			{"/api/v1/definitions/{key}/revisions/{a}/diff/{b}", "get", "path", "a"},
			{"/api/v1/definitions/{key}/revisions/{a}/diff/{b}", "get", "path", "b"},
			{"/api/v1/occurrences", "get", "query", "revision"},
		}},
		{"components/schemas/ProcessVersion/properties/version", []param{
			{"/api/v1/processes/{key}/versions/{v}", "get", "path", "v"},
			{"/api/v1/instances", "get", "query", "version"},
		}},
	} {
		want := at(doc, c.body)["type"]
		if want == nil {
			t.Fatalf("%s has no type", c.body)
		}
		for _, p := range c.params {
			s := parameter(doc, p.path, p.method, p.in, p.name)
			if s == nil {
				t.Errorf("%s %s has no %s parameter %s", p.method, p.path, p.in, p.name)
				continue
			}
			if s["type"] != want {
				t.Errorf("%s %s: the %s parameter %s is typed %v, but %s is %v", p.method, p.path, p.in, p.name, s["type"], c.body, want)
			}
		}
	}
}

// A generator takes the document's servers for the client's base URL (one
// without makes it guess, http://localhost): the document names the server
// that serves it, by a URL relative to it. Every tag an operation has is
// declared, and the document's own route is no token's business.
func TestServersAndTags(t *testing.T) {
	t.Parallel()
	doc := document(t)
	servers, _ := doc["servers"].([]any)
	if len(servers) == 0 {
		t.Error("the document has no servers")
	}
	for _, s := range servers {
		if u, _ := resolve(doc, s)["url"].(string); !strings.HasPrefix(u, "/") {
			t.Errorf("server %q: want a URL relative to the server that serves the document", u)
		}
	}
	declared := map[string]bool{}
	tags, _ := doc["tags"].([]any)
	for _, tag := range tags {
		declared[resolve(doc, tag)["name"].(string)] = true
	}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			op, _ := op.(map[string]any)
			if method == "parameters" || op == nil {
				continue
			}
			tags, _ := op["tags"].([]any)
			if len(tags) == 0 {
				t.Errorf("%s %s has no tag", method, path)
			}
			for _, tag := range tags {
				if !declared[tag.(string)] {
					t.Errorf("%s %s: tag %v is not declared", method, path, tag)
				}
			}
		}
	}
	if tags := at(doc, "paths/"+pathKey("/api/v1/openapi.json")+"/get")["tags"]; len(tags.([]any)) != 1 || tags.([]any)[0] != "meta" {
		t.Errorf("GET /api/v1/openapi.json is tagged %v, want [meta]", tags)
	}
}

// responses calls f with every response of every operation, its $ref
// followed.
func responses(doc map[string]any, f func(where, status string, op, response map[string]any)) {
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		item, _ := item.(map[string]any)
		for method, op := range item {
			op, _ := op.(map[string]any)
			if method == "parameters" || op == nil {
				continue
			}
			rs, _ := op["responses"].(map[string]any)
			for status, r := range rs {
				f(strings.ToUpper(method)+" "+path, status, op, resolve(doc, r))
			}
		}
	}
}

// noLocation are the operations whose 201 names no resource: it has no
// URL of its own.
var noLocation = map[string]string{
	"createToken":      "a staff token is listed and revoked, never read alone",
	"issueSettleToken": "a settle token is shown once and read nowhere",
}

// optionalLocation are the operations whose 201 names its resource but
// for a dry run, which answers 201 as the write would and created nothing.
var optionalLocation = map[string]bool{"putWorking": true}

// Every answer carries X-Request-Id, and every 201 that creates an
// addressable resource names it in Location: a generated client types only
// the headers its document declares, and one left out is read by hand or
// not at all.
func TestResponsesDocumentTheirHeaders(t *testing.T) {
	t.Parallel()
	doc := document(t)
	n := 0
	responses(doc, func(where, status string, op, r map[string]any) {
		n++
		headers, _ := r["headers"].(map[string]any)
		if rid, _ := headers["X-Request-Id"].(map[string]any); rid["$ref"] != "#/components/headers/XRequestId" {
			t.Errorf("%s %s: no X-Request-Id header (#/components/headers/XRequestId)", where, status)
		}
		if status != "201" {
			if headers["Location"] != nil {
				t.Errorf("%s %s documents a Location: only a 201 has one", where, status)
			}
			return
		}
		id, _ := op["operationId"].(string)
		loc := resolve(doc, headers["Location"])
		switch {
		case noLocation[id] != "":
			if loc != nil {
				t.Errorf("%s 201 documents a Location, which the server never sends (%s)", where, noLocation[id])
			}
		case loc == nil:
			t.Errorf("%s 201 has no Location header", where)
		case loc["required"] == true && optionalLocation[id]:
			t.Errorf("%s 201 requires Location, which a dry run's 201 lacks", where)
		case loc["required"] != true && !optionalLocation[id]:
			t.Errorf("%s 201 does not require Location, which every such answer has", where)
		}
	})
	if n < 300 {
		t.Fatalf("%d responses found: the walk is broken", n)
	}
}

// A success answer the server writes a body for documents it, and a 304
// or 204 documents none: a client generated from the document returned
// nothing for GET /consumers/{id}, whose schema sat under its 304
// (evaluator QA).
func TestBodiesWhereTheServerWritesThem(t *testing.T) {
	t.Parallel()
	doc := document(t)
	responses(doc, func(where, status string, op, r map[string]any) {
		_, has := r["content"]
		switch {
		case status == "304" || status == "204":
			if has {
				t.Errorf("%s %s documents a body, which it never has", where, status)
			}
		case status == "200" && !has:
			t.Errorf("%s 200 documents no body", where)
		}
	})
}
