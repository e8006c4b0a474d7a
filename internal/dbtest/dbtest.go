// Package dbtest gives each test its own migrated PostgreSQL database, cloned
// from a template database migrated once, on RELAIS_TEST_DATABASE_URL when set
// or else on one embedded cluster per test package.
//
// A package that uses it declares
//
//	func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }
//
// so the embedded cluster is stopped when its tests end. The schema comes
// from the caller so that the engine's own tests can use this package.
package dbtest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/pgutc"
	"github.com/relais/relais/internal/pguuid"
)

// EnvURL names the variable pointing tests at an existing server. The role
// must be allowed to create databases.
const EnvURL = "RELAIS_TEST_DATABASE_URL"

var (
	mainUsed  bool
	setupOnce sync.Once
	setupErr  error
	adminURL  string // a URL to an existing database on the server (for CREATE DATABASE)
	external  bool
	cluster   *embeddedpg.Cluster
	baseDir   string
	template  string
	counter   atomic.Int64
	createMu  sync.Mutex

	schemaFingerprint string
	schemaMigrate     Migrate
)

// LeakOptions are what goleak ignores after a package's tests: idle HTTP
// keep-alive connections of test clients, which the transport closes on
// its own schedule, not leaks of the code under test.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	}
}

// Migrate applies a schema to an empty database (engine.Migrate).
type Migrate func(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]int, error)

// Main runs the tests of a package and tears down what they started.
// Template databases are named by fingerprint (engine.SchemaFingerprint), so a
// changed schema never reuses a stale template, and built with migrate.
//
// Once the tests passed and the cluster stopped, it fails the run on a
// goroutine that outlived them (goleak.Find with LeakOptions). Each of
// after runs then, for a package's own checks; an error it returns fails
// the run.
func Main(m *testing.M, fingerprint string, migrate Migrate, after ...func() error) {
	mainUsed = true
	schemaFingerprint, schemaMigrate = fingerprint, migrate
	code := m.Run()
	if cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = cluster.Stop(ctx)
		cancel()
	}
	if baseDir != "" {
		_ = os.RemoveAll(baseDir)
	}
	// Every replica, runner, listener and pool a test started must be gone
	// with it: a goroutine left behind is a leak the product would have too.
	if code == 0 && os.Getenv("RELAIS_SKIP_LEAK_CHECK") == "" {
		if err := goleak.Find(LeakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	for _, check := range after {
		if code != 0 {
			break
		}
		if err := check(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if u := os.Getenv(EnvURL); u != "" {
		adminURL, external = u, true
	} else {
		dir, err := os.MkdirTemp("/tmp", "relais-test-pg-")
		if err != nil {
			return err
		}
		// The cluster runs as an unprivileged user when tests run as root: it
		// must be able to traverse this folder.
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
		baseDir = dir
		c, err := embeddedpg.Start(ctx, embeddedpg.Options{Dir: dir + "/pg", Fast: true, BinDir: os.Getenv("RELAIS_PG_BIN"),
			Settings: map[string]string{"max_connections": "400"}})
		if err != nil {
			return err
		}
		cluster = c
		adminURL = c.URL("postgres")
	}
	name, err := ensureTemplate(ctx)
	if err != nil {
		return err
	}
	template = name
	return nil
}

// ensureTemplate creates the migrated template database once per server and
// migration set. Test packages run as parallel processes, so creation is
// serialized with an advisory lock and published by an atomic rename.
func ensureTemplate(ctx context.Context) (string, error) {
	name := "relais_tmpl_" + schemaFingerprint
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("dbtest: connect %s: %w", redact(adminURL), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "select pg_advisory_lock(7262656)"); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "select pg_advisory_unlock(7262656)")
	var exists bool
	if err := conn.QueryRow(ctx, "select exists(select 1 from pg_database where datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	build := fmt.Sprintf("%s_build_%d", name, os.Getpid())
	if _, err := conn.Exec(ctx, "drop database if exists "+pgx.Identifier{build}.Sanitize()); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "create database "+pgx.Identifier{build}.Sanitize()); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(adminURL, build))
	if err != nil {
		return "", err
	}
	_, err = schemaMigrate(ctx, pool, nil)
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("alter database %s rename to %s", pgx.Identifier{build}.Sanitize(), pgx.Identifier{name}.Sanitize())); err != nil {
		return "", err
	}
	return name, nil
}

func server(t testing.TB) {
	t.Helper()
	if !mainUsed {
		t.Fatal("dbtest: declare func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) } in this package")
	}
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("dbtest: %v", setupErr)
	}
}

func createDatabase(t testing.TB, from string) string {
	t.Helper()
	server(t)
	name := fmt.Sprintf("relais_test_%d_%d", os.Getpid(), counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	stmt := "create database " + pgx.Identifier{name}.Sanitize()
	if from != "" {
		stmt += " template " + pgx.Identifier{from}.Sanitize()
	}
	// Two clones of one template at the same instant can fail with "source
	// database is being accessed by other users"; retrying is enough.
	for attempt := 0; ; attempt++ {
		createMu.Lock()
		_, err = conn.Exec(ctx, stmt)
		createMu.Unlock()
		if err == nil || attempt == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dbtest: %s: %v", stmt, err)
	}
	if external {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := pgx.Connect(ctx, adminURL)
			if err != nil {
				return
			}
			defer c.Close(ctx)
			_, _ = c.Exec(ctx, "drop database if exists "+pgx.Identifier{name}.Sanitize()+" with (force)")
		})
	}
	return withDatabase(adminURL, name)
}

// URL returns the URL of a new database holding the current schema.
func URL(t testing.TB) string {
	t.Helper()
	server(t)
	return createDatabase(t, template)
}

// EmptyURL returns the URL of a new database without any schema, for tests of
// migrations themselves.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "")
}

// Pool returns a pool on a new database holding the current schema, closed
// when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL(t))
	if err != nil {
		t.Fatalf("dbtest: pool: %v", err)
	}
	// As the server configures its pool, so that tests run the codec.
	pguuid.Configure(cfg)
	pgutc.Configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func withDatabase(raw, db string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic("dbtest: bad database URL: " + err.Error())
	}
	u.Path = "/" + db
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
