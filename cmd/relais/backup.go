package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/keyring"
)

const backupUsage = `usage: relais backup FILE [flags]

Writes the database serve uses (the embedded cluster of RELAIS_DATA_DIR,
whether a serve runs on it or not, or RELAIS_DATABASE_URL) to FILE, a new
file readable by its owner alone, in pg_dump's custom format: definitions,
processes, instances, the tokens' hashes and the sealed values (and
whatever else that database holds, but the console's sessions). The data keys that open the sealed
values are not in it: keep them apart (embedded mode: the data directory's
data-keys file); the backup says whether the keys configured open them.
relais restore reads it back.`

const restoreUsage = `usage: relais restore FILE [flags]

Restores a relais backup (or a pg_dump -Fc of a Relais database) into an
empty database, in one transaction: all of it or nothing. In embedded mode
a new RELAIS_DATA_DIR (its cluster is created; no serve may run on it);
otherwise an empty database created for it (createdb) in
RELAIS_DATABASE_URL. A database that holds anything is refused: replacing
a database in place would keep what the backup does not hold (what newer
migrations added, other applications' tables). The restore then checks
that the data keys open the restored values: give the ones the backup was
taken with beforehand (embedded mode: copy its data-keys file into the new
RELAIS_DATA_DIR; RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE otherwise).
Owners and grants are not restored: what is restored belongs to the role
Relais connects as.`

// backupCommand runs relais backup: pg_dump of the database serve uses,
// written to a new file beside FILE and linked to it once complete, so
// that a dump cut short never passes for a backup.
func backupCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	defer func() {
		// Ctrl-C before pg_dump ran said "context canceled" (verifier QA).
		if err != nil && ctx.Err() != nil && !errors.Is(err, errInterrupted) {
			err = fmt.Errorf("backup %w (%w): nothing was written", errInterrupted, context.Cause(ctx))
		}
	}()
	if wantsHelp(args) {
		return help(backupUsage, getenv, stderr)
	}
	file, rest, ok := positional(args)
	if !ok {
		return errors.New("usage: relais backup FILE [flags] (relais backup --help says more)")
	}
	if _, err := os.Lstat(file); err == nil {
		return fmt.Errorf("%s exists: relais backup writes a new file (move the old one away, or give another name)", file)
	}
	cfg, logger, err := loadAdmin(backupUsage, rest, getenv, stderr)
	if err != nil {
		return err
	}
	// A misspelt data directory must not get a new, empty cluster.
	if err := requireExistingDatabase(cfg); err != nil {
		return err
	}
	configured, err := configuredKeys(cfg)
	if err != nil {
		return err
	}
	dump, err := pgTool(cfg, "pg_dump")
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, cfg, logger, true)
	if err != nil {
		return err
	}
	defer db.close()
	schema, err := engine.SchemaVersion(ctx, db.pool)
	if err != nil {
		return err
	}
	if schema == 0 {
		return errors.New("the database holds no Relais (no schema): nothing to back up")
	}
	// A new file of a random name, created here for its owner alone, which
	// pg_dump writes to through its standard output: the dump holds
	// business data and token hashes in clear, and a path pg_dump opened
	// itself (a fixed FILE.partial) could be one another local user
	// planted, readable by them or a symbolic link to a file to clobber
	// (security QA).
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.partial")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	partial := f.Name()
	defer os.Remove(partial)
	// Console sessions stay out: a copy of live sessions is one to steal,
	// and a rollback must not sign in again those signed out since.
	err = runPGToolTo(ctx, f, dump, db.url, "--format=custom", "--exclude-table-data=*.console_sessions")
	if err == nil {
		// On disk before it is said written.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("backup: %w", cerr)
	}
	if err != nil {
		return err
	}
	info, err := os.Stat(partial)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// A link, not a rename: it fails rather than replace a FILE that
	// appeared meanwhile. A file system without hard links (FAT, some
	// network shares) gets a rename once FILE is checked absent again.
	appeared := fmt.Errorf("%s appeared while the backup ran: relais backup writes a new file (move the other one away, or give another name)", file)
	if err := os.Link(partial, file); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return appeared
		}
		if _, lerr := os.Lstat(file); lerr == nil {
			return appeared
		}
		if rerr := os.Rename(partial, file); rerr != nil {
			return fmt.Errorf("backup: %w (and %w)", err, rerr)
		}
	}
	fmt.Fprintf(stdout, "backup of schema version %d written to %s (%d KiB)\n", schema, file, (info.Size()+1023)/1024)
	// Said only once checked, as serve checks them: an operator files
	// away the keys this line names.
	if err := engine.CheckKeys(ctx, db.pool, backupKeys(cfg, configured, db)); err != nil {
		if keysConfigured(cfg, db) {
			fmt.Fprintf(stdout, "warning: %s do not open its sealed values (%v): keep the keys its replicas run with apart from the backup (relais restore needs both)\n", keysSource(cfg, db), err)
		} else {
			fmt.Fprintf(stdout, "warning: its sealed values cannot be opened here (%v): keep the keys its replicas run with apart from the backup (relais restore needs both)\n", err)
		}
		return nil
	}
	if !keysConfigured(cfg, db) {
		fmt.Fprintln(stdout, "it holds no sealed value, and no data key is configured: give every replica the same keys before anything sensitive is stored")
		return nil
	}
	fmt.Fprintf(stdout, "its sealed values open with %s: keep a copy of them apart from the backup (relais restore needs both)\n", keysSource(cfg, db))
	return nil
}

