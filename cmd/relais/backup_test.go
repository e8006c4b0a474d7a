package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/keyring"
)

// relais backup writes the database to a new file, readable by its owner
// alone, and says whether the keys configured open it; relais restore
// reads it back into an empty database, in one transaction, refuses one
// that holds anything (in place, pg_restore --clean kept what the backup
// lacks: what newer migrations added, other applications' tables, which
// it rolled back), and says when the data keys given cannot open the
// restored values, before a serve would refuse to start.
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

	// A console session, live when the backup is taken.
	if pool, err := pgxpool.New(context.Background(), source["RELAIS_DATABASE_URL"]); err != nil {
		t.Fatal(err)
	} else {
		_, err = pool.Exec(context.Background(), `insert into console_sessions (key, token_hash, csrf, created_at, expires_at, ends_at)
			values ('\x01', '\x02', 'c', now(), now() + interval '1 hour', now() + interval '2 hours')`)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
	}

	file := filepath.Join(t.TempDir(), "relais.dump")
	out, err := relais(source, "backup", file)
	if err != nil || !strings.Contains(out, "written to "+file) || !strings.Contains(out, "open with the data keys of RELAIS_DATA_KEYS") {
		t.Fatalf("backup: %q %v; want the file written and the keys to keep named", out, err)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode: %v %v, want 0600 (it holds business data in clear)", info.Mode(), err)
	}
	// Keys that do not open it are said not to, not named as the ones
	// to keep.
	wrongKeys := map[string]string{"RELAIS_DATABASE_URL": source["RELAIS_DATABASE_URL"], "RELAIS_DATA_KEYS": keyring.NewKeySpec("k1")}
	if out, err := relais(wrongKeys, "backup", filepath.Join(t.TempDir(), "wrong-keys.dump")); err != nil || !strings.Contains(out, "warning: the data keys of RELAIS_DATA_KEYS do not open its sealed values") {
		t.Errorf("a backup with keys that do not open it: %q %v, want a warning", out, err)
	}
	if _, err := relais(source, "backup", file); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a backup over an existing file: %v, want it refused", err)
	}
	if matches, _ := filepath.Glob(file + "*"); len(matches) != 1 {
		t.Errorf("files beside the backup: %v, want the backup alone", matches)
	}
	// What another local user planted where a backup writes is neither
	// written through nor made the backup (security QA: a FILE.partial
	// readable by all, or a symbolic link to a file to clobber).
	dir := t.TempDir()
	planted, victim := filepath.Join(dir, "planted.dump"), filepath.Join(dir, "victim.conf")
	if err := os.WriteFile(planted+".partial", nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "linked.dump")
	if err := os.Symlink(victim, linked+".partial"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{planted, linked} {
		if _, err := relais(source, "backup", f); err != nil {
			t.Fatalf("backup beside a planted %s.partial: %v", filepath.Base(f), err)
		}
		if info, err := os.Lstat(f); err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want a new regular file for its owner alone", filepath.Base(f), info.Mode(), err)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me" {
		t.Errorf("the planted link's target now holds %d bytes (%v), want it untouched", len(b), err)
	}
	if b, err := os.ReadFile(planted + ".partial"); err != nil || len(b) != 0 {
		t.Errorf("the planted file now holds %d bytes (%v), want it untouched", len(b), err)
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
	// The source's replicas noted their retention (the serve above); they
	// do not run on the restored database, whose deletions they would
	// hold back for a day.
	var notes int
	if pool, err := pgxpool.New(context.Background(), target["RELAIS_DATABASE_URL"]); err != nil {
		t.Fatal(err)
	} else {
		err = pool.QueryRow(context.Background(), "select count(*) from retention_settings").Scan(&notes)
		if err != nil || notes != 0 {
			t.Errorf("the restored database keeps %d retention notes (%v), want none", notes, err)
		}
		// Nor console sessions: a rollback must not sign in again those
		// signed out since the backup (verifier QA).
		var sessions int
		err = pool.QueryRow(context.Background(), "select count(*) from console_sessions").Scan(&sessions)
		pool.Close()
		if err != nil || sessions != 0 {
			t.Errorf("the restored database keeps %d console sessions (%v), want none", sessions, err)
		}
	}
	list, err := relais(target, "token", "list")
	if err != nil || !strings.Contains(list, "ops") || !strings.Contains(list, "bootstrap") {
		t.Errorf("token list of the restored database: %q %v; want bootstrap and ops", list, err)
	}
	if _, err := relais(target, "restore", file); err == nil || !strings.Contains(err.Error(), "the database is not empty") {
		t.Errorf("a restore over a Relais: %v, want it refused", err)
	}
	// Not even beside another application's table alone.
	shared := map[string]string{"RELAIS_DATABASE_URL": dbtest.EmptyURL(t), "RELAIS_DATA_KEYS": ring}
	other2, err := pgxpool.New(context.Background(), shared["RELAIS_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other2.Exec(context.Background(), "create table billing_invoices (id int)"); err != nil {
		t.Fatal(err)
	}
	other2.Close()
	if _, err := relais(shared, "restore", file); err == nil || !strings.Contains(err.Error(), "the database is not empty (1 tables") {
		t.Errorf("a restore beside another application's table: %v, want it refused", err)
	}
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
	if _, err := relais(target, "restore", notADump); err == nil || !strings.Contains(err.Error(), "pg_restore") {
		t.Errorf("restore of a file that is no dump: %v, want pg_restore's refusal", err)
	}
	if list, _ := relais(target, "token", "list"); !strings.Contains(list, "ops") {
		t.Errorf("a failed restore changed the database:\n%s", list)
	}
}

// connSettings reads both forms of RELAIS_DATABASE_URL, so that the
// password and the rest reach pg_dump through libpq's environment rather
// than its command line (QA saw a keyword/value string's password, and a
// URL's ?password=, in ps), and what only pgx reads (search_path,
// pool_max_conns) is not passed to libpq, which refused it.
func TestConnSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw  string
		want map[string]string
	}{
		{"postgres://app:p%40ss@db:5432/relais?sslmode=require&pool_max_conns=40&search_path=relais",
			map[string]string{"user": "app", "password": "p@ss", "host": "db", "port": "5432", "dbname": "relais", "sslmode": "require", "pool_max_conns": "40", "search_path": "relais"}},
		{"postgresql://app@db1:5432,db2:5433/relais?password=s3cret",
			map[string]string{"user": "app", "password": "s3cret", "host": "db1,db2", "port": "5432,5433", "dbname": "relais"}},
		{`host=127.0.0.1 port = 5433 user=postgres password='it\'s a \\secret' dbname=relais2`,
			map[string]string{"host": "127.0.0.1", "port": "5433", "user": "postgres", "password": `it's a \secret`, "dbname": "relais2"}},
		{`host=db password=a\ b dbname=x`, map[string]string{"host": "db", "password": "a b", "dbname": "x"}},
	} {
		got, err := connSettings(c.raw)
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q (all: %v)", c.raw, k, got[k], v, got)
			}
		}
	}
	if _, err := connSettings("host=db password='unterminated"); err == nil {
		t.Error("an unterminated quote was read")
	}
}

