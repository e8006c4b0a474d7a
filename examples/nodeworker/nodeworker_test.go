// Package nodeworker_test runs the Node.js example worker (worker.mjs)
// against a real Relais.
package nodeworker_test

import (
	"context"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// install copies the example into a fresh folder and installs what its
// package-lock.json pins for running it (npm ci --omit=dev). Without node
// or npm the test is skipped, saying so, except under CI=true, where it
// fails: CI must run it.
func install(t *testing.T) string {
	t.Helper()
	relaistest.RequireNode(t, "the Node.js example worker's test")
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "worker.mjs", "gen"} {
		if err := copyTree(name, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(to, strings.TrimPrefix(path, from))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// The example worker, on a gRPC stream, does what every example worker
// does (relaistest.ExampleWorkerDrill).
func TestNodeWorker(t *testing.T) {
	t.Parallel()
	dir := install(t)
	relaistest.ExampleWorkerDrill(t, func(env *relaistest.Env, token string) *relaistest.Script {
		return relaistest.StartNode(t, dir, "worker.mjs", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+token, "CRM_LATENCY_MS=2500")
	})
}

// Outputs the contract refuses (a contract asking for an output this
// worker does not give, say one changed under a deployed worker): the
// example fails the task at once with code invalid_outputs, as the Go SDK
// does, rather than holding it, its slot taken, while its stream lives
// (the stream keeps its lock alive).
func TestNodeWorkerFailsRefusedOutputs(t *testing.T) {
	t.Parallel()
	dir := install(t)
	env := relaistest.New(t)
	doc := relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0]
	outputs := doc["outputs"].(map[string]any)
	outputs["fields"] = append(outputs["fields"].([]any), map[string]any{"name": "owner", "type": "text", "required": true})
	env.Must(201, "PUT", "/api/v1/definitions/add_company_to_crm/working", env.Designer, relaistest.Body(doc, "key"))
	env.Must(201, "POST", "/api/v1/definitions/add_company_to_crm/revisions", env.Designer, nil)
	env.Process("crm_only", relaistest.CRMProcess(nil))
	w := relaistest.StartNode(t, dir, "worker.mjs", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+env.Consumer("crm-sync", "add_company_to_crm"))
	id := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	if got := env.WaitEnded(id, 20*time.Second); got["status"] != "failed" {
		t.Fatalf("instance %v; want failed\n%s", got["status"], w.Output())
	}
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+id, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)
	if occ["status"] != "failed" || occ["error_code"] != "invalid_outputs" {
		t.Errorf("occurrence %v %v; want failed invalid_outputs\n%s", occ["status"], occ["error_code"], w.Output())
	}
	// The worker logs its failure once answered, which may come after the
	// instance ended (a CI run read its output first).
	relaistest.WaitFor(t, 5*time.Second, "the worker logs its failure", func() (bool, string) {
		return len(w.Events("failed")) >= 1, w.Output()
	})
	if n := len(w.Events("failed")); n != 1 {
		t.Errorf("%d failures logged; want 1\n%s", n, w.Output())
	}
}

// A rolling restart under a running task: the stopping replica leaves the
// task locked to the example's resumable stream, and its next stream, to
// the other replica, resumes it; the task completes in its first attempt,
// never cancelled.
func TestNodeWorkerRidesOutARollingRestart(t *testing.T) {
	t.Parallel()
	r := runningBehindSwitch(t, 4000)
	r.p.to(r.other.URL)
	began := time.Now()
	r.env.Drain()
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("the replica took %v to stop, want no wait for the resumable stream's task", d)
	}
	// Stopped, the replica's process exits: its connections close (this
	// test's replica shares the test's process).
	r.p.closeAll()
	r.completedInItsFirstAttempt(t, 20*time.Second)
	subs := r.w.Events("subscribed")
	if len(subs) != 2 || subs[1]["resumed"] != 1.0 {
		t.Errorf("subscriptions %v; want a second one resuming the task\n%s", subs, r.w.Output())
	}
	if n := len(r.w.Events("cancelled", "refused")); n != 0 {
		t.Errorf("%d cancellations or refusals; want none\n%s", n, r.w.Output())
	}
}

