package api_test

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/internal/relaistest"
)

// hostileBodies are request bodies no write route may answer with a 5xx
// or act on: each must be refused with a 4xx and change nothing.
var hostileBodies = []struct {
	name string
	body string
	want int
}{
	{"oversized", `{"name": "` + strings.Repeat("x", 2<<20) + `"}`, 413},
	{"invalid UTF-8", "{\"name\": \"a\xff\xfeb\", \"url\": \"https://x.example\", \"role\": \"operator\"}", 400},
	{"duplicate key", `{"name": "a", "name": "b", "role": "operator", "role": "admin"}`, 400},
	{"lone surrogate", `{"name": "a\ud800b", "role": "operator"}`, 400},
	{"control character", "{\"name\": \"a\x01b\", \"role\": \"operator\"}", 400},
	{"nested duplicate", `{"inputs": {"company": {"name": "a", "name": "b"}}, "outputs": {"x": 1, "x": 2}, "grants": [{"definition": "a", "definition": "b"}]}`, 400},
}

// databaseState digests every table of the database, so that a test can
// tell whether a request changed anything. last_used_at is left out: it
// records that a token was used, not what the request did.
func databaseState(t *testing.T, env *relaistest.Env) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := env.Pool.Query(ctx, `select tablename from pg_tables where schemaname = 'public' order by tablename`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	state := map[string]string{}
	for _, table := range tables {
		var digest string
		q := `select md5(coalesce(string_agg((to_jsonb(t) - 'last_used_at')::text, ',' order by (to_jsonb(t) - 'last_used_at')::text), '')) from "` + table + `" t`
		if err := env.Pool.QueryRow(ctx, q).Scan(&digest); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		state[table] = digest
	}
	return state
}

// TestHostileBodiesOnEveryWriteRoute walks the router for every write
// route of /api/v1 (pull protocol included), with real resources in its
// path, and sends each hostile body: every answer is a 4xx problem and the
// database is left exactly as it was, never a 5xx.
func TestHostileBodiesOnEveryWriteRoute(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	key := env.Definition("add_company_to_crm.yaml")
	env.Must(201, "POST", "/api/v1/definitions/"+key+"/releases", env.Designer, map[string]any{"name": "r1", "revision": 1})
	env.Process("crm_flow", relaistest.CRMProcess(nil))
	consumerToken := env.Consumer("crm-sync", key)
	consumers := env.Must(200, "GET", "/api/v1/consumers", env.Admin, nil).JSON(t)["items"].([]any)
	consumerID := strconv.Itoa(int(consumers[0].(map[string]any)["id"].(float64)))
	env.Must(201, "PUT", "/api/v1/destinations/scoring", env.Admin, map[string]any{"url": "https://scoring.example/v1?key=abcd", "max_timeout": "PT5S"})
	instance := env.Must(201, "POST", "/api/v1/processes/crm_flow/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	instanceID := instance["id"].(string)
	fetched := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumerToken, map[string]any{"worker_id": "w",
		"subscriptions": []any{map[string]any{"definition": key}}, "max_tasks": 1}).JSON(t)["occurrences"].([]any)
	if len(fetched) != 1 {
		t.Fatalf("fetched %d occurrences; want 1", len(fetched))
	}
	occurrenceID := fetched[0].(map[string]any)["id"].(string)
	tokenID := id(tokenByName(t, env, "designer"))

	param := func(route, name string) string {
		switch {
		case name == "key" && strings.HasPrefix(route, "/api/v1/processes/"):
			return "crm_flow"
		case name == "key":
			return key
		case name == "name" && strings.Contains(route, "/releases/"):
			return "r1"
		case name == "name":
			return "scoring"
		case name == "id" && strings.HasPrefix(route, "/api/v1/instances/"):
			return instanceID
		case name == "id" && strings.HasPrefix(route, "/api/v1/consumers/"):
			return consumerID
		case name == "id" && strings.HasPrefix(route, "/api/v1/tokens/"):
			return tokenID
		case name == "id":
			return occurrenceID
		}
		return "1" // revisions, versions, diffs
	}
	type route struct{ method, path, pattern string }
	var routes []route
	mux, ok := env.Handler.(chi.Routes)
	if !ok {
		t.Fatalf("the replica's handler is a %T, not chi.Routes", env.Handler)
	}
	err := chi.Walk(mux, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(pattern, "/api/v1/") || method == "GET" || method == "HEAD" {
			return nil
		}
		path := pattern
		for {
			open := strings.Index(path, "{")
			if open < 0 {
				break
			}
			end := strings.Index(path[open:], "}") + open
			path = path[:open] + param(pattern, path[open+1:end]) + path[end+1:]
		}
		routes = append(routes, route{method, strings.TrimSuffix(path, "/"), pattern})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].pattern+routes[i].method < routes[j].pattern+routes[j].method })
	if len(routes) < 20 {
		t.Fatalf("only %d write routes found: %v", len(routes), routes)
	}

	before := databaseState(t, env)
	for _, rt := range routes {
		token := env.Admin
		if strings.HasPrefix(rt.pattern, "/api/v1/pull/") {
			token = consumerToken
		}
		for _, b := range hostileBodies {
			r := env.Do(rt.method, rt.path, token, b.body)
			if r.Status >= 500 || r.Status < 400 || r.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s, %s body: %d %.300s; want a 4xx problem", rt.method, rt.pattern, b.name, r.Status, r.Body)
				continue
			}
			if r.Status != b.want && r.Status != 405 {
				t.Errorf("%s %s, %s body: %d %s; want %d", rt.method, rt.pattern, b.name, r.Status, r.Body, b.want)
			}
		}
	}
	after := databaseState(t, env)
	for table, digest := range before {
		// The worker catalog is liveness: the fixture's poller lapses
		// and is pruned by the timers if the walk outlasts its wait and
		// three heartbeats (it took 42 s on a loaded machine). What a
		// hostile body must not do is register a worker. Each replica
		// notes its retention setting once a minute (retention_settings):
		// liveness too.
		if table == "workers" || table == "retention_settings" {
			continue
		}
		if after[table] != digest {
			t.Errorf("table %s changed under hostile bodies", table)
		}
	}
	var others int
	if err := env.Pool.QueryRow(context.Background(), "select count(*) from workers where worker_id <> 'w'").Scan(&others); err != nil || others != 0 {
		t.Errorf("%d workers registered under hostile bodies (%v)", others, err)
	}
	t.Logf("%d write routes × %d bodies", len(routes), len(hostileBodies))
}
