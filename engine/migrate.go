package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/queries"
)

// migrateLockKey is the advisory lock every replica takes before touching the
// schema, so that replicas starting at the same moment on one database apply
// each migration exactly once and all come up.
const migrateLockKey int64 = 0x72656c6169730001 // "relais" + 1

// Migration is one embedded schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in version order.
func Migrations() []Migration {
	entries, err := fs.ReadDir(queries.MigrationFiles, "migrations")
	if err != nil {
		panic(err) // embedded at build time; unreadable means a broken binary
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("engine: migration file without a version prefix: " + name)
		}
		body, err := queries.MigrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			panic(err)
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			panic(fmt.Sprintf("engine: migration versions must be 1..n without gaps; %s is number %d", m.Name, i+1))
		}
	}
	return ms
}

// LatestSchemaVersion is the schema version this binary expects.
func LatestSchemaVersion() int { return len(Migrations()) }

// SchemaFingerprint identifies the embedded migrations' content; test harnesses use
// it to name template databases so a changed migration never reuses a stale one.
func SchemaFingerprint() string {
	h := sha256.New()
	for _, m := range Migrations() {
		fmt.Fprintf(h, "%d\n%s\n", m.Version, m.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

const createMigrationsTable = `
create table if not exists relais_schema_migrations (
    version    integer primary key,
    name       text        not null,
    applied_at timestamptz not null default now()
)`

// migrationLockTries bounds how many times a migration whose lock_timeout
// passed is tried (waiting 1 s, 2 s, … in between) before Migrate fails.
const migrationLockTries = 10

// Migrate applies every embedded migration the database lacks, each in its
// own transaction, while holding a session advisory lock. It returns the
// versions it applied (none when another replica got there first). A nil
// logger logs nothing.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]int, error) {
	return migrate(ctx, pool, logger, Migrations())
}

// migrate is Migrate with the migrations given, in version order from 1.
func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, ms []Migration) ([]int, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire: %w", err)
	}
	defer conn.Release()
	if err := lockMigrations(ctx, conn.Conn()); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	defer func() {
		// A fresh context: the unlock must happen even when ctx is done,
		// otherwise the pooled session would keep the lock.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "select pg_advisory_unlock($1)", migrateLockKey); err != nil {
			conn.Conn().Close(uctx)
		}
	}()
	// Created only when missing: a create, even "if not exists", needs
	// the CREATE right, which a role that only serves a migrated database
	// need not have.
	var exists bool
	if err := conn.QueryRow(ctx, "select to_regclass('relais_schema_migrations') is not null").Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrate: look for relais_schema_migrations: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, createMigrationsTable); err != nil {
			return nil, fmt.Errorf("migrate: create relais_schema_migrations: %w%s", err, privilegeHint(ctx, conn.Conn(), err, true))
		}
	}
	if err := renumberMigrations(ctx, conn.Conn(), logger); err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	if err := checkMigrationNames(ctx, conn.Conn(), ms); err != nil {
		return nil, err
	}
	if newer := slices.Sorted(func(yield func(int) bool) {
		for v := range applied {
			if v > len(ms) && !yield(v) {
				return
			}
		}
	}); len(newer) > 0 {
		// A newer relais migrated this database (a rolling deploy, or a
		// rollback): this binary runs on the schema it knows, which newer
		// migrations are written to keep working.
		logger.Warn("the database's schema is newer than this relais: it was migrated by a newer version",
			"schema_version", newer[len(newer)-1], "known_schema_version", len(ms))
	}
	var done []int
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		start := time.Now()
		if err := applyMigration(ctx, conn.Conn(), logger, m); err != nil {
			return done, fmt.Errorf("migrate: %s: %w%s", m.Name, err, privilegeHint(ctx, conn.Conn(), err, true))
		}
		logger.Info("migration applied", "version", m.Version, "name", m.Name, "duration", time.Since(start).Round(time.Millisecond))
		done = append(done, m.Version)
	}
	return done, nil
}

// lockMigrationsEvery is how often a replica waiting for another's
// migrations asks for their lock again.
const lockMigrationsEvery = 100 * time.Millisecond

// lockMigrations takes the migrations' advisory lock, asking again until
// it gets it rather than wait in pg_advisory_lock: a replica waiting there
// holds a transaction open, which an index built CONCURRENTLY by the
// replica holding the lock waits for, and PostgreSQL ends the two with a
// deadlock. Between two tries nothing is held.
func lockMigrations(ctx context.Context, conn *pgx.Conn) error {
	for {
		var got bool
		if err := conn.QueryRow(ctx, "select pg_try_advisory_lock($1)", migrateLockKey).Scan(&got); err != nil {
			return err
		}
		if got {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockMigrationsEvery):
		}
	}
}

