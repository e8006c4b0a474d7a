package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
	"github.com/relais/relais/internal/testlog"
)

// The test binary doubles as the relais binary for tests that must kill it:
// with RELAIS_TEST_AS_RELAIS=1 it runs the command in its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("RELAIS_TEST_AS_RELAIS") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		args := strings.Fields(os.Getenv("RELAIS_TEST_ARGS"))
		err := run(ctx, args, os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "relais:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate)
}

var listenRE = regexp.MustCompile(`Relais listening on (http://[^\s"]+)`)

// relais is a serve running in this process.
type relais struct {
	base   string
	stdout *testlog.Buffer
	stderr *testlog.Buffer
	cancel context.CancelFunc
	done   chan error
}

func startServe(t *testing.T, env map[string]string) *relais {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &relais{stdout: &testlog.Buffer{}, stderr: &testlog.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	if _, ok := env["RELAIS_LISTEN"]; !ok {
		env["RELAIS_LISTEN"] = "127.0.0.1:0"
	}
	go func() {
		r.done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, r.stdout, r.stderr)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := listenRE.FindStringSubmatch(r.stdout.String()); m != nil {
			r.base = m[1]
			break
		}
		select {
		case err := <-r.done:
			t.Fatalf("serve exited: %v\nstderr:\n%s", err, r.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if r.base == "" {
		t.Fatalf("serve did not listen within 60s\nstderr:\n%s", r.stderr)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *relais) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop within 30s")
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

func call(t *testing.T, method, url, token string, body io.Reader) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

const bootstrap = "test-bootstrap-token-0123456789"

func TestServeReadinessAuthAndProblems(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.EmptyURL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap,
		"RELAIS_TRUSTED_PROXIES": "0.0.0.0/0"})

	res := call(t, "GET", r.base+"/readyz", "", nil)
	if res.status != 200 || res.json(t)["schema_version"] == nil {
		t.Fatalf("readyz = %d %s", res.status, res.body)
	}
	if strings.Contains(r.stdout.String(), bootstrap) || strings.Contains(r.stderr.String(), bootstrap) {
		t.Error("the given bootstrap token was printed")
	}
	// The ready line says which build runs, and what history is kept.
	if !strings.Contains(r.stderr.String(), "version=") {
		t.Errorf("the ready line does not give the version:\n%s", r.stderr)
	}
	if res := call(t, "GET", r.base+"/metrics", "", nil); !strings.Contains(string(res.body), "relais_build_info{") {
		t.Error("/metrics has no relais_build_info")
	}
	if !strings.Contains(r.stderr.String(), "retention=P30D") {
		t.Errorf("the ready line does not give the retention:\n%s", r.stderr)
	}
	// Trusting every peer is allowed, and said.
	if !strings.Contains(r.stderr.String(), "trusted_proxies=0.0.0.0/0") || !strings.Contains(r.stderr.String(), "RELAIS_TRUSTED_PROXIES trusts every peer") {
		t.Errorf("trusting every peer is not said at start:\n%s", r.stderr)
	}

	for _, tok := range []string{"", "rls_wrong"} {
		res = call(t, "GET", r.base+"/api/v1/whoami", tok, nil)
		if res.status != 401 || res.header.Get("Content-Type") != "application/problem+json" || res.json(t)["code"] != "unauthorized" {
			t.Errorf("token %q: got %d %s %s; want 401 problem+json", tok, res.status, res.header.Get("Content-Type"), res.body)
		}
	}
	res = call(t, "GET", r.base+"/api/v1/whoami", bootstrap, nil)
	if res.status != 200 || res.json(t)["role"] != "admin" {
		t.Fatalf("whoami = %d %s", res.status, res.body)
	}

	res = call(t, "POST", r.base+"/api/v1/tokens", bootstrap, strings.NewReader(`{"name":"ops","role":"operator"}`))
	if res.status != 201 {
		t.Fatalf("create token = %d %s", res.status, res.body)
	}
	operator := res.json(t)["token"].(string)
	res = call(t, "POST", r.base+"/api/v1/tokens", operator, strings.NewReader(`{"name":"x","role":"operator"}`))
	if res.status != 403 || res.json(t)["code"] != "forbidden" {
		t.Errorf("operator creating a token: %d %s; want 403 forbidden", res.status, res.body)
	}

	res = call(t, "POST", r.base+"/api/v1/tokens", bootstrap, strings.NewReader(`{"name":"x","role":"operator","colour":"red"}`))
	if res.status != 400 || res.json(t)["code"] != "unknown_field" {
		t.Errorf("unknown field: %d %s; want 400 unknown_field", res.status, res.body)
	}
	big := `{"name":"` + strings.Repeat("x", 2<<20) + `","role":"operator"}`
	res = call(t, "POST", r.base+"/api/v1/tokens", bootstrap, strings.NewReader(big))
	if res.status != 413 || res.json(t)["code"] != "body_too_large" {
		t.Errorf("large body: %d %.200s; want 413 body_too_large", res.status, res.body)
	}
	res = call(t, "POST", r.base+"/api/v1/tokens", bootstrap, strings.NewReader(`{"name":`))
	if res.status != 400 || res.json(t)["code"] != "invalid_json" {
		t.Errorf("malformed JSON: %d %s; want 400 invalid_json", res.status, res.body)
	}
	res = call(t, "GET", r.base+"/nowhere", "", nil)
	if res.status != 404 || res.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("unknown route: %d %s", res.status, res.header.Get("Content-Type"))
	}
	res = call(t, "GET", r.base+"/metrics", "", nil)
	if res.status != 200 || !strings.Contains(string(res.body), "relais_http_requests_total") {
		t.Errorf("metrics: %d", res.status)
	}
}

func TestBootstrapTokenPrintedOnceOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": url})
	m := regexp.MustCompile(`rls_[A-Za-z0-9_-]{43}`).FindString(r.stdout.String())
	if m == "" {
		t.Fatalf("no bootstrap token printed; stdout:\n%s", r.stdout)
	}
	if res := call(t, "GET", r.base+"/api/v1/whoami", m, nil); res.status != 200 {
		t.Fatalf("printed token refused: %d %s", res.status, res.body)
	}
	r.stop(t)
	again := startServe(t, map[string]string{"RELAIS_DATABASE_URL": url})
	if strings.Contains(again.stdout.String(), "rls_") {
		t.Errorf("second start printed a token:\n%s", again.stdout)
	}
}

