package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

// TestUnreachableDatabaseReportsProgress: a start against a database that
// refuses connections, or accepts them and never answers, says within 5 s
// where it waits and why, then exits naming the cause after
// RELAIS_DATABASE_CONNECT_TIMEOUT; the password appears nowhere.
func TestUnreachableDatabaseReportsProgress(t *testing.T) {
	t.Parallel()
	const password = "s3cret-canary-pass"
	refusing := closedPort(t)
	silent := silentServer(t)
	for _, c := range []struct {
		name, addr, cause string
	}{
		{"refused", refusing, "connection refused"},
		{"silent", silent, "timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr := &testlog.Buffer{}, &testlog.Buffer{}
			env := map[string]string{
				"RELAIS_DATABASE_URL":             "postgres://relais:" + password + "@" + c.addr + "/relais?sslmode=disable",
				"RELAIS_DATABASE_CONNECT_TIMEOUT": "PT6S",
				"RELAIS_LISTEN":                   "127.0.0.1:0",
			}
			began := time.Now()
			done := make(chan error, 1)
			go func() {
				done <- run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, stdout, stderr)
			}()

			want := "waiting for PostgreSQL at " + c.addr + ": "
			for !strings.Contains(stderr.String(), want) {
				if time.Since(began) > 5*time.Second {
					t.Fatalf("no progress report within 5s; stderr:\n%s", stderr)
				}
				time.Sleep(20 * time.Millisecond)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not give up")
			}
			if took := time.Since(began); took < 5*time.Second || took > 10*time.Second {
				t.Errorf("serve gave up after %v; want about the 6 s of RELAIS_DATABASE_CONNECT_TIMEOUT", took)
			}
			if err == nil || !strings.Contains(err.Error(), c.addr) || !strings.Contains(err.Error(), "RELAIS_DATABASE_CONNECT_TIMEOUT") || !strings.Contains(err.Error(), c.cause) {
				t.Errorf("err = %v; want one naming %s, the timeout setting and %q", err, c.addr, c.cause)
			}
			if line := firstLineWith(stderr.String(), want); !strings.Contains(line, c.cause) {
				t.Errorf("progress line %q does not give the cause %q", line, c.cause)
			}
			for where, text := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "error": err.Error()} {
				if strings.Contains(text, password) {
					t.Errorf("the password appears in %s:\n%s", where, text)
				}
			}
		})
	}
}

func firstLineWith(text, sub string) string {
	for line := range strings.Lines(text) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	// Port 1 (tcpmux), which nothing here serves: a port freed by a
	// listener just closed could be given again to the next one, the
	// silent server's included, which then answered the "refused" case
	// with a timeout (CI).
	if c, err := net.DialTimeout("tcp", "127.0.0.1:1", time.Second); err == nil {
		c.Close()
		t.Skip("something listens on 127.0.0.1:1: no port known to refuse")
	}
	return "127.0.0.1:1"
}

// silentServer accepts connections and never says a word, like a server
// behind a stalled network path.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestMalformedDatabaseURLSaysWhatAURLLooksLike: a misspelt scheme or a
// bare host:port is refused before anything starts, with the shape of a
// URL rather than pgx's "invalid keyword/value" alone, and without the
// password.
func TestMalformedDatabaseURLSaysWhatAURLLooksLike(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"postgress://relais:s3cret-canary@127.0.0.1:5432/relais", "127.0.0.1:5432/relais", "postgres://relais:s3cret@canary@127.0.0.1:5432/relais"} {
		env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_LISTEN": "127.0.0.1:0"}
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &testlog.Buffer{}, &testlog.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "RELAIS_DATABASE_URL") || !strings.Contains(err.Error(), "starts with postgres://") && !strings.Contains(err.Error(), "%40") || strings.Contains(err.Error(), "canary") {
			t.Errorf("%s: err = %v; want RELAIS_DATABASE_URL refused with the shape of a URL, no password", url, err)
		}
	}
}

