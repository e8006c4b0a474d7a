package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/isoduration"
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

	// The id may follow the flags, as in most command lines.
	if out, err := relais("token", "revoke", "--log-level", "warn", "--log-format=text", bootstrapID); err != nil || !strings.Contains(out, "revoked") {
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

// TestAdminCommandsUpgradeNoSchema: token and keys commands migrate an
// empty database (a token made by automation before the first serve) but
// never upgrade a schema (from a new release's binary, during a rolling
// upgrade, that would change it under the old replicas): an older schema
// is refused with what to run, and left as it was.
func TestAdminCommandsUpgradeNoSchema(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_DATA_KEYS": testDataKeys}
	relais := func(args ...string) error {
		var out, errOut bytes.Buffer
		return run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := relais("token", "list"); err != nil {
		t.Fatalf("token list on an empty database: %v", err)
	}
	latest := engine.LatestSchemaVersion()
	if v, err := engine.SchemaVersion(ctx, pool); err != nil || v != latest {
		t.Fatalf("an empty database after token list is at %d (%v), want %d", v, err, latest)
	}
	if _, err := pool.Exec(ctx, "delete from relais_schema_migrations where version = $1", latest); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("at version %d and this relais expects %d: run relais migrate first", latest-1, latest)
	for _, args := range [][]string{{"token", "list"}, {"token", "create", "--role", "admin", "--name", "x"}, {"keys", "rotate"}} {
		if err := relais(args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v on an older schema: %v, want %q", args, err, want)
		}
	}
	if v, _ := engine.SchemaVersion(ctx, pool); v != latest-1 {
		t.Errorf("the refused commands moved the schema to %d", v)
	}
}

// TestTokenCreateNamesWhatIsWrongWithExpiresIn: --expires-in is read as
// the API reads expires_in, and refused with its hint (before any
// database is opened).
func TestTokenCreateNamesWhatIsWrongWithExpiresIn(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"90d":  "must start with P",
		"P3M":  "years and months have no fixed length",
		"pt1h": "in upper case: PT1H",
		"PT0S": `--expires-in "PT0S": must be a positive duration`,
	} {
		err := run(context.Background(), []string{"token", "create", "--role", "admin", "--name", "x", "--expires-in", in},
			func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--expires-in %s: %v; want %q", in, err, want)
		}
		if _, perr := isoduration.Parse(in); perr != nil && (err == nil || !strings.Contains(err.Error(), perr.Error())) {
			t.Errorf("--expires-in %s: %v; want the API's message %q", in, err, perr)
		}
	}
}