// With JSON logs, what serve prints on stdout (the bootstrap token, the
// listening line) is JSON records too.
func TestServePrintsJSONWithJSONLogs(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.EmptyURL(t), "RELAIS_LOG_FORMAT": "json"})
	var token, url string
	for line := range strings.Lines(r.stdout.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stdout line %q is not JSON: %v", line, err)
		}
		if s, ok := rec["token"].(string); ok {
			token = s
		}
		if s, ok := rec["url"].(string); ok {
			url = s
		}
	}
	if url != r.base || !strings.HasPrefix(token, "rls_") {
		t.Fatalf("stdout %s: want records with the token and url %s", r.stdout, r.base)
	}
	if res := call(t, "GET", r.base+"/api/v1/whoami", token, nil); res.status != 200 {
		t.Errorf("the printed token: %d %s", res.status, res.body)
	}
}

func TestReplicasStartingTogetherMigrateOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	var wg sync.WaitGroup
	replicas := make([]*relais, 3)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replicas[i] = startServe(t, map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	applied := 0
	for _, r := range replicas {
		if res := call(t, "GET", r.base+"/readyz", "", nil); res.status != 200 {
			t.Errorf("replica not ready: %d %s", res.status, res.body)
		}
		applied += strings.Count(r.stderr.String(), "migration applied")
	}
	if want := len(migrationNames(t)); applied != want {
		t.Errorf("migrations applied %d times across replicas; want %d (each once)", applied, want)
	}
}

