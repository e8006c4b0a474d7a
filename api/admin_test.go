package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// Staff tokens: admin creates them (shown once), they work at once with
// their role, and whoami tells each caller who it is; consumer tokens are
// made under /consumers only.
func TestTokensAndWhoami(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for token, role := range map[string]string{env.Admin: "admin", env.Designer: "designer", env.Operator: "operator"} {
		if got := env.Must(200, "GET", "/api/v1/whoami", token, nil).JSON(t); got["role"] != role {
			t.Errorf("whoami = %v, want role %s", got, role)
		}
	}
	created := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "night-shift", "role": "operator", "expires_in": "P1D"}).JSON(t)
	token, _ := created["token"].(string)
	// Its id and expiry too: a pipeline revokes its own token after
	// rotating it, and warns before it expires.
	if who := env.Must(200, "GET", "/api/v1/whoami", token, nil).JSON(t); who["name"] != "night-shift" || who["role"] != "operator" ||
		who["token_id"] != created["id"] || who["expires_at"] == nil || who["expires_at"] != created["expires_at"] {
		t.Errorf("the new token is %v, want night-shift, operator, token_id %v, expires_at %v", who, created["id"], created["expires_at"])
	}
	if who := env.Must(200, "GET", "/api/v1/whoami", env.Admin, nil).JSON(t); who["expires_at"] != nil || who["token_id"] == nil {
		t.Errorf("a token without expiry: whoami %v, want its id and expires_at null", who)
	}
	if r := env.Do("POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "x", "role": "consumer"}); r.Status != 400 {
		t.Errorf("a consumer token from /tokens: %d, want 400", r.Status)
	}
	if r := env.Do("POST", "/api/v1/tokens", env.Operator, map[string]any{"name": "x", "role": "admin"}); r.Status != 403 {
		t.Errorf("an operator creating a token: %d, want 403", r.Status)
	}
}

