package api_test

import (
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// TestEveryRouteNeedsAToken: DESIGN §9 puts every /api/v1 route behind a
// bearer token, so a request without one (or with an unknown one) is 401
// whatever it asks, including writes to immutable resources and methods or
// paths no route serves; only an authenticated caller learns that a
// revision is immutable (405) or that a route does not exist.
func TestEveryRouteNeedsAToken(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("score_company.yaml")
	base := "/api/v1/definitions/" + key
	env.Must(201, "POST", base+"/releases", env.Designer, map[string]any{"name": "r1", "revision": 1})
	env.Process("end_only", map[string]any{
		"inputs": map[string]any{"fields": []any{}},
		"start":  "done",
		"nodes":  map[string]any{"done": map[string]any{"kind": "end"}},
	})

	allowOf := map[string]string{
		base + "/revisions/1":                                    "GET, HEAD",
		base + "/releases/r1":                                    "GET, HEAD",
		"/api/v1/processes/end_only/versions/1":                  "GET, HEAD",
		base + "/working":                                        "PUT",
		"/api/v1/instances/0190b5a0-0000-7000-8000-000000000000": "GET, HEAD",
		"/api/v1/instances/actions":                              "POST",
	}
	for _, c := range []struct {
		method, path  string
		status        int
		code          string
		authenticated string
	}{
		{"GET", "/api/v1/instances/actions", 405, "method_not_allowed", env.Operator},
		{"PUT", base + "/revisions/1", 405, "immutable", env.Operator},
		{"PATCH", base + "/revisions/1", 405, "immutable", env.Designer},
		{"DELETE", base + "/revisions/1", 405, "immutable", env.Admin},
		{"POST", base + "/revisions/1", 405, "immutable", env.Designer},
		{"PUT", base + "/releases/r1", 405, "immutable", env.Designer},
		{"DELETE", base + "/releases/r1", 405, "immutable", env.Operator},
		{"PATCH", base + "/releases/r1", 405, "immutable", env.Operator},
		{"POST", base + "/releases/r1", 405, "immutable", env.Designer},
		{"PUT", "/api/v1/processes/end_only/versions/1", 405, "immutable", env.Designer},
		{"DELETE", "/api/v1/processes/end_only/versions/1", 405, "immutable", env.Operator},
		{"PATCH", "/api/v1/processes/end_only/versions/1", 405, "immutable", env.Operator},
		{"POST", "/api/v1/processes/end_only/versions/1", 405, "immutable", env.Designer},
		{"PATCH", base + "/working", 405, "method_not_allowed", env.Designer},
		{"DELETE", "/api/v1/instances/0190b5a0-0000-7000-8000-000000000000", 405, "method_not_allowed", env.Operator},
		{"GET", "/api/v1/no-such-route", 404, "not_found", env.Operator},
	} {
		for _, anonymous := range []string{"", "rls_not-a-token"} {
			r := env.Do(c.method, c.path, anonymous, `{}`)
			if r.Status != 401 || r.Code() != "unauthorized" || r.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s with token %q: %d %s %s; want 401 unauthorized problem+json", c.method, c.path, anonymous, r.Status, r.Header.Get("Content-Type"), r.Body)
			}
		}
		r := env.Do(c.method, c.path, c.authenticated, `{}`)
		if r.Status != c.status || r.Code() != c.code {
			t.Errorf("%s %s with a valid token: %d %s; want %d %s", c.method, c.path, r.Status, r.Body, c.status, c.code)
		}
		// A 405 lists what the route serves, never a method that is itself
		// refused (an immutable resource's writes).
		if want := allowOf[c.path]; c.status == 405 && r.Header.Get("Allow") != want {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, r.Header.Get("Allow"), want)
		}
	}
}