func migrationNames(t *testing.T) []string {
	entries, err := os.ReadDir("../../queries/migrations")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestBadConfigurationExitsNamingTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env map[string]string }{
		{map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "PT20M", "RELAIS_PULL_MAX_LOCK_DURATION": "PT10M"}},
		{map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "PT0S"}},
		{map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "1 minute"}},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"serve"}, func(k string) string { return tc.env[k] }, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), "RELAIS_PULL_DEFAULT_LOCK_DURATION") {
			t.Errorf("%v: err = %v; want one naming RELAIS_PULL_DEFAULT_LOCK_DURATION", tc.env, err)
		}
	}
}

func TestTokenCreateCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	var out, errOut bytes.Buffer
	env := func(k string) string { return map[string]string{"RELAIS_DATABASE_URL": url}[k] }
	if err := run(context.Background(), []string{"token", "create", "--role", "designer", "--name", "ci"}, env, &out, &errOut); err != nil {
		t.Fatalf("token create: %v\n%s", err, errOut.String())
	}
	token := strings.TrimSpace(out.String())
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": url})
	res := call(t, "GET", r.base+"/api/v1/whoami", token, nil)
	if res.status != 200 || res.json(t)["role"] != "designer" {
		t.Errorf("whoami with created token = %d %s", res.status, res.body)
	}
	if err := run(context.Background(), []string{"token", "create", "--role", "king", "--name", "x"}, env, io.Discard, io.Discard); err == nil {
		t.Error("unknown role accepted")
	}
}

