package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/relaistest"
	"github.com/relais/relais/worker"
)

// TestDatabaseLossIsUnavailable: while PostgreSQL cannot be reached, API
// requests answer 503 database_unavailable with Retry-After (never 500
// internal), /readyz says not ready while /healthz stays up, and requests
// succeed again once the server is back.
func TestDatabaseLossIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts, cluster, pool := relaistest.OwnCluster(t)
	env := relaistest.NewOnPool(t, pool)
	env.Must(200, "GET", "/api/v1/definitions", env.Operator, nil)

	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/v1/definitions", nil},
		{"GET", "/api/v1/definitions", nil}, // on a fresh connection attempt
		{"PUT", "/api/v1/destinations/scoring", map[string]any{"url": "https://scoring.example/v1", "max_timeout": "PT5S"}},
		{"GET", "/api/v1/whoami", nil},
	} {
		r := env.Do(c.method, c.path, env.Admin, c.body)
		if r.Status != 503 || r.Code() != "database_unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database down: %d %s (Retry-After %q); want 503 database_unavailable with Retry-After",
				c.method, c.path, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	// A settle token cannot be checked either: that is no reason to tell
	// its client to throw it away.
	settle := env.Do("POST", "/api/v1/pull/occurrences/0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e0f/complete", "rlsst_"+strings.Repeat("x", 40), map[string]any{"outputs": map[string]any{}})
	if settle.Status != 503 || settle.Code() != "database_unavailable" || settle.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("settle token with the database down: %d %s (WWW-Authenticate %q); want 503 database_unavailable, the token not called invalid",
			settle.Status, settle.Body, settle.Header.Get("WWW-Authenticate"))
	}
	if r := env.Do("GET", "/readyz", "", nil); r.Status != 503 {
		t.Errorf("readyz with the database down: %d %s; want 503", r.Status, r.Body)
	}
	if r := env.Do("GET", "/healthz", "", nil); r.Status != 200 {
		t.Errorf("healthz with the database down: %d %s; want 200 (the process is alive)", r.Status, r.Body)
	}

	if status := consoleSignIn(t, env.URL, env.Operator); status != 503 {
		t.Errorf("console sign-in with the database down: %d; want 503", status)
	}
	// Every 503 database_unavailable is counted, the console's page too;
	// the probe sees the database gone within its interval.
	relaistest.WaitFor(t, 10*time.Second, "the metrics see the database gone", func() (bool, string) {
		m := env.Metrics()
		up, _ := m.Get("relais_database_up")
		n, _ := m.Get("relais_database_unavailable_total")
		return up == 0 && n == 6, fmt.Sprintf("relais_database_up %v, relais_database_unavailable_total %v (want 0 and 6)", up, n)
	})
	// The gRPC health service says what /readyz says, for the probes of
	// gRPC clients and load balancers.
	if got := grpcHealth(t, env); got != "SERVING_STATUS_NOT_SERVING" {
		t.Errorf("gRPC health with the database down: %s, want NOT_SERVING", got)
	}

	again, err := embeddedpg.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Stop(context.Background()) })
	relaistest.WaitFor(t, 15*time.Second, "requests succeed once the database is back", func() (bool, string) {
		r := env.Do("GET", "/api/v1/definitions", env.Operator, nil)
		return r.Status == 200, string(r.Body)
	})
	relaistest.WaitFor(t, 10*time.Second, "relais_database_up is 1 again", func() (bool, string) {
		up, _ := env.Metrics().Get("relais_database_up")
		return up == 1, fmt.Sprintf("relais_database_up %v", up)
	})
	if got := grpcHealth(t, env); got != "SERVING_STATUS_SERVING" {
		t.Errorf("gRPC health with the database back: %s, want SERVING", got)
	}
	if logs := env.Logs.String(); !strings.Contains(logs, "code=database_unavailable") {
		t.Errorf("the request log does not name the problem code:\n%s", logs)
	}
	if logs := env.Logs.String(); strings.Contains(logs, `msg="internal error"`) {
		t.Errorf("a lost database was logged as an internal error:\n%s", logs)
	}
}

