// Package nodeworker_test runs the Node.js example worker (worker.mjs)
// against a real Relais.
package nodeworker_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/engine"
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
	if n := len(w.Events("failed")); n != 1 {
		t.Errorf("%d failures logged; want 1\n%s", n, w.Output())
	}
}
