package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/keyring"
)

// TestServeRefusesToStartWithoutTheKey: once sealed values exist on an
// external database, serve without a key, or with a wrong one, fails closed.
func TestServeRefusesToStartWithoutTheKey(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	must(t, 201, callH(t, "POST", r.base+"/api/v1/processes/onboard_company/instances", bootstrap, map[string]any{"inputs": map[string]any{
		"company": map[string]any{"name": "Acme", "country": "FR", "contact": map[string]any{"email": "a@acme.example"}}}}))
	r.stop(t)

	for name, keys := range map[string]string{"no key": "", "a wrong key": keyring.NewKeySpec("t1")} {
		env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_LISTEN": "127.0.0.1:0", "RELAIS_DATA_KEYS": keys}
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "key") {
			t.Errorf("%s: serve returned %v; want a refusal naming the data key", name, err)
		}
		// A wrong key is refused naming where it came from: the fix is there.
		if keys != "" && (err == nil || !strings.HasPrefix(err.Error(), "RELAIS_DATA_KEYS: data key")) {
			t.Errorf("%s: serve returned %v; want the refusal to name RELAIS_DATA_KEYS", name, err)
		}
	}
	// With the right key it starts again.
	startServe(t, map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_DATA_KEYS": testDataKeys})
}

// TestKeysRotateCommand rotates to a new key with the CLI and checks the
// old key can then be dropped.
func TestKeysRotateCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	r.stop(t)
	both := keyring.NewKeySpec("t2") + "," + testDataKeys
	var out strings.Builder
	env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_DATA_KEYS": both}
	if err := run(context.Background(), []string{"keys", "rotate"}, func(k string) string { return env[k] }, &out, io.Discard); err != nil {
		t.Fatalf("keys rotate: %v", err)
	}
	oldID, _, _ := strings.Cut(testDataKeys, ":")
	if !strings.Contains(out.String(), "destinations: 1 re-encrypted") || !strings.Contains(out.String(), "retired "+oldID+",") {
		t.Errorf("rotate output:\n%s\nwant the old key %s said retired", out.String(), oldID)
	}
	// Run again, nothing is left to retire, and it says so (lifecycle QA:
	// it said older keys were retired).
	out.Reset()
	if err := run(context.Background(), []string{"keys", "rotate"}, func(k string) string { return env[k] }, &out, io.Discard); err != nil {
		t.Fatalf("keys rotate again: %v", err)
	}
	if !strings.Contains(out.String(), "no other key was left to retire") {
		t.Errorf("rotate again output:\n%s\nwant nothing said retired", out.String())
	}
	startServe(t, map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_DATA_KEYS": strings.Split(both, ",")[0]})
}