// backupKeys is the keyring a backup checks the database against: the
// configured keys, else the embedded data directory's file as it is (a
// backup generates no key, unlike a first serve).
func backupKeys(cfg config.Config, configured *keyring.Keyring, db *database) *keyring.Keyring {
	if configured != nil || !db.embedded() {
		return configured
	}
	b, err := os.ReadFile(dataKeysPath(cfg))
	if err != nil {
		return nil
	}
	ring, err := keyring.ParseFile(string(b))
	if err != nil {
		return nil
	}
	return ring
}

// restoreCommand runs relais restore: pg_restore of FILE into the empty
// database serve would use, in one transaction, then the keys' check
// serve makes at its boot, so that a restore whose values the keys cannot
// open is told now, not by a push failing as push_unprepared.
func restoreCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if wantsHelp(args) {
		return help(restoreUsage, getenv, stderr)
	}
	file, rest, ok := positional(args)
	if !ok {
		return errors.New("usage: relais restore FILE [flags] (relais restore --help says more)")
	}
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	cfg, logger, err := loadAdmin(restoreUsage, rest, getenv, stderr)
	if err != nil {
		return err
	}
	configured, err := configuredKeys(cfg)
	if err != nil {
		return err
	}
	restore, err := pgTool(cfg, "pg_restore")
	if err != nil {
		return err
	}
	// Read before anything is created: a file that is no backup of a
	// Relais leaves no new cluster behind.
	backupSchema, err := dumpSchemaVersion(ctx, restore, file)
	if err != nil {
		return err
	}
	if backupSchema == 0 {
		return fmt.Errorf("%s holds no Relais (no relais_schema_migrations): is it a backup of a Relais database?", file)
	}
	// Not attached: a data directory a serve runs on is no new one.
	db, err := openDatabase(ctx, cfg, logger, false)
	if errors.Is(err, embeddedpg.ErrInUse) {
		return fmt.Errorf("a relais serve runs on RELAIS_DATA_DIR %s: restore into a new data directory (holding the backup's data-keys file), which no serve runs on", cfg.DataDir)
	}
	if err != nil {
		return err
	}
	defer db.close()
	// Into an empty database only: pg_restore --clean drops what the
	// backup holds and keeps the rest (what newer migrations added, which
	// trips the next upgrade; another application's tables, which it
	// would roll back to the backup's day), and a replica may be serving
	// a database that holds a Relais.
	var relations int
	if err := db.pool.QueryRow(ctx, `select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace
		where c.relkind in ('r', 'v', 'm', 'p', 'f') and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg_toast%'`).Scan(&relations); err != nil {
		return fmt.Errorf("restore: look at the database: %w", err)
	}
	if relations > 0 {
		return fmt.Errorf("the database is not empty (%d tables or views): restore into an empty one (embedded: a new RELAIS_DATA_DIR holding the backup's data-keys file; otherwise createdb, and RELAIS_DATABASE_URL naming it)", relations)
	}
	if err := runPGTool(ctx, restore, db.url, "--single-transaction", "--exit-on-error", "--no-owner", "--no-acl", file); err != nil {
		return err
	}
	// The pool's connections may hold statements prepared against the
	// tables the restore replaced.
	db.pool.Reset()
	restored, err := engine.SchemaVersion(ctx, db.pool)
	if err != nil {
		return err
	}
	// A newer backup is said so in every answer (verifier QA: a refusal
	// of its keys left it out).
	newer := ""
	if known := engine.LatestSchemaVersion(); restored > known {
		newer = fmt.Sprintf(", newer than this binary's %d", known)
	}
	// Console sessions among it: a backup relais makes holds none (see
	// backupCommand); any other pg_dump of a Relais may.
	if err := engine.ForgetSourceState(ctx, db.pool, restored); err != nil {
		return fmt.Errorf("%s restored (schema version %d%s), but: %w", file, restored, newer, err)
	}
	if _, err := loadKeys(ctx, cfg, configured, db, logger); err != nil {
		return fmt.Errorf("%s restored (schema version %d%s), but serve will refuse to start on it: %w", file, restored, newer, err)
	}
	fmt.Fprintf(stdout, "%s restored: schema version %d", file, restored)
	switch known := engine.LatestSchemaVersion(); {
	case restored < known:
		fmt.Fprintf(stdout, " (serve, or relais migrate, applies the %s up to this binary's %d)", migrationsText(known-restored), known)
	case restored > known:
		// Going back with a newer backup (lifecycle QA: said nothing).
		fmt.Fprintf(stdout, " (newer than this binary's %d: a newer relais made it; serve it with that one, as this one would run on a schema it does not know)", known)
	}
	if !keysConfigured(cfg, db) {
		fmt.Fprintln(stdout, "; it holds no sealed value (no data key is configured)")
		return nil
	}
	fmt.Fprintf(stdout, "; %s open its sealed values\n", keysSource(cfg, db))
	return nil
}

