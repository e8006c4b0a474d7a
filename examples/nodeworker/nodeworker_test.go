// Package nodeworker_test runs the Node.js example worker (worker.mjs)
// against a real Relais.
package nodeworker_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// The example worker subscribes, runs each task while it keeps
// acknowledging heartbeats (a task five heartbeats long completes), settles
// through the protocol (a company created, then found existing: the
// instances take their branches), and on SIGTERM drains: the task in
// flight finishes and settles, and the worker exits 0.
func TestNodeWorker(t *testing.T) {
	t.Parallel()
	dir := install(t)
	// Heartbeats short enough that a task spans five of them (a worker
	// that stopped reading during a task is dropped after three), long
	// enough that a loaded machine acknowledges each in time.
	env := relaistest.New(t, func(c *config.Config) { c.Stream.Heartbeat = 500 * time.Millisecond })
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	token := env.Consumer("crm-sync", "add_company_to_crm")

	w := relaistest.StartNode(t, dir, "worker.mjs", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+token, "CRM_LATENCY_MS=2500")
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
	if len(w.Events("draining")) != 1 || len(w.Events("stopped")) != 1 {
		t.Errorf("want the drain and the stop logged\n%s", w.Output())
	}
}