// consoleSignIn posts the console's sign-in form with token, as a browser
// does (CSRF cookie first), and returns the status of the answer.
func consoleSignIn(t *testing.T, base, token string) int {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(base + "/console/sign-in")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(base + "/console/")
	csrf := ""
	for _, c := range jar.Cookies(u) {
		if c.Name == "relais_sign_in" {
			csrf = c.Value
		}
	}
	res, err = client.PostForm(base+"/console/sign-in", url.Values{"csrf": {csrf}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// grpcHealth asks the standard health service, over the Connect protocol,
// for the replica's status.
func grpcHealth(t *testing.T, env *relaistest.Env) string {
	t.Helper()
	r := env.Do("POST", "/grpc.health.v1.Health/Check", "", map[string]any{}, "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("health check: %d %s", r.Status, r.Body)
	}
	status, _ := r.JSON(t)["status"].(string)
	return status
}

// TestStreamsOutliveADatabaseOutage: a worker stream connected when
// PostgreSQL goes away is still the same stream once it is back. Its
// acknowledgements keep counting (the replica checks them against the
// stream's own token) and its subscriptions are not taken for withdrawn
// grants. A worker-protocol call refused meanwhile is counted and logged
// as database_unavailable, as a REST request is.
func TestStreamsOutliveADatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts, cluster, pool := relaistest.OwnCluster(t)
	// Heartbeats every 200 ms: the outage spans many more than the three a
	// client may miss, and several resolutions of the subscriptions; three
	// missed are 600 ms, more than the stall stopping PostgreSQL caused
	// under CI's load (100 ms ended the stream once: heartbeat_missed).
	env := relaistest.NewOnPool(t, pool, func(c *config.Config) { c.Stream.Heartbeat = 200 * time.Millisecond })
	env.Definition("add_company_to_crm.yaml")
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	w, err := worker.New(worker.Config{URL: env.URL, Token: consumer, WorkerID: "outage", Protocol: worker.ProtocolStream,
		Concurrency: 1, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("add_company_to_crm", nil, func(ctx context.Context, t *worker.Task) (any, error) {
		return map[string]any{"result": "created", "crm_id": "C-1"}, nil
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	streamID := func() string {
		items := env.Must(200, "GET", "/api/v1/workers", env.Operator, nil).JSON(t)["items"].([]any)
		if len(items) != 1 {
			return fmt.Sprint(items)
		}
		return fmt.Sprint(items[0].(map[string]any)["id"])
	}
	var before string
	relaistest.WaitFor(t, 10*time.Second, "the stream is in the catalog", func() (bool, string) {
		before = streamID()
		return !strings.HasPrefix(before, "["), before
	})

	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r := env.Do("POST", "/relais.worker.v1.WorkerService/Complete", consumer,
		map[string]any{"occurrenceId": "00000000-0000-7000-8000-000000000000", "workerId": "outage", "outputs": "e30="},
		"Content-Type", "application/json")
	if r.Status != 503 || !strings.Contains(string(r.Body), "database_unavailable") {
		t.Errorf("a worker-protocol call with the database down: %d %s, want 503 database_unavailable", r.Status, r.Body)
	}
	time.Sleep(2 * time.Second) // 10 heartbeats, several resolutions
	again, err := embeddedpg.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Stop(context.Background()) })
	relaistest.WaitFor(t, 15*time.Second, "the API answers again", func() (bool, string) {
		r := env.Do("GET", "/api/v1/workers", env.Operator, nil)
		return r.Status == 200, string(r.Body)
	})
	// The catalog row may have been pruned meanwhile (its replica could
	// not refresh it): a live stream's comes back with its next refresh.
	relaistest.WaitFor(t, 5*time.Second, "the same stream in the catalog", func() (bool, string) {
		after := streamID()
		return after == before, after
	})
	time.Sleep(500 * time.Millisecond) // a resolution after the outage
	logs := env.Logs.String()
	// A stream's own end logs what it handed back.
	if strings.Contains(logs, "handed_back=") {
		t.Errorf("the stream ended during the outage:\n%s", logs)
	}
	if n, _ := env.Metrics().Get("relais_database_unavailable_total"); n < 1 {
		t.Errorf("relais_database_unavailable_total %v: the worker-protocol refusal was not counted", n)
	}
	if !strings.Contains(logs, "WorkerService/Complete") || !strings.Contains(logs, "code=database_unavailable") {
		t.Errorf("the request log does not name the worker-protocol call's problem code:\n%s", logs)
	}
}

// A write held by a PostgreSQL that hangs (a frozen machine, a network
// black hole) is answered 503 database_unavailable once the replica's
// probe finds it gone, not when its group's transaction times out a
// minute later (the gate cut the request, which went on waiting for its
// group); repeated as it was once the database is back, it is applied.
func TestWriteHeldByAHungDatabaseIsAnswered(t *testing.T) {
	t.Parallel()
	opts, cluster, pool := relaistest.OwnCluster(t)
	env := relaistest.NewOnPool(t, pool)
	consumer := env.CRMOnly()
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "lock_duration": "PT5M",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)
	complete := func() relaistest.Response {
		return env.Do("POST", "/api/v1/pull/occurrences/"+occ["id"].(string)+"/complete", consumer,
			map[string]any{"worker_id": "w", "outputs": map[string]any{"result": "created", "crm_id": "C-1"}})
	}

	thaw := relaistest.Freeze(t, opts)
	defer func() {
		thaw()
		_ = cluster.Stop(context.Background())
	}()
	began := time.Now()
	// A start too: starts have group commits of their own (SRE QA: they
	// waited out their minute where settlements answered in seconds).
	answered, started := make(chan relaistest.Response, 1), make(chan relaistest.Response, 1)
	go func() { answered <- complete() }()
	go func() {
		started <- env.Do("POST", "/api/v1/processes/crm_only/instances", env.Operator,
			map[string]any{"inputs": map[string]any{"name": "Initech"}})
	}()
	for what, ch := range map[string]chan relaistest.Response{"a completion": answered, "a start": started} {
		select {
		case r := <-ch:
			// The probe's verdict comes within 8 s (a ping, a new
			// connection and the pool's, 2 s each, every 2 s), the cut
			// at once.
			d := time.Since(began)
			t.Logf("%s answered %v after PostgreSQL hung", what, d)
			if d > 20*time.Second {
				t.Errorf("%s answered %v after PostgreSQL hung, want soon after the probe's verdict", what, d)
			}
			if r.Status != 503 || r.Code() != "database_unavailable" {
				t.Fatalf("%s held by a hung database: %d %s, want 503 database_unavailable", what, r.Status, r.Body)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s held by a hung database not answered within 30s", what)
		}
	}
	thaw()
	relaistest.WaitFor(t, 20*time.Second, "the completion, repeated, is applied", func() (bool, string) {
		r := complete()
		return r.Status == 200, fmt.Sprintf("%d %s", r.Status, r.Body)
	})
	if got := env.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Errorf("instance %v, want completed", got)
	}
}