// TestUnencodedPasswordCharactersAreNamed: a password with an @, /, ? or
// # left unencoded cuts the URL inside it (pgx said "invalid port", with
// a redaction that showed part of the password); each is named, the
// password never shown. An @ in the query, or characters encoded, pass.
func TestUnencodedPasswordCharactersAreNamed(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"postgres://relais:Can4ry/x@127.0.0.1:5432/relais":      "(/)",
		"postgres://relais:p@Can4ry:w/rd@127.0.0.1:5432/relais": "(@ and /)",
		"postgres://relais:Can4ry?x@127.0.0.1:5432/relais":      "(?)",

		"postgres://relais:Can4ry@x@127.0.0.1:5432/relais": "(@)",
		// An @ then a ?: the ? is not the query's (verifier QA).
		"postgres://r1:Zq@Can4ry/Part?More#Tail9@127.0.0.1:5432/db1": "(@, /, ? and #)",
		"postgres://r1:Zq@Can4?ry@127.0.0.1:5432/db1":                "(@ and ?)",
	} {
		if got := unencodedUserinfo(url); "("+got+")" != want {
			t.Errorf("%s: %q, want %s", url, got, want)
		}
		env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_LISTEN": "127.0.0.1:0"}
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &testlog.Buffer{}, &testlog.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "must be percent-encoded there "+want) || strings.Contains(err.Error(), "Can") || strings.Contains(err.Error(), "4ry") {
			t.Errorf("%s: err = %v; want the characters %s named, no part of the password", url, err, want)
		}
	}
	for _, url := range []string{"postgres://relais:p%40ss%2Fw%3Frd%23@127.0.0.1:5432/relais", "postgres://relais:pw@127.0.0.1:5432/relais?application_name=a@b",
		"postgres://127.0.0.1:5432/db8?user=r3&password=pw@x", "postgres://r3@127.0.0.1:5432/db3?password=pw@x",
		"postgres://127.0.0.1/relais", "postgresql://relais@127.0.0.1/relais?sslrootcert=/etc/ca.pem"} {
		if got := unencodedUserinfo(url); got != "" {
			t.Errorf("%s: %q, want nothing to say", url, got)
		}
	}
}

// TestUnencodedHashIsRefused: a # cuts a URL's fragment off, PostgreSQL
// reading nothing from it: a password's # in the query form was dropped
// without a word (verifier QA), as in the user name's.
func TestUnencodedHashIsRefused(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"postgresql://nohost.invalid/relais?user=relais&password=Zq@Se/cr?et#9", "postgres://relais:Can#4ry@127.0.0.1:5432/relais"} {
		env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_LISTEN": "127.0.0.1:0"}
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &testlog.Buffer{}, &testlog.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "%23") || strings.Contains(err.Error(), "cr?et") || strings.Contains(err.Error(), "4ry") {
			t.Errorf("%s: err = %v; want the # refused, without the password", url, err)
		}
	}
}

// TestUnparsableURLWithAPasswordIsNotQuoted: pgx quotes a URL it cannot
// parse, redacting the password only up to the first @; a password whose
// shape the check above does not catch must not show either.
func TestUnparsableURLWithAPasswordIsNotQuoted(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"postgres://r1:Zq@Can4ry:w@127.0.0.1", "postgres://r1@h/db?password=Can4ry&x"} {
		env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_LISTEN": "127.0.0.1:0"}
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &testlog.Buffer{}, &testlog.Buffer{})
		if err == nil || strings.Contains(err.Error(), "Can4ry") || strings.Contains(err.Error(), "4ry") {
			t.Errorf("%s: err = %v; want a refusal without the password", url, err)
		}
	}
}

// TestURLParameterRefusalNamesTheParameter: a URL that parses, refused
// for one of its parameters, is refused naming that parameter, the
// password never shown (SRE QA: every case read as a password to
// percent-encode).
func TestURLParameterRefusalNamesTheParameter(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"postgres://r1:Can4ry@127.0.0.1:5432/db?sslmode=bogus":             "sslmode is invalid",
		"postgres://r1:Can4ry@127.0.0.1:99999/db":                          "invalid port",
		"postgres://r1:Can4ry@127.0.0.1/db?pool_max_conns=abc":             "pool_max_conns",
		"postgres://r1@127.0.0.1/db?password=Can4ry&connect_timeout=abc":   "connect_timeout",
		"postgres://r1:p%40Can4ry@127.0.0.1/db?pool_max_conn_lifetime=abc": "pool_max_conn_lifetime",
		// The keyword/value form, which pgx takes too (verifier QA).
		"host=127.0.0.1 user=r1 password=Can4ry sslmode=bogus":     "sslmode is invalid",
		"host=127.0.0.1 user=r1 password='Can4ry x' sslmode=bogus": "sslmode is invalid",
	} {
		env := map[string]string{"RELAIS_DATABASE_URL": url, "RELAIS_LISTEN": "127.0.0.1:0"}
		err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &testlog.Buffer{}, &testlog.Buffer{})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "4ry") {
			t.Errorf("%s: err = %v; want %q named, without the password", url, err, want)
		}
	}
}