// An outcome that gets no answer (its replica stopped, the next not up
// yet, as the task ends) is sent again until it is answered, within the
// task's lock: the worker used to log it refused and drop it, the finished
// work then done again by the task's next attempt (chaos QA, of the
// Python example).
func TestNodeWorkerRetriesAnUnansweredCompletion(t *testing.T) {
	t.Parallel()
	r := runningBehindSwitch(t, 2000)
	// The replica stops (leaving the task locked to the resumable stream)
	// and none answers from before the task ends (2 s) until well after.
	r.p.down()
	r.env.Drain()
	r.p.closeAll()
	time.Sleep(4 * time.Second)
	r.p.to(r.other.URL)
	r.completedInItsFirstAttempt(t, 30*time.Second)
	if len(r.w.Events("retrying")) == 0 || len(r.w.Events("refused")) != 0 {
		t.Errorf("want the completion retried, never refused\n%s", r.w.Output())
	}
}

// behindSwitch is the example worker reaching the first of two replicas
// through a switchProxy, one task of instance id running.
type behindSwitch struct {
	env, other *relaistest.Env
	p          *switchProxy
	w          *relaistest.Script
	id         string
}

// runningBehindSwitch starts the example behind a switchProxy to the first
// of two replicas, its CRM taking latencyMS, and an instance whose task it
// is running.
func runningBehindSwitch(t *testing.T, latencyMS int) *behindSwitch {
	t.Helper()
	dir := install(t)
	env := relaistest.New(t, func(c *config.Config) { c.ShutdownTimeout = 40 * time.Second })
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	r := &behindSwitch{env: env, other: env.Replica(), p: newSwitch(t, env.URL)}
	r.w = relaistest.StartNode(t, dir, "worker.mjs", "RELAIS_URL=http://"+r.p.addr(), "RELAIS_TOKEN="+env.Consumer("crm-sync", "add_company_to_crm"),
		"CRM_LATENCY_MS="+strconv.Itoa(latencyMS))
	relaistest.WaitFor(t, 20*time.Second, "the worker subscribes", func() (bool, string) { return len(r.w.Events("subscribed")) == 1, r.w.Output() })
	r.id = env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	relaistest.WaitFor(t, 10*time.Second, "the task runs", func() (bool, string) {
		items := env.Must(200, "GET", "/api/v1/occurrences?instance="+r.id, env.Operator, nil).JSON(t)["items"].([]any)
		return len(items) == 1 && items[0].(map[string]any)["status"] == "reserved", r.w.Output()
	})
	return r
}

// completedInItsFirstAttempt waits for the instance to complete, seen from
// the second replica, its task in one attempt.
func (r *behindSwitch) completedInItsFirstAttempt(t *testing.T, within time.Duration) {
	t.Helper()
	if got := r.other.WaitEnded(r.id, within); got["status"] != "completed" {
		t.Fatalf("instance %v; want completed\n%s", got["status"], r.w.Output())
	}
	occ := r.other.Must(200, "GET", "/api/v1/occurrences?instance="+r.id, r.other.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)
	detail := r.other.Must(200, "GET", "/api/v1/occurrences/"+occ["id"].(string), r.other.Operator, nil).JSON(t)
	if a := detail["attempts"].([]any); len(a) != 1 || a[0].(map[string]any)["outcome"] != "completed" {
		t.Errorf("attempts %v; want one, completed\n%s", a, r.w.Output())
	}
}

// switchProxy forwards TCP connections to a backend that can be switched:
// a load balancer in front of two replicas, which sends a new connection
// to the replica still up.
type switchProxy struct {
	l       net.Listener
	backend atomic.Pointer[string]
	mu      sync.Mutex
	conns   []net.Conn
}

func newSwitch(t *testing.T, backend string) *switchProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{l: l}
	p.to(backend)
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.closeAll()
	})
	return p
}

// closeAll closes the connections made so far.
func (p *switchProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *switchProxy) addr() string { return p.l.Addr().String() }

// down makes the proxy hang up on every new connection, as a host whose
// Relais is down refuses them, until to names a backend again.
func (p *switchProxy) down() { p.backend.Store(nil) }

func (p *switchProxy) to(backendURL string) {
	u, err := url.Parse(backendURL)
	if err != nil {
		panic(err)
	}
	p.backend.Store(&u.Host)
}

func (p *switchProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		backend := p.backend.Load()
		if backend == nil {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", *backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		go func() {
			_, _ = io.Copy(b, c)
			b.Close()
		}()
		go func() {
			_, _ = io.Copy(c, b)
			c.Close()
		}()
	}
}