// dumpSchemaVersion reads the schema version a backup holds, from its
// copy of relais_schema_migrations (pg_restore prints a table's data
// without a database): 0 for a dump without it.
func dumpSchemaVersion(ctx context.Context, restore, file string) (int, error) {
	out, err := exec.CommandContext(ctx, restore, "--file=-", "--data-only", "--table=relais_schema_migrations", file).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s cannot read %s: %w: %s", filepath.Base(restore), file, err, strings.TrimSpace(string(out)))
	}
	version, copying := 0, false
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "COPY ") && strings.Contains(line, "relais_schema_migrations"):
			copying = true
		case copying && line == `\.`:
			copying = false
		case copying:
			first, _, _ := strings.Cut(line, "\t")
			if v, err := strconv.Atoi(first); err == nil && v > version {
				version = v
			}
		}
	}
	return version, nil
}

// keysConfigured reports whether keysSource has keys to name: given, or
// the embedded data directory's file.
func keysConfigured(cfg config.Config, db *database) bool {
	return cfg.DataKeys != "" || cfg.DataKeyFile != "" || db.embedded()
}

// keysSource names where the data keys come from, as a backup's reader
// must be told to keep them.
func keysSource(cfg config.Config, db *database) string {
	switch {
	case cfg.DataKeys != "":
		return "the data keys of RELAIS_DATA_KEYS"
	case cfg.DataKeyFile != "":
		return "the data keys of RELAIS_DATA_KEY_FILE " + cfg.DataKeyFile
	case db.embedded():
		return "the data keys of " + dataKeysPath(cfg)
	}
	return "no data key (none is configured)"
}