// TestShutdownDrainsLongPolls stops a server while a worker long-polls and
// a read waits for an instance to end: the poll is answered at once with
// no occurrence, the read with the instance running, and serve returns
// cleanly.
func TestShutdownDrainsLongPolls(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples/definitions"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	consumer := must(t, 201, callH(t, "POST", r.base+"/api/v1/consumers", bootstrap, map[string]any{"name": "c",
		"grants": []any{map[string]any{"definition": "score_company", "revisions": "all"}}}))["token"].(string)
	type result struct {
		res response
		at  time.Time
	}
	// A read waiting for an instance to end is answered too, with the
	// instance as it is.
	must(t, 201, callH(t, "POST", r.base+"/api/v1/processes/crm_only/versions", bootstrap, relaistest.CRMProcess(nil)))
	instance := must(t, 201, callH(t, "POST", r.base+"/api/v1/processes/crm_only/instances", bootstrap, map[string]any{
		"inputs": map[string]any{"name": "Acme"}}))["id"].(string)
	done := make(chan result, 1)
	read := make(chan result, 1)
	go func() {
		res := callH(t, "POST", r.base+"/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w",
			"subscriptions": []any{map[string]any{"definition": "score_company"}}, "wait": "PT30S"})
		done <- result{res, time.Now()}
	}()
	go func() {
		res := callH(t, "GET", r.base+"/api/v1/instances/"+instance+"?wait=PT30S", bootstrap, nil)
		read <- result{res, time.Now()}
	}()
	// Let the poll and the read reach their waits.
	for deadline := time.Now().Add(5 * time.Second); ; {
		metrics := string(call(t, "GET", r.base+"/metrics", "", nil).body)
		if strings.Contains(metrics, "relais_pull_waiters 1") && strings.Contains(metrics, "relais_instance_waiters 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long poll or the read never waited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopAt := time.Now()
	r.stop(t)
	got := <-done
	if got.res.status != 200 || strings.TrimSpace(string(got.res.body)) != `{"occurrences":[]}` {
		t.Fatalf("drained poll answered %d %s", got.res.status, got.res.body)
	}
	if d := got.at.Sub(stopAt); d > 3*time.Second {
		t.Errorf("the poll was answered %v after shutdown began; want at once", d)
	}
	got = <-read
	if got.res.status != 200 || !strings.Contains(string(got.res.body), `"status":"running"`) {
		t.Fatalf("drained read answered %d %s", got.res.status, got.res.body)
	}
	if d := got.at.Sub(stopAt); d > 3*time.Second {
		t.Errorf("the read was answered %v after shutdown began; want at once", d)
	}
}

// An administration command pointed at a data directory without a cluster
// (a typo, or serve runs with another RELAIS_DATA_DIR) says so instead of
// quietly creating a second, empty database.
func TestAdminCommandsNeedAnExistingDatabase(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "elsewhere")
	env := func(k string) string { return map[string]string{"RELAIS_DATA_DIR": dir}[k] }
	for _, args := range [][]string{{"token", "create", "--role", "operator", "--name", "ops"}, {"keys", "rotate"}, {"migrate", "status"}} {
		err := run(context.Background(), args, env, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "no Relais database in "+dir) || !strings.Contains(err.Error(), "RELAIS_DATA_DIR") {
			t.Errorf("%v: err = %v, want one saying %s holds no Relais database", args, err, dir)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the commands created %s: %v", dir, err)
	}
}

// TestEveryCommandTakesHelp asks each command for its help: it is written,
// names the command (not another one's flags under "serve"), and is not a
// failure, and nothing is opened to answer it.
func TestEveryCommandTakesHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--help"}, "usage: relais serve"},
		{[]string{"migrate", "-h"}, "usage: relais migrate"},
		{[]string{"token", "create", "--help"}, "usage: relais token create"},
		{[]string{"token", "list", "--help"}, "usage: relais token list"},
		{[]string{"token", "revoke", "--help"}, "usage: relais token revoke"},
		{[]string{"keys", "rotate", "--help"}, "usage: relais keys rotate"},
		{[]string{"apply", "--help"}, "usage: relais apply"},
		{[]string{"token", "--help"}, "usage: relais token create"},
		{[]string{"keys", "--help"}, "usage: relais keys rotate"},
		{[]string{"version", "--help"}, "usage: relais version"},
		{[]string{"backup", "--help"}, "usage: relais backup FILE"},
		{[]string{"restore", "--help"}, "usage: relais restore FILE"},
		{[]string{"consumer", "--help"}, "usage: relais consumer"},
		{[]string{"consumer", "create", "--help"}, "usage: relais consumer"},
		{[]string{"consumer", "help"}, "usage: relais consumer"},
		{[]string{"token", "help"}, "usage: relais token create"},
	} {
		var stdout, stderr bytes.Buffer
		// No database is configured: answering by opening one would fail.
		dir := t.TempDir()
		env := func(k string) string { return map[string]string{"RELAIS_DATA_DIR": dir}[k] }
		err := run(context.Background(), tc.args, env, &stdout, &stderr)
		if err != nil {
			t.Errorf("%v: %v; want the help and no error", tc.args, err)
		}
		// On stdout, so that it pipes (evaluator QA: serve --help | grep
		// found nothing).
		help := stdout.String()
		if !strings.Contains(help, tc.want) || stderr.Len() > 0 {
			t.Errorf("%v wrote %q on stdout, %q on stderr; want the help on stdout alone, containing %q", tc.args, help, stderr.String(), tc.want)
		}
		group := len(tc.args) == 2 && (tc.args[0] == "token" || tc.args[0] == "keys" || tc.args[0] == "consumer") // a command group's help lists its commands
		if tc.args[0] != "apply" && tc.args[0] != "version" && tc.args[0] != "consumer" && !group && !strings.Contains(help, "-database-url") {
			t.Errorf("%v: the help lists no configuration flags:\n%s", tc.args, help)
		}
	}
	if err := run(context.Background(), []string{"version", "now"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "no arguments") {
		t.Errorf("version now: %v; want the argument refused", err)
	}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"token", "create", "--name", "x"}, func(string) string { return "" }, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "admin, designer or operator") || strings.Contains(err.Error(), "consumer") {
		t.Errorf("token create without --role: %v; want the staff roles named", err)
	}
}

