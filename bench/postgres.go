package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/embeddedpg"
)

// postgres is the server every scenario creates its databases on: an
// existing one (--database-url) or an embedded cluster started for the run.
type postgres struct {
	adminURL   string // a URL to an existing database, for CREATE DATABASE
	cluster    *embeddedpg.Cluster
	dir        string
	statements bool // pg_stat_statements is loaded
	log        *progress
}

// poolSize is the connection pool of each system: relais serve's default
// (at least 20), and the same for River so neither waits on connections
// the other has.
const poolSize = 20

// startPostgres connects to databaseURL, or starts an embedded cluster with
// durable settings (fsync and synchronous_commit stay on: what production
// runs). With profile, the embedded cluster loads pg_stat_statements and
// times WAL I/O.
func startPostgres(ctx context.Context, databaseURL, binDir string, profile bool, log *progress) (*postgres, error) {
	if databaseURL != "" {
		p := &postgres{adminURL: databaseURL, log: log}
		conn, err := pgx.Connect(ctx, databaseURL)
		if err != nil {
			return nil, fmt.Errorf("--database-url: %w", err)
		}
		defer conn.Close(context.Background())
		var preload string
		_ = conn.QueryRow(ctx, "show shared_preload_libraries").Scan(&preload)
		p.statements = profile && containsWord(preload, "pg_stat_statements")
		return p, nil
	}
	// The cluster runs as an unprivileged user when we are root: every
	// parent folder must be traversable, which os.MkdirTemp's 0700 is not.
	dir, err := os.MkdirTemp("/tmp", "relais-bench-pg-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	settings := map[string]string{"max_connections": "200"}
	if profile {
		settings["shared_preload_libraries"] = "pg_stat_statements"
		settings["pg_stat_statements.track"] = "all"
		settings["track_wal_io_timing"] = "on"
	}
	began := time.Now()
	c, err := embeddedpg.Start(ctx, embeddedpg.Options{Dir: dir + "/pg", BinDir: binDir, Settings: settings})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	log.printf("embedded PostgreSQL started in %s (%s)", time.Since(began).Round(time.Millisecond), dir)
	return &postgres{adminURL: c.URL("postgres"), cluster: c, dir: dir, statements: profile, log: log}, nil
}

func containsWord(list, word string) bool {
	return slices.Contains(strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '"' }), word)
}

// close stops the embedded cluster and removes its folder.
func (p *postgres) close() {
	if p.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cluster.Stop(ctx); err != nil {
		p.log.printf("stopping the embedded PostgreSQL: %v", err)
	}
	os.RemoveAll(p.dir)
}

// describe reads the server's version and durability settings.
func (p *postgres) describe(ctx context.Context) (environment, error) {
	conn, err := pgx.Connect(ctx, p.adminURL)
	if err != nil {
		return environment{}, err
	}
	defer conn.Close(context.Background())
	env := environment{Embedded: p.cluster != nil}
	for _, s := range []struct {
		name string
		dst  *string
	}{{"server_version", &env.Postgres}, {"fsync", &env.Fsync}, {"synchronous_commit", &env.SynchronousCommit}} {
		if err := conn.QueryRow(ctx, "select current_setting($1)", s.name).Scan(s.dst); err != nil {
			return environment{}, fmt.Errorf("read %s: %w", s.name, err)
		}
	}
	return env, nil
}

// database is a fresh database of one scenario and system.
type database struct {
	name string
	url  string
	pg   *postgres
	// Pools opened with pool are closed by drop.
	mu    sync.Mutex
	pools []*pgxpool.Pool
}

// freshDatabase creates an empty database (dropping a leftover of an
// interrupted run first).
func (p *postgres) freshDatabase(ctx context.Context, name string) (*database, error) {
	conn, err := pgx.Connect(ctx, p.adminURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "drop database if exists "+ident+" with (force)"); err != nil {
		return nil, fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "create database "+ident); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(p.adminURL)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	return &database{name: name, url: u.String(), pg: p}, nil
}

// pool opens a connection pool of poolSize on the database; tune adjusts
// its configuration first (a tracer).
func (d *database) pool(ctx context.Context, tune func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(d.url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = poolSize
	if tune != nil {
		tune(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	d.mu.Lock()
	d.pools = append(d.pools, pool)
	d.mu.Unlock()
	return pool, nil
}

// drop closes the database's pools and drops it.
func (d *database) drop() {
	d.mu.Lock()
	for _, p := range d.pools {
		p.Close()
	}
	d.pools = nil
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.pg.adminURL)
	if err != nil {
		d.pg.log.printf("drop database %s: %v", d.name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "drop database if exists "+pgx.Identifier{d.name}.Sanitize()+" with (force)"); err != nil {
		d.pg.log.printf("drop database %s: %v", d.name, err)
	}
}

// progress writes timestamped progress lines (to stderr).
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	began time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, began: time.Now()} }

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.began).Seconds(), fmt.Sprintf(format, args...))
}