// applyMigration runs m and records it, in one transaction. A migration
// that sets a lock_timeout gives up on a table some long transaction holds
// rather than queue every claim and settlement behind its lock; it is
// tried again shortly, up to migrationLockTries times.
func applyMigration(ctx context.Context, conn *pgx.Conn, logger *slog.Logger, m Migration) error {
	for try := 1; ; try++ {
		var err error
		if strings.HasPrefix(m.SQL, noTransaction) {
			err = applyOutsideTransaction(ctx, conn, m)
		} else {
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.SQL); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "insert into relais_schema_migrations (version, name) values ($1, $2)", m.Version, m.Name)
				return err
			})
		}
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55P03" || try == migrationLockTries {
			return err
		}
		logger.Warn("migration waits for a table another transaction holds; trying again", "version", m.Version, "name", m.Name, "try", try)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}

// noTransaction opens a migration that cannot run in a transaction: an
// index built CONCURRENTLY on a table every start writes, which a plain
// CREATE INDEX would block for the whole build.
const noTransaction = "-- relais:no-transaction"

// applyOutsideTransaction runs m's statements one by one, each on its own
// (CONCURRENTLY refuses a transaction block, an implicit one included),
// with a lock_timeout of 5 s, then records it. Its statements must be
// safe to run again: a crash before the record runs them again at the
// next start (drop an index left invalid by an interrupted build first).
func applyOutsideTransaction(ctx context.Context, conn *pgx.Conn, m Migration) error {
	if _, err := conn.Exec(ctx, "set lock_timeout = '5s'"); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "reset lock_timeout") }()
	for _, stmt := range strings.Split(m.SQL, ";\n") {
		if sqlWithoutComments(stmt) == "" {
			continue
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	_, err := conn.Exec(ctx, "insert into relais_schema_migrations (version, name) values ($1, $2)", m.Version, m.Name)
	return err
}

// sqlWithoutComments is stmt without its -- comments and spaces: empty
// for a chunk that holds none.
func sqlWithoutComments(stmt string) string {
	var b strings.Builder
	for line := range strings.Lines(stmt) {
		code, _, _ := strings.Cut(line, "--")
		b.WriteString(strings.TrimSpace(code))
	}
	return b.String()
}

// privilegeHint says what to do about a migration the database role may
// not run, or nothing for another error; creating says the statement
// creates something (a migration), where "permission denied for schema"
// is a missing CREATE right, not a missing USAGE. The role and schema are
// named as conn's session sees them (placeholders when it cannot say,
// inside a failed transaction).
func privilegeHint(ctx context.Context, conn *pgx.Conn, err error, creating bool) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" && pgErr.Code != "3F000" {
		return ""
	}
	role, schema, rawSchema := sessionNames(ctx, conn)
	owner := tablesOwner(ctx, conn, rawSchema)
	grants := strings.Join(GrantStatements(role, schema, owner), "; ")
	switch {
	case pgErr.Code == "42501" && strings.Contains(pgErr.Message, "permission denied for") && !(creating && strings.Contains(pgErr.Message, "permission denied for schema")):
		// A migrated schema the role may not read: a serving role
		// granted nothing yet. The defaults are for the tables' owner,
		// who creates the next upgrade's (SRE QA: without FOR ROLE, run
		// by a superuser, they left those ungranted).
		if owner == "" {
			return " (the database role lacks privileges on Relais's tables: as the role that runs relais migrate, " + grants + ")"
		}
		return fmt.Sprintf(" (the database role lacks privileges on Relais's tables: as their owner %s (the role that runs relais migrate) or a superuser, %s)", owner, grants)
	case pgErr.Code == "42501": // insufficient_privilege
		return fmt.Sprintf(" (the database role cannot create tables in schema %s: run relais migrate once as the schema's owner, after which serve needs no CREATE right, or grant CREATE on the schema)", schema)
	case owner != "": // 3F000, and Relais's tables are there: a serving role granted nothing
		return fmt.Sprintf(" (the role may not use schema %s, which holds Relais's tables: as their owner %s (the role that runs relais migrate) or a superuser, %s)", schema, owner, grants)
	default: // 3F000, invalid_schema_name: no schema of the search_path to create in
		return fmt.Sprintf(" (schema %s does not exist, or the role may not use it: create it, or, a schema migrated by its owner, run as that owner %s)", schema, grants)
	}
}

// GrantStatements are what the owner of schema runs so that role may
// serve Relais there, tables of later migrations included; role, schema
// and owner as SQL takes them (see SQLName). owner is the role that
// migrates, whose later tables the default privileges are for: named
// (FOR ROLE), they hold whoever runs them (SRE QA: run by a superuser,
// they were the superuser's, and the next upgrade's tables ungranted).
// Empty, they are the running role's own.
func GrantStatements(role, schema, owner string) []string {
	defaults := fmt.Sprintf("ALTER DEFAULT PRIVILEGES IN SCHEMA %s GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s", schema, role)
	if owner != "" {
		defaults = fmt.Sprintf("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s", owner, schema, role)
	}
	return []string{
		fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", schema, role),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s TO %s", schema, role),
		defaults,
	}
}

