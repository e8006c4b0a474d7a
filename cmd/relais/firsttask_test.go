package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
	"github.com/relais/relais/internal/testlog"
)

// fencedBlocks returns the fenced code blocks of a Markdown file whose
// language is lang, in order.
func fencedBlocks(t *testing.T, path, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur *strings.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case cur == nil && line == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

// TestFirstTaskAsWritten follows docs/first-task.md with its own documents
// and worker: applies the contract and the process, builds and runs the
// worker, starts instances, and changes the contract; what the page says
// each step answers is checked.
func TestFirstTaskAsWritten(t *testing.T) {
	t.Parallel()
	page := filepath.Join(relaistest.Root(), "docs", "first-task.md")
	yamls, gos := fencedBlocks(t, page, "yaml"), fencedBlocks(t, page, "go")
	if len(yamls) != 3 || len(gos) != 1 {
		t.Fatalf("the page has %d yaml and %d go blocks, want 3 (contract, process, new field) and 1 (the worker)", len(yamls), len(gos))
	}
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	says := func(s string) {
		t.Helper()
		if !strings.Contains(string(text), s) {
			t.Errorf("the page no longer says %q: update this test with it", s)
		}
	}

	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})
	dir := filepath.Join(t.TempDir(), "invoicing")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Step 4, with a slip first.
	write("send_invoice.yaml", strings.Replace(yamls[0], "type: integer", "type: interger", 1))
	write("invoice_customer.yaml", yamls[1])
	_, stderr, err := applyRun(t, r.base, "-f", dir)
	slip := `send_invoice.yaml:13: /inputs/fields/1/type: unknown type "interger" (did you mean "integer"?)`
	says("invoicing/" + slip)
	if err == nil || !strings.Contains(stderr, slip) {
		t.Errorf("apply with a misspelt type: %v\n%s\nwant %q", err, stderr, slip)
	}
	write("send_invoice.yaml", yamls[0])
	out, stderr, err := applyRun(t, r.base, "-f", dir)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	for _, line := range []string{"definition send_invoice: created (revision 1)", "process invoice_customer: published (version 1)"} {
		says("# " + line)
		if !strings.Contains(out, line) {
			t.Errorf("apply said\n%s\nwant %q", out, line)
		}
	}

	// Step 5.
	says("go run ./cmd/relais consumer create --name invoicer --grant send_invoice")
	out, stderr, err = consumerRun(r.base, bootstrap, "create", "--name", "invoicer", "--grant", "send_invoice")
	if err != nil {
		t.Fatalf("consumer create: %v\n%s", err, stderr)
	}
	says(`# consumer 1 "invoicer" created, granted send_invoice (all revisions)`)
	if !strings.HasPrefix(out, `consumer 1 "invoicer" created, granted send_invoice (all revisions)`) {
		t.Errorf("consumer create said %q", out)
	}
	consumer := tokenPrinted(t, out)

	// Step 6: the page's worker, built as a module of its own.
	worker := buildFirstWorker(t, gos[0], says)
	logs := &testlog.Buffer{}
	cmd := exec.Command(worker)
	cmd.Env = append(os.Environ(), "RELAIS_URL="+r.base, "RELAIS_TOKEN="+consumer)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	relaistest.WaitFor(t, 20*time.Second, "the worker connects", func() (bool, string) {
		return strings.Contains(logs.String(), "stream connected"), logs.String()
	})

	// Step 7.
	starts := r.base + "/api/v1/processes/invoice_customer/instances"
	body := map[string]any{"business_key": "order-1042", "inputs": map[string]any{"email": "ap@acme.example", "amount_cents": 125000}}
	says(`{"business_key":"order-1042","inputs":{"email":"ap@acme.example","amount_cents":125000}}`)
	id := must(t, 201, callH(t, "POST", starts, bootstrap, body, "Idempotency-Key", "order-1042"))["id"].(string)
	if again := must(t, 200, callH(t, "POST", starts, bootstrap, body, "Idempotency-Key", "order-1042"))["id"]; again != id {
		t.Errorf("the same start again answered %v, want %s", again, id)
	}
	inst := waitInstance(t, r.base, id)
	if inst["status"] != "completed" {
		t.Fatalf("instance %v, want completed\n%s", inst["status"], logs.String())
	}
	if email := inst["inputs"].(map[string]any)["email"]; fmt.Sprint(email) != "map[$masked:sensitive]" {
		t.Errorf("the instance's email reads %v, want it masked", email)
	}
	occ := inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	o := must(t, 200, callH(t, "GET", r.base+"/api/v1/occurrences/"+occ, bootstrap, nil))
	says("invoice=INV-000001")
	if n := o["outputs"].(map[string]any)["invoice_number"]; n != "INV-000001" || !strings.Contains(logs.String(), "invoice=INV-000001") {
		t.Errorf("invoice %v, want INV-000001 (and the worker's log to say so)\n%s", n, logs.String())
	}
	bad := callH(t, "POST", starts, bootstrap, map[string]any{"inputs": map[string]any{"email": "not an email", "amount_cents": 0}})
	says(`# 422 invalid_inputs: /inputs/amount_cents (must be at least 1), /inputs/email (must be a valid email address)`)
	if bad.status != 422 || bad.json(t)["code"] != "invalid_inputs" {
		t.Fatalf("bad inputs: %d %s", bad.status, bad.body)
	}
	for _, want := range []string{`"path":"/inputs/email","message":"must be a valid email address"`, `"path":"/inputs/amount_cents","message":"must be at least 1"`} {
		if !strings.Contains(string(bad.body), want) {
			t.Errorf("bad inputs answered %s, want %s", bad.body, want)
		}
	}
	// The worker's business refusal fails the task for good.
	big := must(t, 201, callH(t, "POST", starts, bootstrap, map[string]any{"inputs": map[string]any{"email": "ap@acme.example", "amount_cents": 20_000_000}}))["id"].(string)
	if inst := waitInstance(t, r.base, big); inst["status"] != "failed" {
		t.Errorf("a refused invoice: instance %v, want failed", inst["status"])
	}
	bigOcc := must(t, 200, callH(t, "GET", r.base+"/api/v1/occurrences?instance="+big, bootstrap, nil))["items"].([]any)[0].(map[string]any)
	if bigOcc["error_code"] != "AMOUNT_TOO_HIGH" {
		t.Errorf("a refused invoice: error code %v, want AMOUNT_TOO_HIGH", bigOcc["error_code"])
	}

	// Step 8: the new field, among the inputs (indented as the page says).
	field := yamls[2]
	contract := strings.Replace(yamls[0], "outputs:\n", field+"outputs:\n", 1)
	if contract == yamls[0] {
		t.Fatal("no outputs: line in the contract to add the field before")
	}
	write("send_invoice.yaml", contract)
	out, stderr, err = applyRun(t, r.base, "-f", dir)
	if err != nil {
		t.Fatalf("apply the new field: %v\n%s", err, stderr)
	}
	for _, line := range []string{"definition send_invoice: updated (revision 2; 1 change(s) against revision 1, none breaking: /inputs/due_date (added optional date field))", "process invoice_customer: unchanged"} {
		says("# " + line)
		if !strings.Contains(out, line) {
			t.Errorf("apply said\n%s\nwant %q", out, line)
		}
	}
	// Version 1 still runs revision 1, which the worker still serves.
	id2 := must(t, 201, callH(t, "POST", starts, bootstrap, map[string]any{"inputs": map[string]any{"email": "ap@globex.example", "amount_cents": 900}}))["id"].(string)
	if inst := waitInstance(t, r.base, id2); inst["status"] != "completed" {
		t.Errorf("after the change: instance %v, want completed", inst["status"])
	}
}

// waitInstance waits for instance id to end and returns it.
func waitInstance(t *testing.T, base, id string) map[string]any {
	t.Helper()
	var inst map[string]any
	relaistest.WaitFor(t, 20*time.Second, "instance "+id+" ends", func() (bool, string) {
		inst = must(t, 200, callH(t, "GET", base+"/api/v1/instances/"+id, bootstrap, nil))
		return inst["status"] != "running", fmt.Sprint(inst["status"])
	})
	return inst
}

// buildFirstWorker builds src, the page's worker, as the page says: in a
// module of its own beside a clone named relais (here a link to this
// repository), and returns the binary.
func buildFirstWorker(t *testing.T, src string, says func(string)) string {
	t.Helper()
	base := t.TempDir()
	if err := os.Symlink(relaistest.Root(), filepath.Join(base, "relais")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "invoicer")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, line := range []string{
		"go mod init invoicer",
		"go mod edit -require github.com/relais/relais@v0.0.0 -replace github.com/relais/relais=../relais",
		"go mod tidy",
		"go vet .",
		"go build -o invoicer .",
	} {
		if strings.HasPrefix(line, "go mod") {
			says(line)
		}
		args := strings.Fields(line)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	return filepath.Join(dir, "invoicer")
}