// Consumers: read one, replace its grants (which apply at once), rotate
// its token (the old one is refused at once).
func TestConsumerGrantsAndRotation(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("score_company.yaml")
	res0 := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "scorer", "grants": []any{}})
	res := res0.JSON(t)
	id, old := res["id"], res["token"].(string)
	path := fmt.Sprintf("/api/v1/consumers/%v", id)
	// Every problem at once: the name and the grants.
	bad := env.Do("POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "", "grants": []any{map[string]any{"definition": "Bad"}}})
	if bad.Status != 400 || !strings.Contains(string(bad.Body), `"path":"/name"`) || !strings.Contains(string(bad.Body), `"path":"/grants/0/definition"`) {
		t.Errorf("a consumer with no name and a malformed grant: %d %s; want 400 at /name and /grants/0/definition", bad.Status, bad.Body)
	}
	// Created again (automation run twice): which one exists, and how to
	// get a token for it.
	again := env.Do("POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "scorer", "grants": []any{}})
	if again.Status != 409 || again.Code() != "consumer_exists" || again.JSON(t)["id"] != id || !strings.Contains(string(again.Body), "rotating it gives it a new token (POST /api/v1/consumers/") || !strings.Contains(string(again.Body), "relais consumer rotate") {
		t.Errorf("a second consumer named scorer: %d %s; want 409 consumer_exists with its id and the rotate route", again.Status, again.Body)
	}
	if c := env.Must(200, "GET", path, env.Admin, nil).JSON(t); c["name"] != "scorer" || len(c["grants"].([]any)) != 0 || c["token"] != nil {
		t.Errorf("GET consumer = %v, want scorer without grants or token", c)
	}
	schema := "/api/v1/definitions/" + key + "/revisions/1/schemas/inputs"
	if r := env.Do("GET", schema, old, nil); r.Status != 404 {
		t.Fatalf("an ungranted consumer reads a schema: %d, want 404", r.Status)
	}
	c := env.Must(200, "PUT", path+"/grants", env.Admin, map[string]any{"grants": []any{map[string]any{"definition": key, "revisions": []int{1}}}}).JSON(t)
	if g := c["grants"].([]any); len(g) != 1 {
		t.Fatalf("grants = %v, want one", g)
	}
	// No answer is stored on the way (a token shown once, secrets in
	// clear), but a revision's schema, which never changes.
	if r := env.Must(200, "GET", schema, old, nil); r.Header.Get("Cache-Control") != "private, max-age=31536000, immutable" {
		t.Errorf("a schema's Cache-Control = %q, want it kept for good", r.Header.Get("Cache-Control"))
	}
	rotated := env.Must(200, "POST", path+"/rotate", env.Admin, nil)
	current := rotated.JSON(t)["token"].(string)
	for _, r := range []relaistest.Response{res0, rotated, env.Do("POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "ops", "role": "operator"}),
		env.Do("POST", "/api/v1/pull/fetch-and-lock", current, map[string]any{"worker_id": "w", "subscriptions": []any{map[string]any{"definition": key}}}),
		env.Do("POST", "/engine-rest/external-task/fetchAndLock", current, map[string]any{"workerId": "w", "maxTasks": 1, "topics": []any{map[string]any{"topicName": key, "lockDuration": 1000}}}),
		env.Do("GET", "/api/v1/nowhere", current, nil)} {
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%d %.100s: Cache-Control %q, want no-store", r.Status, r.Body, got)
		}
	}
	rot := rotated.JSON(t)
	fresh, _ := rot["token"].(string)
	if r := env.Do("GET", schema, old, nil); r.Status != 401 {
		t.Errorf("the rotated-out token: %d, want 401", r.Status)
	}
	env.Must(200, "GET", schema, fresh, nil)
	if r := env.Do("GET", "/api/v1/consumers/999999", env.Admin, nil); r.Status != 404 {
		t.Errorf("an unknown consumer: %d, want 404", r.Status)
	}
}

// Destinations: put (created, unchanged, dry run), read (header names,
// never values), list, delete.
func TestDestinations(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	body := map[string]any{"url": "https://scoring.example/score", "headers": map[string]any{"Authorization": "Bearer s3cret-value"}, "max_timeout": "PT5S"}
	if d := env.Must(201, "PUT", "/api/v1/destinations/scoring", env.Admin, body).JSON(t); d["change"] != "created" {
		t.Errorf("first put: %v, want created", d["change"])
	}
	if d := env.Must(200, "PUT", "/api/v1/destinations/scoring", env.Admin, body).JSON(t); d["change"] != "unchanged" {
		t.Errorf("same put: %v, want unchanged", d["change"])
	}
	body["max_timeout"] = "PT3S"
	// A dry run shows what the put would store, and stores nothing.
	dry := env.Must(200, "PUT", "/api/v1/destinations/scoring?dry_run=true", env.Admin, body)
	if d := dry.JSON(t); d["change"] != "updated" || d["max_timeout"] != "PT3S" || dry.Header.Get("Relais-Applied") != "false" {
		t.Errorf("dry run: %v (Relais-Applied %q), want updated to PT3S, not applied", d, dry.Header.Get("Relais-Applied"))
	}
	// Its times at a stored put's precision, microseconds (API client QA).
	if at, err := time.Parse(time.RFC3339Nano, dry.JSON(t)["updated_at"].(string)); err != nil || at.Nanosecond()%1000 != 0 {
		t.Errorf("dry run updated_at %v (%v), want microseconds at most", dry.JSON(t)["updated_at"], err)
	}
	got := env.Must(200, "GET", "/api/v1/destinations/scoring", env.Admin, nil)
	if got.JSON(t)["max_timeout"] != "PT5S" {
		t.Errorf("after the dry run: %s, want PT5S still", got.Body)
	}
	if strings.Contains(string(got.Body), "s3cret") || fmt.Sprint(got.JSON(t)["header_names"]) != "[Authorization]" {
		t.Errorf("GET destination = %s, want header names only", got.Body)
	}
	list := env.Must(200, "GET", "/api/v1/destinations", env.Admin, nil).JSON(t)
	if items := list["items"].([]any); len(items) != 1 {
		t.Errorf("list = %v, want one destination", items)
	}
	env.Must(204, "DELETE", "/api/v1/destinations/scoring", env.Admin, nil)
	if r := env.Do("GET", "/api/v1/destinations/scoring", env.Admin, nil); r.Status != 404 {
		t.Errorf("after delete: %d, want 404", r.Status)
	}
	if r := env.Do("GET", "/api/v1/destinations", env.Operator, nil); r.Status != 403 {
		t.Errorf("an operator lists destinations: %d, want 403", r.Status)
	}
}

// The OpenAPI document is served as JSON to any token holder, and like
// every /api/v1 route it needs one.
func TestOpenAPIDocumentIsServed(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	if r := env.Do("GET", "/api/v1/openapi.json", "", nil); r.Status != 401 {
		t.Errorf("without a token: %d, want 401", r.Status)
	}
	consumer := env.Consumer("reader")
	res := env.Must(200, "GET", "/api/v1/openapi.json", consumer, nil)
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(res.Body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/v1/openapi.json", "/api/v1/pull/fetch-and-lock", "/engine-rest/external-task/fetchAndLock"} {
		if doc.Paths[p] == nil {
			t.Errorf("the document lacks %s", p)
		}
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
}

// Processes are listed and read with their versions; a release is read
// by name.
func TestProcessesAndReleasesAreRead(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("score_company.yaml")
	env.Must(201, "POST", "/api/v1/definitions/"+key+"/releases", env.Designer, map[string]any{"name": "2026.12", "revision": 1, "notes": "first"})
	if rel := env.Must(200, "GET", "/api/v1/definitions/"+key+"/releases/2026.12", env.Operator, nil).JSON(t); rel["revision"] != 1.0 || rel["notes"] != "first" {
		t.Errorf("release = %v", rel)
	}
	env.Process("end_only", map[string]any{
		"inputs": map[string]any{"fields": []any{}},
		"start":  "done",
		"nodes":  map[string]any{"done": map[string]any{"kind": "end"}},
	})
	list := env.Must(200, "GET", "/api/v1/processes", env.Operator, nil).JSON(t)
	if items := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["latest_version"] != 1.0 {
		t.Errorf("processes = %v", items)
	}
	p := env.Must(200, "GET", "/api/v1/processes/end_only", env.Designer, nil).JSON(t)
	if vs := p["versions"].([]any); len(vs) != 1 {
		t.Errorf("versions = %v", vs)
	}
}

// The probes and the metrics need no token (a load balancer, an
// orchestrator and Prometheus have none), and answer what the OpenAPI
// document says.
func TestProbesAndMetricsNeedNoToken(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	if got := env.Must(200, "GET", "/healthz", "", nil).JSON(t); got["status"] != "ok" {
		t.Errorf("healthz: %v", got)
	}
	if got := env.Must(200, "GET", "/readyz", "", nil).JSON(t); got["status"] != "ready" || got["schema_version"] != got["expected_schema_version"] {
		t.Errorf("readyz: %v, want ready at the expected schema version", got)
	}
	if body := string(env.Must(200, "GET", "/metrics", "", nil).Body); !strings.Contains(body, "relais_database_up") {
		t.Errorf("metrics without relais_database_up: %.200s", body)
	}
}
