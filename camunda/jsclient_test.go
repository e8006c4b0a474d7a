package camunda_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// jsClient is the official Camunda 7 external task client for Node.js, as
// published on npm (the newest 3.x when this test was written).
const jsClient = "camunda-external-task-client-js@3.1.0"

// installJSClient installs jsClient with npm into a fresh folder and
// returns it. Without node or npm on the machine the test is skipped, with
// a message saying so, except under CI=true, where it fails: CI must run it.
func installJSClient(t *testing.T) string {
	t.Helper()
	relaistest.RequireNode(t, "the official Camunda JavaScript client test")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true, "type": "module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error", jsClient)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", jsClient, err, out)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "jsclient", "worker.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "worker.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The official JavaScript client, unmodified, authenticates with Basic,
// subscribes to a topic, reads typed variables, completes with typed
// variables, reports failures with retries, throws a BPMN error and
// extends a lock, against a running Relais.
func TestOfficialJavaScriptClient(t *testing.T) {
	t.Parallel()
	dir := installJSClient(t)
	f := setup(t, map[string]any{"max_attempts": 2})
	instances := map[string]string{}
	occurrences := map[string]string{}
	for _, name := range []string{"complete-me", "extend-me", "fail-me", "bpmn-me"} {
		instances[name], occurrences[name] = f.start(name)
	}
	js := relaistest.StartNode(t, dir, "worker.mjs",
		"RELAIS_ENGINE_REST="+f.URL+"/engine-rest",
		"RELAIS_CONSUMER="+f.consumer,
		"RELAIS_TOKEN="+f.token,
		"RELAIS_TOPIC="+typedKey)
	js.Wait(t, 2*time.Minute)
	events := js.Events()

	t.Logf("events: %v", events)
	var received map[string]any
	var failures []float64
	for _, ev := range events {
		switch ev["event"] {
		case "received":
			received = ev
		case "failed":
			failures = append(failures, ev["retries"].(float64))
		}
	}
	// What the handler read, through the client's own Variables.
	if received == nil {
		t.Fatalf("the complete-me handler reported nothing: %v", events)
	}
	wantTypes := map[string]string{"name": "string", "count": "integer", "big": "long", "ratio": "double", "vip": "boolean",
		"since": "date", "seen_at": "date", "tier": "string", "address": "json", "tags": "json", "card": "string"}
	if got := fmt.Sprint(received["types"]); got != fmt.Sprint(wantTypes) {
		t.Errorf("the client typed the variables %s, want %s", got, fmt.Sprint(wantTypes))
	}
	for k, want := range map[string]any{"count": 42.0, "big": 5000000000.0, "vip": true, "since": "2026-12-01T00:00:00.000Z",
		"card": "4111111111111111", "retries": 2.0} {
		if received[k] != want {
			t.Errorf("the handler read %s = %v, want %v", k, received[k], want)
		}
	}
	if fmt.Sprint(received["address"]) != "map[city:Lyon zip:69001]" || fmt.Sprint(received["tags"]) != "[a b]" {
		t.Errorf("Json variables read as %v and %v, want the object and the list", received["address"], received["tags"])
	}

	// complete-me: typed outputs, converted by the contract.
	o := f.occurrence(occurrences["complete-me"])
	want := `{"at":"2026-12-01T14:04:05Z","crm_id":"JS-42","due":"2026-12-24","items":[1,2,3],"meta":{"note":"from js"},"ok":true,"rate":0.5,"result":"created","score":7}`
	if got := string(mustMarshal(o["outputs"])); got != want {
		t.Errorf("complete-me outputs %s, want %s", got, want)
	}
	if ended := f.WaitEnded(instances["complete-me"], 5*time.Second); ended["end_node"] != "done" {
		t.Errorf("complete-me ended at %v, want done", ended["end_node"])
	}
	// extend-me: the lock was extended to 120 s before the completion.
	o = f.Must(200, "GET", "/api/v1/occurrences/"+occurrences["extend-me"], f.Operator, nil).JSON(t)
	attempt := o["attempts"].([]any)[0].(map[string]any)
	lock := relaistest.TimeOf(t, "lock_expires_at", attempt["lock_expires_at"]).Sub(relaistest.TimeOf(t, "reserved_at", attempt["reserved_at"]))
	if lock < 119*time.Second || o["status"] != "completed" {
		t.Errorf("extend-me: %v with a lock of %v, want completed after a lock extended to 120s", o["status"], lock)
	}
	// fail-me: retries 2 → failure with 1 → offered again → failure with 0:
	// terminal, on_error "*".
	if fmt.Sprint(failures) != "[1 0]" {
		t.Errorf("fail-me reported retries %v, want [1 0]", failures)
	}
	o = f.occurrence(occurrences["fail-me"])
	if o["status"] != "failed" || o["error_code"] != "external_task_failure" || o["error_message"] != "attempt with 1 retries failed" {
		t.Errorf("fail-me: %v %v %v", o["status"], o["error_code"], o["error_message"])
	}
	if ended := f.WaitEnded(instances["fail-me"], 5*time.Second); ended["end_node"] != "failed" {
		t.Errorf("fail-me ended at %v, want failed", ended["end_node"])
	}
	// bpmn-me: the error code routes.
	if ended := f.WaitEnded(instances["bpmn-me"], 5*time.Second); ended["end_node"] != "down" {
		t.Errorf("bpmn-me ended at %v, want down (on_error CRM_DOWN)", ended["end_node"])
	}
}
