// Package pythonworker_test runs the Python example worker (worker.py)
// against a real Relais.
package pythonworker_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// The example worker speaks the Connect protocol with Python's standard
// library alone: it subscribes, runs each task while it keeps
// acknowledging heartbeats (a task five heartbeats long completes),
// completes through the protocol (a company created, then found existing:
// the instances take their branches), reads a refusal's problem, and on
// SIGTERM drains: the task in flight finishes and settles, and the worker
// exits 0.
func TestPythonWorker(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python example worker's test")
	env := relaistest.New(t, func(c *config.Config) { c.Stream.Heartbeat = 500 * time.Millisecond })
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	token := env.Consumer("crm-sync", "add_company_to_crm")

	w := relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+token, "CRM_LATENCY_MS=2500")
	relaistest.WaitFor(t, 20*time.Second, "the worker subscribed", func() (bool, string) {
		return len(w.Events("subscribed")) == 1, w.Output()
	})

	startCompany := func(name string) string {
		return env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": name}}).JSON(t)["id"].(string)
	}
	first := startCompany("Acme")
	if got := env.WaitEnded(first, 20*time.Second); got["status"] != "completed" || got["end_node"] != "done" {
		t.Fatalf("first Acme: %v at %v; want completed at done (created)\n%s", got["status"], got["end_node"], w.Output())
	}
	second := startCompany(" ACME ")
	if got := env.WaitEnded(second, 20*time.Second); got["status"] != "completed" || got["end_node"] != "known" {
		t.Fatalf("second Acme: %v at %v; want completed at known (existing)\n%s", got["status"], got["end_node"], w.Output())
	}
	if n := len(w.Events("subscribed")); n != 1 {
		t.Errorf("subscribed %d times; want once: tasks five heartbeats long must not end the stream\n%s", n, w.Output())
	}

	// A task stopped while it runs: the worker is told, reports nothing,
	// and logs no refusal.
	stopped := startCompany("Initech")
	relaistest.WaitFor(t, 10*time.Second, "Initech reserved", func() (bool, string) {
		items := env.Must(200, "GET", "/api/v1/occurrences?status=reserved", env.Operator, nil).JSON(t)["items"].([]any)
		return len(items) == 1, fmt.Sprint(len(items), " reserved")
	})
	env.Must(200, "POST", "/api/v1/instances/"+stopped+"/stop", env.Operator, map[string]any{"reason": "test"})
	relaistest.WaitFor(t, 10*time.Second, "the cancellation read", func() (bool, string) {
		return len(w.Events("cancelled")) == 1, w.Output()
	})

	// SIGTERM while a task runs: it finishes and settles, then the worker
	// exits.
	third := startCompany("Globex")
	relaistest.WaitFor(t, 10*time.Second, "Globex reserved", func() (bool, string) {
		items := env.Must(200, "GET", "/api/v1/occurrences?status=reserved", env.Operator, nil).JSON(t)["items"].([]any)
		return len(items) == 1, fmt.Sprint(len(items), " reserved")
	})
	if err := w.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w.Wait(t, 20*time.Second) // exits 0, drained
	if got := env.WaitEnded(third, 5*time.Second); got["status"] != "completed" {
		t.Errorf("Globex, in flight at SIGTERM: %v; want completed by the draining worker\n%s", got["status"], w.Output())
	}
	if n := len(w.Events("completed")); n != 3 {
		t.Errorf("%d completions logged; want 3\n%s", n, w.Output())
	}
	if n := len(w.Events("refused")); n != 0 {
		t.Errorf("%d refusals logged; want none\n%s", n, w.Output())
	}
	if len(w.Events("draining")) != 1 || len(w.Events("stopped")) != 1 {
		t.Errorf("want the drain and the stop logged\n%s", w.Output())
	}
}

// A refusal reaches the worker as Relais's problem: with a token that is
// not a consumer's, the stream ends for good (not retried) with the
// problem's code.
func TestPythonWorkerReadsARefusal(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python example worker's test")
	env := relaistest.New(t)
	w := relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+env.URL, "RELAIS_TOKEN=rls_not_a_token")
	select {
	case err := <-w.Exited():
		if err == nil {
			t.Fatalf("the worker exited 0 with a bad token\n%s", w.Output())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop on a bad token\n%s", w.Output())
	}
	ended := w.Events("stream_ended")
	if len(ended) != 1 || ended[0]["connect"] != "unauthenticated" || ended[0]["code"] != "unauthorized" {
		t.Errorf("stream_ended %v; want one, unauthenticated with the problem's code unauthorized\n%s", ended, w.Output())
	}
}
