package relaistest

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
)

// ExampleWorkerDrill is what every example CRM worker in another language
// (examples/nodeworker, examples/pythonworker, examples/pythonpoll) must do
// against a real Relais, started by start with the consumer token it is
// given: subscribe once; run each task while it keeps acknowledging
// heartbeats or extending its lock (a task five heartbeats long completes,
// a stream kept); complete through the
// protocol (a company created, then found existing: the instances take
// their branches); drop a task whose instance is stopped, reporting
// nothing; and on SIGTERM drain: the task in flight finishes and settles,
// and the worker exits 0. The worker logs JSON lines whose "event" is
// subscribed, completed, cancelled, refused, draining and stopped, and
// simulates a CRM call of CRM_LATENCY_MS, which start must set to 2500.
func ExampleWorkerDrill(t *testing.T, start func(env *Env, token string) *Script) {
	t.Helper()
	// Heartbeats short enough that a task spans five of them (a worker
	// that stopped reading during a task is dropped after three), long
	// enough that a loaded machine acknowledges each in time.
	env := New(t, func(c *config.Config) { c.Stream.Heartbeat = 500 * time.Millisecond })
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", CRMProcess(nil))
	w := start(env, env.Consumer("crm-sync", "add_company_to_crm"))
	WaitFor(t, 20*time.Second, "the worker subscribed", func() (bool, string) {
		return len(w.Events("subscribed")) == 1, w.Output()
	})

	startCompany := func(name string) string {
		return env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": name}}).JSON(t)["id"].(string)
	}
	reserved := func(name string) {
		WaitFor(t, 10*time.Second, name+" reserved", func() (bool, string) {
			items := env.Must(200, "GET", "/api/v1/occurrences?status=reserved", env.Operator, nil).JSON(t)["items"].([]any)
			return len(items) == 1, fmt.Sprint(len(items), " reserved")
		})
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

	// A task whose instance is stopped while it runs: the worker is told,
	// and reports nothing (no refusal logged below).
	stopped := startCompany("Initech")
	reserved("Initech")
	env.Must(200, "POST", "/api/v1/instances/"+stopped+"/stop", env.Operator, map[string]any{"reason": "drill"})
	WaitFor(t, 10*time.Second, "the cancellation read", func() (bool, string) {
		return len(w.Events("cancelled")) == 1, w.Output()
	})

	// SIGTERM while a task runs: it finishes and settles, then the worker
	// exits.
	third := startCompany("Globex")
	reserved("Globex")
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
