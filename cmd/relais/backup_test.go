package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/keyring"
)

// relais backup writes the database to a new file and relais restore
// reads it back into another, in one transaction: a second restore over
// a Relais is refused without --replace, and the restore says when the
// data keys given cannot open the restored values, before a serve would
// refuse to start (or, restored under a running one, push calls fail).
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	ring := keyring.NewKeySpec("k1")
	source := map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_DATA_KEYS": ring, "RELAIS_BOOTSTRAP_TOKEN": bootstrap}
	relais := func(env map[string]string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
		return out.String(), err
	}
	// A serve records the data key and seals a destination's header with it.
	r := startServe(t, source)
	if res := call(t, "PUT", r.base+"/api/v1/destinations/crm", bootstrap,
		strings.NewReader(`{"url": "https://crm.example/hook", "max_timeout": "PT5S", "headers": {"Authorization": "Bearer s3cret"}}`)); res.status != 201 {
		t.Fatalf("put destination: %d %s", res.status, res.body)
	}
	if _, err := relais(source, "token", "create", "--role", "operator", "--name", "ops"); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "relais.dump")
	out, err := relais(source, "backup", file)
	if err != nil || !strings.Contains(out, "written to "+file) || !strings.Contains(out, "RELAIS_DATA_KEYS") {
		t.Fatalf("backup: %q %v; want the file written and the keys to keep named", out, err)
	}
	if _, err := relais(source, "backup", file); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a backup over an existing file: %v, want it refused", err)
	}
	if matches, _ := filepath.Glob(file + "*"); len(matches) != 1 {
		t.Errorf("files beside the backup: %v, want the backup alone", matches)
	}

	// Without the keys the backup was taken with: restored, and told.
	other := map[string]string{"RELAIS_DATABASE_URL": dbtest.EmptyURL(t), "RELAIS_DATA_KEYS": keyring.NewKeySpec("k1")}
	if _, err := relais(other, "restore", file); err == nil || !strings.Contains(err.Error(), "serve will refuse to start") || !strings.Contains(err.Error(), `data key "k1" does not match`) {
		t.Errorf("a restore with another key under k1: %v, want the mismatch told", err)
	}

	target := map[string]string{"RELAIS_DATABASE_URL": dbtest.EmptyURL(t), "RELAIS_DATA_KEYS": ring, "RELAIS_BOOTSTRAP_TOKEN": bootstrap}
	out, err = relais(target, "restore", file)
	if err != nil || !strings.Contains(out, "schema version") || !strings.Contains(out, "open its sealed values") {
		t.Fatalf("restore: %q %v", out, err)
	}
	list, err := relais(target, "token", "list")
	if err != nil || !strings.Contains(list, "ops") || !strings.Contains(list, "bootstrap") {
		t.Errorf("token list of the restored database: %q %v; want bootstrap and ops", list, err)
	}
	if _, err := relais(target, "restore", file); err == nil || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("a restore over a Relais without --replace: %v, want it refused naming --replace", err)
	}
	if _, err := relais(target, "token", "create", "--role", "designer", "--name", "after-restore"); err != nil {
		t.Fatal(err)
	}
	if out, err := relais(target, "restore", "--replace", file); err != nil {
		t.Fatalf("restore --replace: %q %v", out, err)
	}
	if list, _ := relais(target, "token", "list"); strings.Contains(list, "after-restore") || !strings.Contains(list, "ops") {
		t.Errorf("token list after restore --replace:\n%s\nwant the backup's tokens alone", list)
	}
	// Over a database a newer release migrated (going back after an
	// upgrade), --replace would leave what the newer migrations added.
	newer, err := pgxpool.New(context.Background(), target["RELAIS_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newer.Exec(context.Background(), "insert into relais_schema_migrations (version, name) values ($1, 'from_a_newer_release')", engine.LatestSchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := relais(target, "restore", "--replace", file); err == nil || !strings.Contains(err.Error(), "newer than the backup's") {
		t.Errorf("restore --replace over a newer schema: %v, want it refused", err)
	}
	if _, err := newer.Exec(context.Background(), "delete from relais_schema_migrations where name = 'from_a_newer_release'"); err != nil {
		t.Fatal(err)
	}
	newer.Close()
	// The restored header opens: a serve on it shows the destination.
	r2 := startServe(t, target)
	if res := call(t, "GET", r2.base+"/api/v1/destinations/crm", bootstrap, nil); res.status != 200 || !strings.Contains(string(res.body), "Authorization") {
		t.Errorf("the restored destination: %d %s", res.status, res.body)
	}

	if _, err := relais(target, "restore", filepath.Join(t.TempDir(), "missing.dump")); err == nil || !strings.Contains(err.Error(), "backup file") {
		t.Errorf("restore of a missing file: %v", err)
	}
	notADump := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notADump, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := relais(target, "restore", "--replace", notADump); err == nil || !strings.Contains(err.Error(), "pg_restore") {
		t.Errorf("restore of a file that is no dump: %v, want pg_restore's refusal", err)
	}
	if list, _ := relais(target, "token", "list"); !strings.Contains(list, "ops") {
		t.Errorf("a failed restore changed the database:\n%s", list)
	}
}

// libpqURL keeps the password off pg_dump's command line and drops what
// only pgx reads.
func TestLibpqURL(t *testing.T) {
	t.Parallel()
	dsn, pw, err := libpqURL("postgres://app:p%40ss@db:5432/relais?sslmode=require&pool_max_conns=40&statement_cache_capacity=0")
	if err != nil || pw != "p@ss" || strings.Contains(dsn, "pass") || strings.Contains(dsn, "pool_") || strings.Contains(dsn, "statement_cache") || !strings.Contains(dsn, "sslmode=require") || !strings.HasPrefix(dsn, "postgres://app@db:5432/relais") {
		t.Errorf("libpqURL: %q %q %v", dsn, pw, err)
	}
}