// pgTool finds one of PostgreSQL's client programs: beside the server's
// (RELAIS_PG_BIN, or where the embedded cluster's are found), whose
// version matches the embedded cluster's, else on PATH.
func pgTool(cfg config.Config, name string) (string, error) {
	if dir, err := embeddedpg.FindBinDir(cfg.PGBin); err == nil {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found beside PostgreSQL's server programs nor on PATH: install PostgreSQL's client programs (Debian: postgresql-client), or set RELAIS_PG_BIN to the folder that holds them", name)
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// runPGTool runs a PostgreSQL client program against the database at
// rawURL (RELAIS_DATABASE_URL's URL or keyword/value form). The connection
// goes in the child's environment, libpq's variables (PGHOST, PGPASSWORD…),
// not on its command line, where ps shows it to every user of the
// machine; what only pgx reads (a pool's size, a search_path or other
// run-time setting) is left out, as libpq would refuse it.
func runPGTool(ctx context.Context, tool, rawURL string, args ...string) error {
	return runPGToolTo(ctx, nil, tool, rawURL, args...)
}

// runPGToolTo runs tool as runPGTool does, its standard output written to
// stdout (discarded when nil).
func runPGToolTo(ctx context.Context, stdout io.Writer, tool, rawURL string, args ...string) error {
	settings, err := connSettings(rawURL)
	if err != nil {
		return err
	}
	// pg_restore needs --dbname: the database's name alone, quoted as a
	// connection string (a name holding = would be read as one), the
	// rest from the environment.
	dbname := cmp.Or(settings["dbname"], settings["user"], "postgres")
	quoted := "dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(dbname) + "'"
	cmd := exec.CommandContext(ctx, tool, append([]string{"--no-password", "--dbname=" + quoted}, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	for k, v := range settings {
		if env, ok := libpqEnv[k]; ok {
			cmd.Env = append(cmd.Env, env+"="+v)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &out
	if stdout == nil {
		cmd.Stdout = &out
	}
	err = cmd.Run()
	if err != nil && ctx.Err() != nil {
		// Ctrl-C (or SIGTERM) stopped it: "signal: killed" would read as
		// a crash of the tool.
		return fmt.Errorf("%s %w (%w): nothing was written", filepath.Base(tool), errInterrupted, context.Cause(ctx))
	}
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if pw := settings["password"]; pw != "" {
			msg = strings.ReplaceAll(msg, pw, "***")
		}
		return fmt.Errorf("%s: %w: %s", filepath.Base(tool), err, msg)
	}
	return nil
}

// errInterrupted says a signal stopped a backup or a restore.
var errInterrupted = errors.New("interrupted")

// libpqEnv maps libpq's connection parameters to the environment
// variables that give them. sslpassword has none, and is not passed.
var libpqEnv = map[string]string{
	"host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "dbname": "PGDATABASE", "user": "PGUSER",
	"password": "PGPASSWORD", "passfile": "PGPASSFILE", "channel_binding": "PGCHANNELBINDING", "service": "PGSERVICE",
	"options": "PGOPTIONS", "application_name": "PGAPPNAME", "sslmode": "PGSSLMODE", "requiressl": "PGREQUIRESSL",
	"sslcompression": "PGSSLCOMPRESSION", "sslcert": "PGSSLCERT", "sslkey": "PGSSLKEY", "sslrootcert": "PGSSLROOTCERT",
	"sslcrl": "PGSSLCRL", "sslcrldir": "PGSSLCRLDIR", "sslsni": "PGSSLSNI", "requirepeer": "PGREQUIREPEER",
	"ssl_min_protocol_version": "PGSSLMINPROTOCOLVERSION", "ssl_max_protocol_version": "PGSSLMAXPROTOCOLVERSION",
	"gssencmode": "PGGSSENCMODE", "krbsrvname": "PGKRBSRVNAME", "gsslib": "PGGSSLIB", "connect_timeout": "PGCONNECT_TIMEOUT",
	"client_encoding": "PGCLIENTENCODING", "target_session_attrs": "PGTARGETSESSIONATTRS", "load_balance_hosts": "PGLOADBALANCEHOSTS",
}

// connSettings reads a connection string's parameters by name: a URL's
// (postgres://user:password@host:port/dbname?key=value) or a keyword/value
// string's (host=… password='…'). Not pgconn.ParseConfig, which parses
// both into a pgx config: it keeps no libpq names (sslmode, sslrootcert
// become a tls.Config), and libpq's environment needs them as written.
func connSettings(raw string) (map[string]string, error) {
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("RELAIS_DATABASE_URL: %w", err)
		}
		settings := map[string]string{}
		for k, v := range u.Query() {
			settings[k] = v[len(v)-1]
		}
		if u.User != nil {
			settings["user"] = u.User.Username()
			if pw, ok := u.User.Password(); ok {
				settings["password"] = pw
			}
		}
		// Several hosts (h1:5432,h2:5433) go as libpq lists them.
		var hosts, ports []string
		for _, hp := range strings.Split(u.Host, ",") {
			if h, p, err := net.SplitHostPort(hp); err == nil {
				hosts, ports = append(hosts, h), append(ports, p)
			} else if hp != "" {
				hosts, ports = append(hosts, strings.Trim(hp, "[]")), append(ports, "")
			}
		}
		if len(hosts) > 0 {
			settings["host"] = strings.Join(hosts, ",")
			if strings.Join(ports, "") != "" {
				settings["port"] = strings.Join(ports, ",")
			}
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			settings["dbname"] = db
		}
		return settings, nil
	}
	return keywordValues(raw)
}

// keywordValues parses libpq's keyword/value form: key = value pairs
// separated by spaces, a value in single quotes when it holds spaces, \'
// and \\ escaping a quote and a backslash.
func keywordValues(raw string) (map[string]string, error) {
	settings := map[string]string{}
	rest := strings.TrimSpace(raw)
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return nil, errors.New("RELAIS_DATABASE_URL: a keyword without = and a value")
		}
		key := strings.TrimSpace(rest[:eq])
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		var value strings.Builder
		if strings.HasPrefix(rest, "'") {
			i, closed := 1, false
			for ; i < len(rest); i++ {
				switch c := rest[i]; {
				case c == '\\' && i+1 < len(rest):
					i++
					value.WriteByte(rest[i])
				case c == '\'':
					closed = true
				default:
					value.WriteByte(c)
				}
				if closed {
					break
				}
			}
			if !closed {
				return nil, errors.New("RELAIS_DATABASE_URL: a quoted value without its closing quote")
			}
			rest = rest[i+1:]
		} else {
			i := 0
			for ; i < len(rest) && rest[i] != ' ' && rest[i] != '\t'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				value.WriteByte(rest[i])
			}
			rest = rest[i:]
		}
		settings[key] = value.String()
		rest = strings.TrimSpace(rest)
	}
	return settings, nil
}
