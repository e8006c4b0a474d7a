package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
)

const backupUsage = `usage: relais backup FILE [flags]

Writes the database serve uses (the embedded cluster of RELAIS_DATA_DIR,
whether a serve runs on it or not, or RELAIS_DATABASE_URL) to FILE, a new
file, in pg_dump's custom format: definitions, processes, instances, the
tokens' hashes and the sealed values. The data keys that open the sealed
values are not in it: keep them apart (embedded mode: the data directory's
data-keys file). relais restore reads it back.`

const restoreUsage = `usage: relais restore FILE [--replace] [flags]

Restores a relais backup (or a pg_dump -Fc of a Relais database) into the
database serve uses, in one transaction: all of it or nothing. In embedded
mode no serve may run on RELAIS_DATA_DIR (stop it); on RELAIS_DATABASE_URL,
stop every replica first. A database that already holds a Relais is
refused unless --replace, which replaces it. The restore then checks that
the data keys open the restored values: give the ones the backup was taken
with beforehand (embedded mode: copy its data-keys file into
RELAIS_DATA_DIR before anything starts there; RELAIS_DATA_KEYS or
RELAIS_DATA_KEY_FILE otherwise). Owners and grants are not restored: what
is restored belongs to the role Relais connects as.`

// backupCommand runs relais backup: pg_dump of the database serve uses,
// written beside FILE and renamed to it once complete, so that a dump cut
// short never passes for a backup.
func backupCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
	partial := file + ".partial"
	if err := runPGTool(ctx, dump, db.url, "--format=custom", "--file="+partial); err != nil {
		_ = os.Remove(partial)
		return err
	}
	if err := os.Rename(partial, file); err != nil {
		_ = os.Remove(partial)
		return fmt.Errorf("backup: %w", err)
	}
	info, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "backup of schema version %d written to %s (%d KiB)\n", schema, file, (info.Size()+1023)/1024)
	fmt.Fprintf(stdout, "its sealed values open with %s: keep a copy of them apart from the backup (relais restore needs both)\n", keysSource(cfg, db))
	return nil
}

// restoreCommand runs relais restore: pg_restore of FILE into the
// database serve uses, in one transaction, then the keys' check serve
// makes at its boot, so that a restore whose values the keys cannot open
// is told now, not by a push failing as push_unprepared.
func restoreCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if wantsHelp(args) {
		return help(restoreUsage, getenv, stderr)
	}
	replace := false
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		if a == "--replace" || a == "-replace" {
			replace = true
			return true
		}
		return false
	})
	file, rest, ok := positional(args)
	if !ok {
		return errors.New("usage: relais restore FILE [--replace] [flags] (relais restore --help says more)")
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
	backupSchema, err := dumpSchemaVersion(ctx, restore, file)
	if err != nil {
		return err
	}
	// Not attached: a serve running on the embedded cluster would work on
	// tables the restore drops and creates under it.
	db, err := openDatabase(ctx, cfg, logger, false)
	if errors.Is(err, embeddedpg.ErrInUse) {
		return fmt.Errorf("a relais serve runs on RELAIS_DATA_DIR %s: stop it first (the restore replaces the tables it works on)", cfg.DataDir)
	}
	if err != nil {
		return err
	}
	defer db.close()
	schema, err := engine.SchemaVersion(ctx, db.pool)
	if err != nil {
		return err
	}
	toolArgs := []string{"--single-transaction", "--exit-on-error", "--no-owner", "--no-acl"}
	if schema > 0 {
		if !replace {
			return fmt.Errorf("the database already holds a Relais (schema version %d): relais restore --replace replaces it with the backup (stop every replica first; take a backup of it if it matters)", schema)
		}
		if schema > backupSchema {
			// --clean drops what the backup holds, not what later
			// migrations added: those would stay, and trip the next
			// upgrade's migrations.
			return fmt.Errorf("the database's schema (version %d) is newer than the backup's (%d): --replace would leave what the newer migrations added; restore into an empty database instead (embedded: a new RELAIS_DATA_DIR holding the backup's data-keys file; otherwise createdb and RELAIS_DATABASE_URL)", schema, backupSchema)
		}
		toolArgs = append(toolArgs, "--clean", "--if-exists")
	}
	if err := runPGTool(ctx, restore, db.url, append(toolArgs, file)...); err != nil {
		return err
	}
	// The pool's connections may hold statements prepared against the
	// tables the restore replaced.
	db.pool.Reset()
	restored, err := engine.SchemaVersion(ctx, db.pool)
	if err != nil {
		return err
	}
	if restored == 0 {
		return fmt.Errorf("%s restored, but it holds no Relais (no schema): is it a backup of a Relais database?", file)
	}
	if _, err := loadKeys(ctx, cfg, configured, db, logger); err != nil {
		return fmt.Errorf("%s restored (schema version %d), but serve will refuse to start on it: %w", file, restored, err)
	}
	fmt.Fprintf(stdout, "%s restored: schema version %d", file, restored)
	if known := engine.LatestSchemaVersion(); restored < known {
		fmt.Fprintf(stdout, " (serve, or relais migrate, applies the %d migrations up to this binary's %d)", known-restored, known)
	}
	fmt.Fprintf(stdout, "; %s open its sealed values\n", keysSource(cfg, db))
	return nil
}

// dumpSchemaVersion reads the schema version a backup holds, from its
// copy of relais_schema_migrations (pg_restore prints a table's data
// without a database): 0 for a dump without it, which the restore then
// reports as holding no Relais.
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

// keysSource names where the data keys come from, as a backup's reader
// must be told to keep them.
func keysSource(cfg config.Config, db *database) string {
	switch {
	case cfg.DataKeys != "":
		return "the data keys of RELAIS_DATA_KEYS"
	case cfg.DataKeyFile != "":
		return "the data keys of RELAIS_DATA_KEY_FILE " + cfg.DataKeyFile
	case db.embedded():
		return "the data keys of " + filepath.Join(cfg.DataDir, "data-keys")
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
// rawURL. The password goes in the child's environment rather than on
// its command line, where ps shows it to every user of the machine, and
// the URL loses pgx's own parameters, which libpq refuses.
func runPGTool(ctx context.Context, tool, rawURL string, args ...string) error {
	dsn, password, err := libpqURL(rawURL)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, tool, append([]string{"--no-password", "--dbname=" + dsn}, args...)...)
	cmd.Env = os.Environ()
	if password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+password)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if password != "" {
			msg = strings.ReplaceAll(msg, password, "***")
		}
		return fmt.Errorf("%s: %w: %s", filepath.Base(tool), err, msg)
	}
	return nil
}

// pgxOnly are connection parameters pgx and pgxpool read that libpq does
// not know (a URL sizing the pool, say).
var pgxOnly = []string{"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode", "min_read_buffer_size"}

// libpqURL is rawURL as libpq takes it, without its password, which it
// returns apart. A keyword/value string is returned as it is.
func libpqURL(rawURL string) (dsn, password string, err error) {
	if !strings.HasPrefix(rawURL, "postgres://") && !strings.HasPrefix(rawURL, "postgresql://") {
		return rawURL, "", nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("RELAIS_DATABASE_URL: %w", err)
	}
	if u.User != nil {
		password, _ = u.User.Password()
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") || slices.Contains(pgxOnly, k) {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), password, nil
}