// TestPoolSizeDefaultsTo20UnlessTheURLSetsIt: pgx's own default (the
// cores) is too small for a replica, but a pool_max_conns in the URL is
// the operator's and is kept.
func TestPoolSizeDefaultsTo20UnlessTheURLSetsIt(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for given, want := range map[string]int32{url: 20, url + sep + "pool_max_conns=3": 3, url + sep + "pool_max_conns=40": 40} {
		cfg := config.Default()
		cfg.DatabaseURL = given
		db, err := openDatabase(context.Background(), cfg, slog.New(slog.DiscardHandler), false)
		if err != nil {
			t.Fatal(err)
		}
		if got := db.pool.Config().MaxConns; got != want {
			t.Errorf("%s: pool of %d connections, want %d", given, got, want)
		}
		db.close()
	}
}

// TestSessionSettingsArePinned: a database's (or role's) defaults that
// would cancel Relais's statements, fail its transactions or end its
// LISTEN connection are overridden on its connections, but for a setting
// the URL gives, which is the operator's.
func TestSessionSettingsArePinned(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	ctx := context.Background()
	pcfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"statement_timeout = '1ms'", "lock_timeout = '1ms'", "idle_session_timeout = '1s'",
		"default_transaction_isolation = 'serializable'", "default_transaction_read_only = on"} {
		if _, err := admin.Exec(ctx, "alter database "+pgx.Identifier{pcfg.Database}.Sanitize()+" set "+set); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close(ctx)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for given, want := range map[string]string{url: "0", url + sep + "statement_timeout=5s": "5s", url + sep + "options=-c%20statement_timeout%3D7s": "7s"} {
		cfg := config.Default()
		cfg.DatabaseURL = given
		db, err := openDatabase(ctx, cfg, slog.New(slog.DiscardHandler), false)
		if err != nil {
			t.Fatal(err)
		}
		var timeout, lock, idle, isolation, readOnly string
		if err := db.pool.QueryRow(ctx, `select current_setting('statement_timeout'), current_setting('lock_timeout'), current_setting('idle_session_timeout'),
			current_setting('transaction_isolation'), current_setting('transaction_read_only')`).Scan(&timeout, &lock, &idle, &isolation, &readOnly); err != nil {
			t.Fatal(err)
		}
		if timeout != want || lock != "0" || idle != "0" || isolation != "read committed" || readOnly != "off" {
			t.Errorf("%s: statement_timeout %s, lock_timeout %s, idle_session_timeout %s, isolation %s, read only %s; want %s, 0, 0, read committed, off",
				given, timeout, lock, idle, isolation, readOnly, want)
		}
		db.close()
	}
}

// TestServeRefusesARoleShortOfPrivileges: a role serve uses, less
// privileged than the schema's owner, that lacks its rights on a table (a
// later migration's, without default privileges) is refused at boot with
// the grants to run, rather than failing each statement on that table.
func TestServeRefusesARoleShortOfPrivileges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner := dbtest.URL(t)
	admin, err := pgx.Connect(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	role := fmt.Sprintf("relais_app_%d", time.Now().UnixNano())
	for _, stmt := range []string{
		"create role " + role + " login password 'app-secret'",
		"grant usage on schema public to " + role,
		"grant select, insert, update, delete on all tables in schema public to " + role,
		"revoke all on bulk_actions from " + role,
		"revoke delete on retention_since from " + role,
		"revoke select on occurrence_heads from " + role,
		// Another application's table in the shared schema, and the
		// identity columns' sequences: none of Relais's business.
		"create table other_app_table (id int)",
		"revoke all on other_app_table from " + role,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "drop owned by "+role)
		_, _ = admin.Exec(context.Background(), "drop role "+role)
	})
	u, err := neturl.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(role, "app-secret")
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = checkDatabaseRole(ctx, pool, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "bulk_actions (SELECT, INSERT, UPDATE, DELETE), occurrence_heads (SELECT), retention_since (DELETE):") ||
		!strings.Contains(err.Error(), "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+role) || strings.Contains(err.Error(), "attempts (") ||
		strings.Contains(err.Error(), "other_app_table") || strings.Contains(err.Error(), "_seq") {
		t.Errorf("err = %v; want bulk_actions, occurrence_heads and retention_since named, nothing else, with the grants to run", err)
	}
	// The default privileges are for the role that migrates, whoever runs
	// them (SRE QA: a superuser running them made them its own).
	var tablesOwner string
	if err := admin.QueryRow(ctx, "select pg_get_userbyid(relowner) from pg_class where oid = 'relais_schema_migrations'::regclass").Scan(&tablesOwner); err != nil {
		t.Fatal(err)
	}
	if want := "ALTER DEFAULT PRIVILEGES FOR ROLE " + engine.SQLName(tablesOwner) + " IN SCHEMA public GRANT"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v; want %q", err, want)
	}
	if _, err := admin.Exec(ctx, "grant select, insert, update, delete on bulk_actions, retention_since, occurrence_heads to "+role); err != nil {
		t.Fatal(err)
	}
	if _, err := checkDatabaseRole(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("with every privilege: %v", err)
	}
}