// plainName is an identifier SQL takes unquoted.
var plainName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// SQLName is an identifier as an operator would type it: bare when it
// can be, quoted otherwise.
func SQLName(name string) string {
	if plainName.MatchString(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// sessionNames are the role of conn's session and the schema its
// search_path leads to first ("$user" skipped), as an operator types them
// (placeholders when the session cannot say).
func sessionNames(ctx context.Context, conn *pgx.Conn) (role, schema, rawSchema string) {
	var path string
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := conn.QueryRow(qctx, "select current_user, current_setting('search_path')").Scan(&role, &path); err != nil {
		return "<role>", "<schema>", ""
	}
	for _, p := range strings.Split(path, ",") {
		if p = strings.Trim(strings.TrimSpace(p), `"`); p != "" && p != "$user" {
			return SQLName(role), SQLName(p), p
		}
	}
	return SQLName(role), "<schema>", ""
}

// tablesOwner is the owner of Relais's tables in schema as an operator
// types it, "" when the session cannot say (none yet, or inside a failed
// transaction). Read from the catalog by name: a role without USAGE on
// the schema cannot resolve the table through its search_path (verifier
// QA), but reads pg_class all the same.
func tablesOwner(ctx context.Context, conn *pgx.Conn, schema string) string {
	var owner string
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := conn.QueryRow(qctx, `select pg_get_userbyid(c.relowner)::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relname = 'relais_schema_migrations' and n.nspname = $1`, schema).Scan(&owner); err != nil {
		return ""
	}
	return SQLName(owner)
}

// renumbered are the migrations a branch merged into main applied under
// other versions (renumbered at the merge, their SQL unchanged): a database
// migrated by a build of that branch records them by the old ones.
var renumbered = []struct {
	from, to int
	oldName  string
	newName  string
}{
	{8, 11, "0008_token_lifecycle", "0011_token_lifecycle"},
	{9, 12, "0009_destination_url_query", "0012_destination_url_query"},
}

// renumberMigrations records the renumbered migrations under their
// versions of today, so that the migrations that took their old numbers
// run and theirs are not run twice.
func renumberMigrations(ctx context.Context, conn *pgx.Conn, logger *slog.Logger) error {
	for _, r := range renumbered {
		// Asked first: an UPDATE needs a right that a role serving a
		// migrated database need not have, even when it would match
		// nothing.
		var due bool
		if err := conn.QueryRow(ctx, "select exists (select 1 from relais_schema_migrations where version = $1 and name = $2)", r.from, r.oldName).Scan(&due); err != nil {
			return fmt.Errorf("migrate: read names: %w%s", err, privilegeHint(ctx, conn, err, false))
		}
		if !due {
			continue
		}
		tag, err := conn.Exec(ctx, `update relais_schema_migrations set version = $1, name = $2
			where version = $3 and name = $4 and not exists (select 1 from relais_schema_migrations where version = $1)`,
			r.to, r.newName, r.from, r.oldName)
		if err != nil {
			return fmt.Errorf("migrate: renumber %s: %w", r.oldName, err)
		}
		if tag.RowsAffected() > 0 {
			logger.Info("migration renumbered", "name", r.oldName, "version", r.from, "now", r.to)
		}
	}
	return nil
}

// checkMigrationNames refuses, before anything is applied, a database
// whose migrations of a version were other ones than this build's: its
// schema is not the one this build's next migrations are written for.
func checkMigrationNames(ctx context.Context, conn *pgx.Conn, ms []Migration) error {
	rows, err := conn.Query(ctx, "select version, name from relais_schema_migrations order by version")
	if err != nil {
		return fmt.Errorf("migrate: read names: %w%s", err, privilegeHint(ctx, conn, err, false))
	}
	type applied struct {
		Version int32
		Name    string
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowToStructByPos[applied])
	if err != nil {
		return fmt.Errorf("migrate: read names: %w%s", err, privilegeHint(ctx, conn, err, false))
	}
	for _, a := range recorded {
		if v := int(a.Version); v >= 1 && v <= len(ms) && ms[v-1].Name != a.Name {
			return fmt.Errorf("migrate: the database's migration %d is %s where this relais's is %s: a build whose migrations differ from this one's migrated it; "+
				"nothing was applied (restore the backup taken before that build, or run the build that migrated it)", v, a.Name, ms[v-1].Name)
		}
	}
	return nil
}

func appliedVersions(ctx context.Context, conn *pgx.Conn) (map[int]bool, error) {
	rows, err := conn.Query(ctx, "select version from relais_schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	m := make(map[int]bool, len(versions))
	for _, v := range versions {
		m[int(v)] = true
	}
	return m, nil
}

// SchemaVersion returns the highest applied migration version, 0 when none
// (or when no migration ever ran there).
func SchemaVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var v int32
	err := pool.QueryRow(ctx, `select coalesce(max(version), 0)::int from relais_schema_migrations`).Scan(&v)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42P01" { // undefined_table
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("engine: schema version: %w", err)
	}
	return int(v), nil
}

// Privileges is what the database role lacks on Relais's own tables and
// views: each short of what serve does with it, by name. Empty, the role
// may do all Relais does.
type Privileges struct {
	Role, Schema string
	// Owner owns Relais's migrations table: the role that migrates, and so
	// creates the tables of later migrations.
	Owner   string
	Missing []string // "bulk_actions (SELECT, INSERT, UPDATE, DELETE)"
}

var (
	createdRelation = regexp.MustCompile(`(?im)^\s*create\s+(?:or\s+replace\s+)?(table|view)\s+(?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_]*)`)
	droppedRelation = regexp.MustCompile(`(?im)^\s*drop\s+(?:table|view)\s+(?:if\s+exists\s+)?([a-z_][a-z0-9_]*)`)
)

// Relations are the tables and views the migrations create (and do not
// drop), by name, each saying whether it is a view: what serve reads and
// writes, and nothing else a shared schema holds.
func Relations() map[string]bool {
	views := map[string]bool{"relais_schema_migrations": false}
	for _, m := range Migrations() {
		for _, c := range createdRelation.FindAllStringSubmatch(m.SQL, -1) {
			views[strings.ToLower(c[2])] = strings.EqualFold(c[1], "view")
		}
		for _, d := range droppedRelation.FindAllStringSubmatch(m.SQL, -1) {
			delete(views, strings.ToLower(d[1]))
		}
	}
	return views
}

// MissingPrivileges checks the role's privileges on Relais's tables and
// views (see Relations) in the schema its migrations table is in: every
// table needs SELECT, INSERT, UPDATE and DELETE (the migrations' own only
// SELECT, as serve only reads it), every view SELECT. Identity columns
// need no right on their sequences. A role that serve uses, less
// privileged than the schema's owner who migrates, loses them on each
// table a later migration creates unless the owner altered its default
// privileges: the replica would boot, then fail every statement on those
// tables (a bulk action 500, retention failing each pass).
func MissingPrivileges(ctx context.Context, pool *pgxpool.Pool) (Privileges, error) {
	p := Privileges{}
	relations := Relations()
	names := make([]string, 0, len(relations))
	for name := range relations {
		names = append(names, name)
	}
	rows, err := pool.Query(ctx, `
with s as (select relnamespace as ns from pg_class where oid = to_regclass('relais_schema_migrations'))
select current_user::text, n.nspname::text,
    (select pg_get_userbyid(relowner)::text from pg_class where oid = to_regclass('relais_schema_migrations')), c.relname::text,
    array_remove(array[case when not has_table_privilege(c.oid, 'SELECT') then 'SELECT' end,
        case when c.relkind <> 'v' and c.relname <> 'relais_schema_migrations' and not has_table_privilege(c.oid, 'INSERT') then 'INSERT' end,
        case when c.relkind <> 'v' and c.relname <> 'relais_schema_migrations' and not has_table_privilege(c.oid, 'UPDATE') then 'UPDATE' end,
        case when c.relkind <> 'v' and c.relname <> 'relais_schema_migrations' and not has_table_privilege(c.oid, 'DELETE') then 'DELETE' end], null)
from pg_class c join s on c.relnamespace = s.ns join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p', 'v') and c.relname = any($1)
order by c.relname`, names)
	if err != nil {
		return p, fmt.Errorf("engine: privileges: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var missing []string
		if err := rows.Scan(&p.Role, &p.Schema, &p.Owner, &name, &missing); err != nil {
			return p, fmt.Errorf("engine: privileges: %w", err)
		}
		if len(missing) > 0 {
			p.Missing = append(p.Missing, name+" ("+strings.Join(missing, ", ")+")")
		}
	}
	if err := rows.Err(); err != nil {
		return p, fmt.Errorf("engine: privileges: %w", err)
	}
	return p, nil
}

// Writable reports whether the database takes writes: not a standby in
// recovery (a failover that left the URL on the old primary), nor a
// read-only session. A replica on a read-only database would answer every
// write 503, so it says it is not ready.
func Writable(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var ok bool
	err := pool.QueryRow(ctx, `select not (pg_is_in_recovery() or current_setting('transaction_read_only')::boolean)`).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("engine: writable: %w", err)
	}
	return ok, nil
}
