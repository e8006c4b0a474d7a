package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/dbtest"
)

// A database migrated by a newer relais is said to be so when an older one
// migrates (starts) on it: it ran silently, reporting its own version.
func TestMigrateSaysTheSchemaIsNewer(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	newer := LatestSchemaVersion() + 1
	if _, err := pool.Exec(ctx, "insert into relais_schema_migrations (version, name) values ($1, 'from_the_future')", newer); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if _, err := Migrate(ctx, pool, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "schema is newer than this relais") || !strings.Contains(out, "known_schema_version") {
		t.Errorf("migrating a newer schema logged %q", out)
	}
}

// A role that may only read and write rows can serve a database someone
// else migrated: starting (Migrate) on it creates nothing. Where a
// migration is due, the refusal says what the role lacks.
func TestMigrateNeedsNoCreateRightOnceMigrated(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	role := "relais_rows_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")[:8]
	for _, stmt := range []string{
		"create role " + role + " login password 'rows-only-password'",
		"grant select on relais_schema_migrations to " + role,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "revoke all on relais_schema_migrations from "+role)
		_, _ = pool.Exec(context.Background(), "drop role if exists "+role)
	})
	cfg := pool.Config().Copy()
	cfg.ConnConfig.User, cfg.ConnConfig.Password = role, "rows-only-password"
	limited, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	if applied, err := Migrate(ctx, limited, nil); err != nil || len(applied) != 0 {
		t.Fatalf("Migrate as a role without CREATE on a migrated database: %v, %v; want nothing to do", applied, err)
	}
	// One migration due: refused, saying why.
	if _, err := pool.Exec(ctx, "delete from relais_schema_migrations where version = $1", LatestSchemaVersion()); err != nil {
		t.Fatal(err)
	}
	_, err = Migrate(ctx, limited, nil)
	if err == nil || !strings.Contains(err.Error(), "run relais migrate once as the schema's owner") {
		t.Errorf("a due migration as a role without CREATE: %v; want the privilege explained", err)
	}
}

// signalOn is a slog handler that closes seen at the first record whose
// message holds substr, after writing it to out.
type signalOn struct {
	slog.Handler
	substr string
	seen   chan struct{}
	once   *sync.Once
}

func (h signalOn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if strings.Contains(r.Message, h.substr) {
		h.once.Do(func() { close(h.seen) })
	}
	return err
}