// A malformed data key stops serve before anything starts: no embedded
// cluster is created for a server that cannot run.
func TestMalformedDataKeysStopServeBeforeTheCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("# data keys\n\nk1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RELAIS_DATA_KEYS": "k1:abc"}, `RELAIS_DATA_KEYS: keyring: key "k1": decodes to 2 bytes`},
		{map[string]string{"RELAIS_DATA_KEY_FILE": keyFile}, "RELAIS_DATA_KEY_FILE " + keyFile + ": keyring: line 3: want id:base64key"},
		{map[string]string{"RELAIS_DATA_KEY_FILE": keyFile + ".missing"}, "RELAIS_DATA_KEY_FILE: "},
	} {
		tc.env["RELAIS_DATA_DIR"] = dir
		tc.env["RELAIS_LISTEN"] = "127.0.0.1:0"
		err := run(context.Background(), []string{"serve"}, func(k string) string { return tc.env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve with %v: %v; want %q", tc.env, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the data directory holds %d entries; want nothing created", len(entries))
	}
}

// `relais migrate` says the database's schema version: after a rollback it
// is newer than the binary's, which is not the one to report.
func TestMigrateSaysTheDatabasesVersion(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	env := func(k string) string { return map[string]string{"RELAIS_DATABASE_URL": url}[k] }
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	known := engine.LatestSchemaVersion()
	if want := fmt.Sprintf("schema version %d (0 migrations applied now)\n", known); out.String() != want {
		t.Errorf("migrate on a migrated database wrote %q, want %q", out.String(), want)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), "insert into relais_schema_migrations (version, name) values ($1, 'from_the_future')", known+1); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"migrate"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("schema version %d, newer than this binary's %d", known+1, known); !strings.Contains(out.String(), want) {
		t.Errorf("migrate on a newer database wrote %q, want %q", out.String(), want)
	}
}

// A misspelt command is refused with the command it may mean, at every
// level (relais servee, relais token craete, relais keys rotat).
func TestMisspeltCommandIsNamed(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"servee":       `unknown command "servee" (did you mean "serve"?)`,
		"token craete": `unknown command "token craete" (did you mean "create"?)`,
		"keys rotat":   `unknown command "keys rotat" (did you mean "rotate"?)`,
	} {
		err := run(context.Background(), strings.Fields(args), func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("relais %s: %v; want %q", args, err, want)
		}
	}
}

// Why serve or migrate stopped is one JSON record when the logs are JSON
// (by flag or variable), a plain line otherwise and for other commands.
func TestExitReportFollowsTheLogFormat(t *testing.T) {
	t.Parallel()
	err := errors.New("invalid configuration:\n  RELAIS_PUSH_MAX_TIMEOUT: PT20S is above the hard ceiling PT10S")
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, c := range []struct {
		args []string
		env  string
		json bool
	}{
		{[]string{"serve"}, "json", true},
		{[]string{"serve", "--log-format", "json"}, "", true},
		{[]string{"migrate", "--log-format=json"}, "text", true},
		{[]string{"serve", "--log-format=text"}, "json", false},
		{[]string{"serve"}, "", false},
		{[]string{"apply", "-f", "x"}, "json", false},
	} {
		var out bytes.Buffer
		reportExit(&out, c.args, env(c.env), err)
		var rec map[string]any
		isJSON := json.Unmarshal(out.Bytes(), &rec) == nil && rec["level"] == "ERROR" && rec["err"] == err.Error()
		if isJSON != c.json || !c.json && !strings.HasPrefix(out.String(), "relais: invalid configuration") {
			t.Errorf("%q with RELAIS_LOG_FORMAT=%q: %q, want JSON %v", c.args, c.env, out.String(), c.json)
		}
	}
}

// "1 migrations applied now" read as a typo to an upgrading operator.
func TestMigrationsText(t *testing.T) {
	for n, want := range map[int]string{0: "0 migrations", 1: "1 migration", 9: "9 migrations"} {
		if got := migrationsText(n); got != want {
			t.Errorf("migrationsText(%d) = %q, want %q", n, got, want)
		}
	}
}
