package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/relais/relais/internal/dbtest"
)

// TestTokenListAndRevokeCommands: relais token list shows staff tokens
// with their dates, relais token revoke ends one at once (the bootstrap
// token like any other, and it stays revoked across restarts), and the
// last usable admin token is kept.
func TestTokenListAndRevokeCommands(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_BOOTSTRAP_TOKEN": bootstrap}
	getenv := func(k string) string { return env[k] }
	relais := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, getenv, &out, &errOut)
		return out.String(), err
	}
	r := startServe(t, env)
	created, err := relais("token", "create", "--role", "admin", "--name", "ops-admin", "--expires-in", "P90D")
	if err != nil {
		t.Fatal(err)
	}
	opsAdmin := strings.TrimSpace(created)

	list, err := relais("token", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "bootstrap") || !strings.Contains(lines[2], "ops-admin") {
		t.Fatalf("token list:\n%s\nwant a header, bootstrap and ops-admin", list)
	}
	if strings.Contains(list, "rls_") {
		t.Errorf("token list shows a secret:\n%s", list)
	}
	if fields := strings.Fields(lines[2]); fields[len(fields)-1] == "-" {
		t.Errorf("ops-admin shows no expiry: %q", lines[2])
	}
	bootstrapID := strings.Fields(lines[1])[0]
	opsID := strings.Fields(lines[2])[0]

	if out, err := relais("token", "revoke", bootstrapID); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("token revoke %s: %q %v", bootstrapID, out, err)
	}
	if res := call(t, "GET", r.base+"/api/v1/whoami", bootstrap, nil); res.status != 401 {
		t.Errorf("the revoked bootstrap token: %d; want 401", res.status)
	}
	if _, err := relais("token", "revoke", opsID); err == nil || !strings.Contains(err.Error(), "last_admin_token") {
		t.Errorf("revoking the last admin token: %v; want last_admin_token", err)
	}
	r.stop(t)
	again := startServe(t, env)
	if res := call(t, "GET", again.base+"/api/v1/whoami", bootstrap, nil); res.status != 401 {
		t.Errorf("the revoked bootstrap token after a restart: %d; want 401 (it stays revoked)", res.status)
	}
	if res := call(t, "GET", again.base+"/api/v1/whoami", opsAdmin, nil); res.status != 200 {
		t.Errorf("ops-admin after a restart: %d; want 200", res.status)
	}
	if _, err := relais("token", "revoke", "nope"); err == nil {
		t.Error("revoke of a non-number accepted")
	}
}