// A migration that gives up on a table another transaction holds (its
// lock_timeout passed, 55P03) is tried again once the table is free, and
// recorded once; any other failure is not retried.
func TestMigrateRetriesAMigrationThatWaitedForALock(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	first := []Migration{{Version: 1, Name: "0001_table", SQL: "create table held (id int)"}}
	if _, err := migrate(ctx, pool, nil, first); err != nil {
		t.Fatal(err)
	}

	// A long transaction reads the table: its lock keeps the migration's
	// ALTER (and so its lock_timeout) waiting until the transaction ends,
	// which it does once Migrate says it will try again.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, "select * from held"); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	seen := make(chan struct{})
	logger := slog.New(signalOn{Handler: slog.NewTextHandler(&logs, nil), substr: "trying again", seen: seen, once: new(sync.Once)})
	released := make(chan error, 1)
	go func() {
		select {
		case <-seen:
			released <- holder.Commit(ctx)
		case <-time.After(30 * time.Second):
			// Never asked: the deferred rollback frees the table, and
			// nothing touches the transaction from two goroutines.
			released <- errors.New("migrate never said it would try again")
		}
	}()
	second := append(first, Migration{Version: 2, Name: "0002_alter",
		SQL: "set local lock_timeout = '50ms'; alter table held add column note text"})
	applied, err := migrate(ctx, pool, logger, second)
	if err != nil || !slices.Equal(applied, []int{2}) {
		t.Fatalf("migrating while the table is held, then freed: applied %v, %v; want [2]", applied, err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "try=1") {
		t.Errorf("logs %q; want the first try's lock timeout reported", logs.String())
	}
	var column, recorded int
	if err := pool.QueryRow(ctx, `select (select count(*) from information_schema.columns where table_name = 'held' and column_name = 'note'),
		(select count(*) from relais_schema_migrations where version = 2)`).Scan(&column, &recorded); err != nil {
		t.Fatal(err)
	}
	if column != 1 || recorded != 1 {
		t.Errorf("after the retry: column %d, recorded %d; want 1 and 1", column, recorded)
	}

	// A failure other than a lock timeout fails at once, recording nothing.
	broken := append(second, Migration{Version: 3, Name: "0003_broken", SQL: "alter table missing add column x int"})
	logs.Reset()
	if _, err := migrate(ctx, pool, slog.New(slog.NewTextHandler(&logs, nil)), broken); err == nil || !strings.Contains(err.Error(), "0003_broken") {
		t.Fatalf("a broken migration: %v; want its failure named", err)
	}
	if strings.Contains(logs.String(), "trying again") {
		t.Errorf("a broken migration was tried again (logs %q)", logs.String())
	}
}

// A migration marked relais:no-transaction runs its statements one by one
// outside a transaction (CREATE INDEX CONCURRENTLY refuses one, which a
// transaction would fail) and is recorded once; run again after a crash
// before its record (its index already there), it succeeds.
func TestMigrationOutsideATransaction(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ms := []Migration{{Version: 1, Name: "0001_table", SQL: "create table busy (id int, code text); insert into busy select g, null from generate_series(1, 1000) g"}}
	if _, err := migrate(ctx, pool, nil, ms); err != nil {
		t.Fatal(err)
	}
	index := Migration{Version: 2, Name: "0002_index", SQL: noTransaction + `
-- a comment; and another
drop index concurrently if exists busy_by_code;

create index concurrently busy_by_code on busy (code) where code is not null;
`}
	// What a crash between the build and its record leaves: the index,
	// no record. The migration builds it again.
	if _, err := pool.Exec(ctx, "create index busy_by_code on busy (code) where code is not null"); err != nil {
		t.Fatal(err)
	}
	applied, err := migrate(ctx, pool, nil, append(ms, index))
	if err != nil || !slices.Equal(applied, []int{2}) {
		t.Fatalf("the migration outside a transaction: applied %v, %v; want [2]", applied, err)
	}
	var valid bool
	var recorded int
	if err := pool.QueryRow(ctx, `select (select i.indisvalid from pg_index i join pg_class c on c.oid = i.indexrelid where c.relname = 'busy_by_code'),
		(select count(*) from relais_schema_migrations where version = 2)`).Scan(&valid, &recorded); err != nil {
		t.Fatal(err)
	}
	if !valid || recorded != 1 {
		t.Errorf("index valid %v, recorded %d times; want a valid index recorded once", valid, recorded)
	}
	var timeout string
	if err := pool.QueryRow(ctx, "show lock_timeout").Scan(&timeout); err != nil || timeout != "0" {
		t.Errorf("lock_timeout after the migration: %q %v, want the default 0 on pooled connections", timeout, err)
	}
}

// A database migrated by a build of the branch whose migrations main
// renumbered (0008_token_lifecycle, 0009_destination_url_query, now 0011
// and 0012) is migrated to today's schema: main's own 8 and 9 run, the
// renumbered ones do not run twice. Before, version numbers alone were
// compared: 8 and 9 were skipped and 11 failed on a column it had added.
func TestMigrateRenumberedMigrations(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ms := Migrations()
	if _, err := migrate(ctx, pool, nil, ms[:7]); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		version int
		name    string
		m       Migration
	}{{8, "0008_token_lifecycle", ms[10]}, {9, "0009_destination_url_query", ms[11]}} {
		if r.m.Name != "0011_token_lifecycle" && r.m.Name != "0012_destination_url_query" {
			t.Fatalf("migration %d is %s", r.m.Version, r.m.Name)
		}
		if _, err := pool.Exec(ctx, r.m.SQL); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "insert into relais_schema_migrations (version, name) values ($1, $2)", r.version, r.name); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	applied, err := Migrate(ctx, pool, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("migrating a renumbered database: %v", err)
	}
	if slices.Contains(applied, 11) || slices.Contains(applied, 12) || !slices.Contains(applied, 8) || !slices.Contains(applied, 9) {
		t.Errorf("applied %v: want 8 and 9, not 11 or 12 again", applied)
	}
	if !strings.Contains(logs.String(), "migration renumbered") {
		t.Errorf("the renumbering is not logged: %s", logs.String())
	}
	rows, err := pool.Query(ctx, "select name from relais_schema_migrations order by version")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range ms {
		want = append(want, m.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("recorded migrations %v, want %v", names, want)
	}
}

// A database whose migration of some version is another one than this
// build's is refused before anything is applied.
func TestMigrateRefusesOtherMigrations(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	latest := LatestSchemaVersion()
	for _, stmt := range []string{"update relais_schema_migrations set name = '0003_from_elsewhere' where version = 3",
		"delete from relais_schema_migrations where version = " + strconv.Itoa(latest)} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	applied, err := Migrate(ctx, pool, nil)
	if err == nil || !strings.Contains(err.Error(), "migration 3 is 0003_from_elsewhere where this relais's is 0003_engine") || len(applied) != 0 {
		t.Fatalf("Migrate = %v, %v; want a refusal naming migration 3, nothing applied", applied, err)
	}
	if v, err := SchemaVersion(ctx, pool); err != nil || v != latest-1 {
		t.Errorf("schema version %d, %v after the refusal; want %d", v, err, latest-1)
	}
}

// Relations, read from the migrations' SQL, are exactly the tables and
// views a migrated schema holds: the privilege check at boot looks at
// those and at nothing else a shared schema holds.
func TestRelationsAreTheMigratedSchemas(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	rows, err := pool.Query(context.Background(), `select c.relname::text, c.relkind = 'v' from pg_class c
		where c.relnamespace = (select relnamespace from pg_class where oid = to_regclass('relais_schema_migrations'))
		and c.relkind in ('r', 'p', 'v') and not c.relispartition`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		name string
		view bool
	}, error) {
		var x struct {
			name string
			view bool
		}
		err := r.Scan(&x.name, &x.view)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Relations()
	for _, r := range got {
		view, ok := want[r.name]
		if !ok || view != r.view {
			t.Errorf("%s (view %v) in the migrated schema: Relations says %v (known %v)", r.name, r.view, view, ok)
		}
		delete(want, r.name)
	}
	for name := range want {
		t.Errorf("Relations names %s, which the migrated schema lacks", name)
	}
}

// A serving role granted nothing on a migrated schema is told which grants
// it lacks, not that it cannot create tables or has no schema.
func TestMigrateNamesTheGrantsARoleLacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.URL(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	role := "relais_bare_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, stmt := range []string{"create role " + role + " login password 'bare-secret'", "grant usage on schema public to " + role} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "drop owned by "+role)
		_, _ = admin.Exec(context.Background(), "drop role "+role)
	})
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = role, "bare-secret"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "lacks privileges on Relais's tables") || !strings.Contains(err.Error(), "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+role) {
		t.Errorf("Migrate as a role granted nothing: %v; want the grants it lacks named, with its schema and role", err)
	}
	// The defaults named for the tables' owner, who creates the next
	// upgrade's tables (SRE QA: without FOR ROLE, run by a superuser, they
	// left those ungranted).
	var owner string
	if err := admin.QueryRow(ctx, "select pg_get_userbyid(relowner) from pg_class where oid = to_regclass('relais_schema_migrations')").Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if want := "ALTER DEFAULT PRIVILEGES FOR ROLE " + SQLName(owner) + " IN SCHEMA public"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Migrate as a role granted nothing: %v; want %q", err, want)
	}
	// Its URL naming a schema it may not use: the same grants, on that
	// schema, rather than "no schema has been selected".
	private := role + "_schema"
	if _, err := admin.Exec(ctx, "create schema "+private); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "drop schema "+private) })
	cfg.ConnConfig.RuntimeParams["search_path"] = private
	hidden, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer hidden.Close()
	_, err = Migrate(ctx, hidden, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "schema "+private+" does not exist, or the role may not use it") ||
		!strings.Contains(err.Error(), "GRANT USAGE ON SCHEMA "+private+" TO "+role) {
		t.Errorf("Migrate into a schema the role may not use: %v; want it and the grants named", err)
	}
	// The same schema once its owner migrated it: the tables' owner is
	// named for the default privileges, though the role cannot see the
	// tables through its search_path (verifier QA).
	ownerCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	ownerCfg.ConnConfig.RuntimeParams["search_path"] = private
	ownerPool, err := pgxpool.NewWithConfig(ctx, ownerCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ownerPool.Close()
	if _, err := Migrate(ctx, ownerPool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "drop schema "+private+" cascade") })
	_, err = Migrate(ctx, hidden, slog.New(slog.DiscardHandler))
	if want := "ALTER DEFAULT PRIVILEGES FOR ROLE " + SQLName(owner) + " IN SCHEMA " + private; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Migrate as a role granted nothing on a migrated schema of its own: %v; want %q", err, want)
	}
}