// TestWhatWaitingCannotCureIsReportedAtOnce: a server without TLS under
// sslmode=require, or a role that may not connect, is reported at once
// rather than after RELAIS_DATABASE_CONNECT_TIMEOUT of "still unreachable".
func TestWhatWaitingCannotCureIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{"28P01": false, "3D000": false, "42501": false, "42704": false, "08P01": false, "22023": false, "57P03": true} {
		if got := worthWaiting(fmt.Errorf("connect: %w", &pgconn.PgError{Code: code})); got != want {
			t.Errorf("worthWaiting(%s) = %v, want %v", code, got, want)
		}
	}
	url := dbtest.EmptyURL(t)
	url = strings.NewReplacer("sslmode=disable", "sslmode=require", "sslmode=prefer", "sslmode=require").Replace(url)
	if !strings.Contains(url, "sslmode=require") {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + "sslmode=require"
	}
	cfg := config.Default()
	cfg.DatabaseURL = url
	cfg.DatabaseConnectTimeout = time.Minute
	began := time.Now()
	_, err := openDatabase(context.Background(), cfg, slog.New(slog.DiscardHandler), false)
	if err == nil || !strings.Contains(err.Error(), "offers no TLS") || time.Since(began) > 20*time.Second {
		t.Errorf("sslmode=require without TLS: %v after %s; want refused at once, saying the server offers no TLS", err, time.Since(began))
	}
}

// relais migrate status lists what migrate would apply, applying nothing.
func TestMigrateStatusListsPendingMigrations(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RELAIS_DATABASE_URL": dbtest.EmptyURL(t)}
	getenv := func(k string) string { return env[k] }
	var out testlog.Buffer
	if err := run(context.Background(), []string{"migrate", "status"}, getenv, &out, &testlog.Buffer{}); err != nil {
		t.Fatal(err)
	}
	last := engine.Migrations()[len(engine.Migrations())-1].Name
	if !strings.HasPrefix(out.String(), "schema version 0; relais migrate would apply ") || !strings.Contains(out.String(), "  "+last+"\n") {
		t.Errorf("status of an empty database: %q", out.String())
	}
	out = testlog.Buffer{}
	if err := run(context.Background(), []string{"migrate", "status"}, getenv, &out, &testlog.Buffer{}); err != nil || !strings.HasPrefix(out.String(), "schema version 0;") {
		t.Errorf("status again: %q %v; want still nothing applied", out.String(), err)
	}
	if err := run(context.Background(), []string{"migrate"}, getenv, &testlog.Buffer{}, &testlog.Buffer{}); err != nil {
		t.Fatal(err)
	}
	out = testlog.Buffer{}
	if err := run(context.Background(), []string{"migrate", "status"}, getenv, &out, &testlog.Buffer{}); err != nil || !strings.Contains(out.String(), "up to date") {
		t.Errorf("status after migrate: %q %v", out.String(), err)
	}
}

// The URL's search_path is set on each connection after it opens (PgBouncer
// refuses it as a startup parameter), and Relais's tables land there.
func TestSearchPathOfTheURLIsSetAfterConnecting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.EmptyURL(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "create schema relais_here"); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	cfg := config.Default()
	cfg.DatabaseURL = url + sep + "search_path=relais_here"
	db, applied, err := openMigrated(ctx, cfg, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	if _, set := db.pool.Config().ConnConfig.RuntimeParams["search_path"]; set || len(applied) == 0 {
		t.Errorf("search_path still a startup parameter (%v), or nothing migrated (%d)", set, len(applied))
	}
	var where string
	if err := admin.QueryRow(ctx, "select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.relname = 'relais_schema_migrations'").Scan(&where); err != nil || where != "relais_here" {
		t.Errorf("migrations table in %q (%v), want relais_here", where, err)
	}
}

// TestDistinctLines: pgx's line per attempt, the same twice with
// sslmode=prefer, is said once; other lines and their order stay.
func TestDistinctLines(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"failed to connect:\n\ta: refused\n\ta: refused": "failed to connect:\n\ta: refused",
		"failed to connect:\n\ta: refused\n\tb: refused": "failed to connect:\n\ta: refused\n\tb: refused",
		"one line": "one line",
	} {
		if got := distinctLines(in); got != want {
			t.Errorf("distinctLines(%q) = %q, want %q", in, got, want)
		}
	}
}