// A backup or restore stopped by Ctrl-C says so, not "signal: killed",
// which reads as the tool's crash.
func TestInterruptedToolSaysSo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := runPGTool(ctx, "/bin/true", "postgres://app:pw@db/relais")
	if err == nil || !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), "nothing was written") {
		t.Errorf("an interrupted tool: %v", err)
	}
	// Interrupted before pg_dump ran, a backup says so too, once (it said
	// "context canceled": verifier QA).
	env := map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t)}
	err = run(ctx, []string{"backup", filepath.Join(t.TempDir(), "early.dump")}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	if err == nil || strings.Count(err.Error(), "interrupted") != 1 || !strings.Contains(err.Error(), "nothing was written") {
		t.Errorf("a backup interrupted early: %v", err)
	}
}

// A backup a newer relais made is restored, and said to be newer than this
// binary (lifecycle QA: it said nothing, where an older one is said to
// need migrations).
func TestRestoreSaysABackupIsNewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	source := dbtest.URL(t)
	env := map[string]string{"RELAIS_DATABASE_URL": source}
	relais := func(env map[string]string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, func(k string) string { return env[k] }, &out, io.Discard)
		return out.String(), err
	}
	pool, err := pgxpool.New(ctx, source)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	known := engine.LatestSchemaVersion()
	if _, err := pool.Exec(ctx, "insert into relais_schema_migrations (version, name) values ($1, 'from_the_future')", known+1); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "newer.dump")
	if _, err := relais(env, "backup", file); err != nil {
		t.Fatal(err)
	}
	out, err := relais(map[string]string{"RELAIS_DATABASE_URL": dbtest.EmptyURL(t)}, "restore", file)
	if want := fmt.Sprintf("schema version %d (newer than this binary's %d", known+1, known); err != nil || !strings.Contains(out, want) {
		t.Errorf("restore of a newer backup: %q, %v; want %q", out, err, want)
	}
}
