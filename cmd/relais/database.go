package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/internal/pgutc"
	"github.com/relais/relais/internal/pguuid"
)

// database is an open connection pool and, in embedded mode, the cluster
// behind it.
type database struct {
	pool     *pgxpool.Pool
	cluster  *embeddedpg.Cluster
	attached bool
	url      string
	// clusterOpts started cluster, so that it can be started again.
	clusterOpts embeddedpg.Options
	// supervisor, once superviseCluster is called, owns cluster.
	supervisor *embeddedpg.Supervisor
	logger     *slog.Logger
}

// openDatabase connects to RELAIS_DATABASE_URL, or starts (creating on first
// run) the embedded cluster of the data directory.
//
// With attach, a cluster already run by another relais (a serve) is used as
// is: administration commands must not start a second server on its files.
func openDatabase(ctx context.Context, cfg config.Config, logger *slog.Logger, attach bool) (*database, error) {
	db := &database{url: cfg.DatabaseURL, logger: logger}
	if db.url == "" {
		// The binaries first: a start that cannot run PostgreSQL leaves
		// no empty data directory behind (evaluator QA).
		bin, err := embeddedpg.FindBinDir(cfg.PGBin)
		if err != nil {
			if cfg.PGBin != "" {
				err = fmt.Errorf("%s: %w", cfg.Named("RELAIS_PG_BIN"), err)
			}
			if !strings.Contains(err.Error(), "RELAIS_DATABASE_URL") {
				err = fmt.Errorf("%w; or set RELAIS_DATABASE_URL to use an existing PostgreSQL server", err)
			}
			return nil, err
		}
		dir, err := clusterDir(cfg.DataDir, logger)
		if err != nil {
			return nil, err
		}
		db.clusterOpts = embeddedpg.Options{Dir: dir, BinDir: bin, Logger: logger}
		c, err := embeddedpg.Start(ctx, db.clusterOpts)
		if errors.Is(err, embeddedpg.ErrInUse) && attach {
			// A relais serve runs this cluster: use it rather than fight it.
			if db.url, err = embeddedpg.RunningURL(dir, "postgres"); err != nil {
				return nil, err
			}
			db.attached = true
			logger.Info("using the embedded cluster of a running relais", "dir", dir)
		} else if err != nil {
			if errors.Is(err, embeddedpg.ErrInUse) {
				// Two replicas share a database through a server, not
				// through one data directory's cluster.
				err = fmt.Errorf("%w: another relais serve is probably running on RELAIS_DATA_DIR %s; stop it, give this one another RELAIS_DATA_DIR, or run both on one PostgreSQL server with RELAIS_DATABASE_URL", err, cfg.DataDir)
			}
			if errors.Is(err, embeddedpg.ErrNoServerBinaries) && !strings.Contains(err.Error(), "RELAIS_DATABASE_URL") {
				err = fmt.Errorf("%w; or set RELAIS_DATABASE_URL to use an existing PostgreSQL server", err)
			}
			if errors.Is(err, fs.ErrPermission) {
				// The folder is the operator's setting: name it.
				err = fmt.Errorf("%s %s: %w (the embedded cluster's files go there: make it writable by this process, or give another)", cfg.Named("RELAIS_DATA_DIR"), cfg.DataDir, err)
			}
			return nil, err
		} else {
			db.cluster = c
			db.url = c.URL("postgres")
		}
	}
	if chars := unencodedUserinfo(db.url); chars != "" {
		db.close()
		return nil, fmt.Errorf("RELAIS_DATABASE_URL: its user name or password holds characters that must be percent-encoded there (%s), or the URL is cut inside it and the host read from the password: write @ as %%40, / as %%2F, ? as %%3F, # as %%23 (and : in the user name as %%3A) there", chars)
	}
	if strings.Contains(db.url, "#") {
		// A fragment names nothing PostgreSQL reads: a # in a URL is a
		// password's (or a query value's) left unencoded, its rest cut off
		// without a word (verifier QA).
		db.close()
		return nil, errors.New("RELAIS_DATABASE_URL holds a # that is not percent-encoded: a URL's # begins a fragment, which PostgreSQL reads nothing from, so what follows it is dropped; in a password or a query value, write it as %23")
	}
	pcfg, err := pgxpool.ParseConfig(db.url)
	if err != nil {
		db.close()
		return nil, withheldParseError(db.url, err)
	}
	// pgx's default (4, or the cores) starves the long polls, streams,
	// timers and group commit of one replica; an operator who sized the
	// pool in the URL knows their server's max_connections better.
	if !strings.Contains(db.url, "pool_max_conns") && pcfg.MaxConns < defaultPoolSize {
		pcfg.MaxConns = defaultPoolSize
	}
	if _, set := pcfg.ConnConfig.RuntimeParams["application_name"]; !set {
		// pg_stat_activity then ties each backend to its replica (named
		// as the worker catalog names it), unless the URL names it.
		pcfg.ConnConfig.RuntimeParams["application_name"] = applicationName()
	}
	pinSettings(pcfg)
	pguuid.Configure(pcfg)
	pgutc.Configure(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		db.close()
		return nil, fmt.Errorf("database: %w", err)
	}
	// Fail now, with a clear message, rather than on the first request.
	if err := waitForDatabase(ctx, pool, pcfg, cfg.DatabaseConnectTimeout, logger); err != nil {
		db.pool = pool // closed as at exit: a database that does not answer is not waited for
		db.close()
		return nil, err
	}
	db.pool = pool
	return db, nil
}

// pinnedSettings are the session settings Relais's statements rely on. A
// role's or database's defaults (ALTER ROLE … SET statement_timeout, a
// serializable default isolation, an idle_session_timeout) would otherwise
// cancel its statements, fail its transactions or end its LISTEN
// connection, each a 500 or a lost wake-up to its clients.
var pinnedSettings = []struct {
	name, value string
	since       int // server_version_num the setting exists from
}{
	{"statement_timeout", "0", 0},
	{"lock_timeout", "0", 0},
	{"idle_in_transaction_session_timeout", "0", 0},
	{"idle_session_timeout", "0", 140000},
	{"default_transaction_isolation", "'read committed'", 0},
	{"default_transaction_read_only", "off", 0},
}

// pinSettings sets pinnedSettings on each new connection of the pool, in
// one round trip, but for those the URL sets itself (as a parameter or in
// options=-c name=value): an operator who asks for a statement_timeout
// there gets it. A SET rather than startup parameters: poolers refuse
// startup parameters they do not know (PgBouncer's "unsupported startup
// parameter"), and a server refuses a setting older than itself.
func pinSettings(pcfg *pgxpool.Config) {
	given := settingsGiven(pcfg.ConnConfig.RuntimeParams)
	// The URL's search_path too is set after connecting, not sent at
	// startup: PgBouncer refuses a search_path startup parameter.
	searchPath, hasPath := pcfg.ConnConfig.RuntimeParams["search_path"]
	delete(pcfg.ConnConfig.RuntimeParams, "search_path")
	then := pcfg.AfterConnect
	pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if then != nil {
			if err := then(ctx, conn); err != nil {
				return err
			}
		}
		// No query to learn it: a role's statement_timeout of 1 ms would
		// cancel that too, before the SET that lifts it.
		version := serverVersionNum(conn.PgConn().ParameterStatus("server_version"))
		var sets []string
		for _, p := range pinnedSettings {
			if !given[p.name] && version >= p.since {
				sets = append(sets, "set "+p.name+" = "+p.value)
			}
		}
		if len(sets) > 0 {
			if _, err := conn.Exec(ctx, strings.Join(sets, "; "), pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("pin session settings: %w", err)
			}
		}
		if hasPath {
			if _, err := conn.Exec(ctx, "select set_config('search_path', $1, false)", searchPath); err != nil {
				return fmt.Errorf("search_path of RELAIS_DATABASE_URL: %w", err)
			}
		}
		return nil
	}
}

// serverVersionNum reads server_version ("15.18 (Debian 15.18-0+deb12u1)",
// "13.4") as server_version_num does (150018, 130004); 0 when it cannot.
func serverVersionNum(v string) int {
	fields := strings.Fields(v)
	if len(fields) == 0 {
		return 0
	}
	major, minor, _ := strings.Cut(fields[0], ".")
	ma, err := strconv.Atoi(major)
	if err != nil {
		return 0
	}
	mi, _ := strconv.Atoi(strings.TrimRightFunc(minor, func(r rune) bool { return r < '0' || r > '9' }))
	return ma*10000 + mi
}

// settingsGiven are the settings a connection's startup parameters set,
// by their own names or in options (-c name=value, --name=value).
func settingsGiven(params map[string]string) map[string]bool {
	given := map[string]bool{}
	for name := range params {
		given[name] = true
	}
	fields := strings.Fields(params["options"])
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "-c" && i+1 < len(fields):
			i++
			f = fields[i]
		case strings.HasPrefix(f, "-c"):
			f = f[2:]
		case strings.HasPrefix(f, "--"):
			f = f[2:]
		default:
			continue
		}
		name, _, _ := strings.Cut(f, "=")
		given[strings.ReplaceAll(strings.ToLower(name), "-", "_")] = true
	}
	return given
}

// checkDatabaseRole refuses to serve with a role short of the privileges
// Relais needs on its tables (a replica would boot, then fail every
// statement on them), and warns when the database takes no writes (a
// standby: /readyz then answers 503 and every write 503 until the URL
// leads to the primary), saying whether it does.
func checkDatabaseRole(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (writable bool, err error) {
	p, err := engine.MissingPrivileges(ctx, pool)
	if err != nil {
		return false, err
	}
	if len(p.Missing) > 0 {
		role := engine.SQLName(p.Role)
		owner := ""
		if p.Owner != "" {
			owner = engine.SQLName(p.Owner)
		}
		return false, fmt.Errorf("the database role %s lacks privileges Relais needs on its tables %s: as their owner %s (the role that runs relais migrate) or a superuser, grant them, as in\n    %s;\n"+
			"(the last gives it the tables of later migrations, which %s creates, too; in a schema shared with other applications, grant on Relais's tables by name instead of ALL TABLES)",
			role, strings.Join(p.Missing, ", "), owner, strings.Join(engine.GrantStatements(role, engine.SQLName(p.Schema), owner), ";\n    "), owner)
	}
	writable, err = engine.Writable(ctx, pool)
	if err != nil {
		return false, err
	}
	if !writable {
		logger.Warn("PostgreSQL takes no writes here (a standby, or a read-only session): /readyz answers 503 and every write 503 until RELAIS_DATABASE_URL leads to the primary (with several hosts, add target_session_attrs=read-write); the bootstrap token is not ensured")
	}
	return writable, nil
}

// Waiting for the database: each attempt is bounded so that a server that
// accepts connections and never answers cannot hold the start silent, and
// the operator hears why every reportEvery.
const (
	connectAttemptTimeout = 2 * time.Second
	connectRetryDelay     = 200 * time.Millisecond
	reportEvery           = 2 * time.Second
)

// waitForDatabase pings until the database answers, for at most timeout.
// Meanwhile it logs where it is waiting and why every reportEvery, and it
// gives up at once on what waiting cannot fix (a refused password, a
// missing database). Messages name host and port, never the password:
// pgx's errors do not carry it.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool, pcfg *pgxpool.Config, timeout time.Duration, logger *slog.Logger) error {
	where := net.JoinHostPort(pcfg.ConnConfig.Host, strconv.Itoa(int(pcfg.ConnConfig.Port)))
	began := time.Now()
	deadline := began.Add(timeout)
	nextReport := began.Add(reportEvery)
	for {
		// One connection of its own per attempt rather than pool.Ping: the
		// pool answers a slow connect with its caller's bare deadline,
		// while a connect says what it met (refused, timeout, a DNS
		// failure).
		actx, cancel := context.WithTimeout(ctx, connectAttemptTimeout)
		conn, err := pgx.ConnectConfig(actx, pcfg.ConnConfig)
		if err == nil {
			err = conn.Ping(actx)
			_ = conn.Close(actx)
		}
		if err == nil {
			err = pool.Ping(actx)
		}
		cancel()
		if err != nil {
			err = pgfault.WithoutTLSAttempt(err)
		}
		switch {
		case err == nil:
			if time.Since(began) > reportEvery {
				logger.Info("PostgreSQL is reachable", "at", where, "waited", time.Since(began).Round(time.Millisecond))
			}
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !worthWaiting(err):
			if !errors.As(err, new(*pgconn.PgError)) {
				return fmt.Errorf("database at %s offers no TLS, which the URL's sslmode requires (turn ssl on in the server, or set sslmode=disable or prefer in RELAIS_DATABASE_URL): %w", where, err)
			}
			return fmt.Errorf("database at %s refused the connection: %w", where, err)
		case !time.Now().Before(deadline):
			return unreachable{msg: fmt.Sprintf("database at %s still unreachable after %s (RELAIS_DATABASE_CONNECT_TIMEOUT): %s", where, isoduration.Format(timeout), oneLine(err.Error())), err: err}
		}
		if !time.Now().Before(nextReport) {
			// pgx puts each address it tried on a line of its own, which a
			// one-line log record would show as \n\t.
			logger.Warn("waiting for PostgreSQL at "+where+": "+oneLine(err.Error()), "waited", time.Since(began).Round(time.Second))
			nextReport = nextReport.Add(reportEvery)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(connectRetryDelay, time.Until(deadline))):
		}
	}
}

// worthWaiting reports whether a failed ping may succeed later: a server
// that is down or starting may come up, a wrong password or database name
// will not.
func worthWaiting(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 28: the password or the role refused; 3D000: no such database;
		// 42501: the role may not connect to it; 42704 and 08P01: a
		// setting the URL gives that the server (or a pooler in front of
		// it) does not know; 22023: a value it does not take for one
		// (statement_timeout=30sec: SRE QA, reported as unreachable).
		switch c := pgErr.Code; {
		case strings.HasPrefix(c, "28"), c == "3D000", c == "42501", c == "42704", c == "08P01", c == "22023":
			return false
		}
		return true
	}
	// sslmode=require (or verify-*) against a server without TLS: a
	// server that offers none will not start offering it.
	return !strings.Contains(err.Error(), "server refused TLS connection")
}

// openMigrated opens the configured database (see openDatabase) and applies
// the pending migrations: what every command that touches the database does
// first. It returns the versions it applied.
func openMigrated(ctx context.Context, cfg config.Config, logger *slog.Logger, attach bool) (*database, []int, error) {
	db, err := openDatabase(ctx, cfg, logger, attach)
	if err != nil {
		return nil, nil, err
	}
	applied, err := engine.Migrate(ctx, db.pool, logger)
	if err != nil {
		db.close()
		return nil, nil, err
	}
	return db, applied, nil
}

// openExisting opens, for a command that acts on a running Relais (token
// create, keys rotate), the database serve uses: see requireExistingDatabase.
// It migrates an empty database (a token made before the first serve,
// by automation), but never upgrades a schema: run from a new release's
// binary during a rolling upgrade, that would change the schema under the
// replicas still on the old one, which `relais migrate` does when the
// operator says so.
func openExisting(ctx context.Context, cfg config.Config, logger *slog.Logger) (*database, error) {
	if err := requireExistingDatabase(cfg); err != nil {
		return nil, err
	}
	db, err := openDatabase(ctx, cfg, logger, true)
	if err != nil {
		return nil, err
	}
	v, err := engine.SchemaVersion(ctx, db.pool)
	if err == nil && v == 0 {
		// No replica runs on a database without the schema.
		_, err = engine.Migrate(ctx, db.pool, logger)
	} else if latest := engine.LatestSchemaVersion(); err == nil && v < latest {
		err = fmt.Errorf("the database's schema is at version %d and this relais expects %d: run relais migrate first (this command upgrades no schema: replicas may still run on this one)", v, latest)
	}
	if err != nil {
		db.close()
		return nil, err
	}
	return db, nil
}

// embedded reports whether this process runs or uses the embedded cluster
// of its data directory.
func (db *database) embedded() bool { return db.cluster != nil || db.attached }

// superviseCluster has the embedded cluster, if this process runs one,
// restarted when its server dies (see embeddedpg.Supervisor); the channel
// it returns receives why supervision gave up. Without a cluster it
// returns nil, which never receives.
func (db *database) superviseCluster(policy embeddedpg.RestartPolicy) <-chan error {
	if db.cluster == nil {
		return nil
	}
	db.supervisor = embeddedpg.Supervise(db.cluster, db.clusterOpts, policy)
	return db.supervisor.Failed()
}

// poolCloseTimeout bounds closing the pool at exit. Closing waits for
// every connection in use to be given back, and one blocked on a database
// that stopped answering (frozen, black-holed) held a stop for over a
// minute past the drain: the process exits without them, which closes
// their sockets all the same.
const poolCloseTimeout = 5 * time.Second

func (db *database) close() {
	if db.pool != nil {
		closed := make(chan struct{})
		go func() {
			db.pool.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(poolCloseTimeout):
			db.logger.Warn("database connections not closed within "+poolCloseTimeout.String()+" (the database does not answer): exiting without them",
				"in_use", db.pool.Stat().AcquiredConns())
		}
	}
	if db.supervisor == nil && db.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	var err error
	if db.supervisor != nil {
		err = db.supervisor.Stop(ctx)
	} else {
		err = db.cluster.Stop(ctx)
	}
	if err == nil {
		db.logger.Info("embedded postgres stopped", "took", time.Since(began).Round(time.Millisecond))
	} else {
		// The next start stops a server left running (or recovers one
		// stopped midway): worth a line, not a failed exit.
		db.logger.Warn("embedded postgres did not stop cleanly", "err", err)
	}
}

// requireExistingDatabase refuses, in embedded mode, a data directory that
// holds no cluster yet. Commands that act on a running Relais (token
// create, keys rotate) would otherwise quietly create a second, empty
// database when pointed at the wrong folder: a token made there opens
// nothing.
func requireExistingDatabase(cfg config.Config) error {
	if cfg.DatabaseURL != "" {
		return nil
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("RELAIS_DATA_DIR: %w", err)
	}
	places := []string{filepath.Join(abs, "pg")}
	if os.Geteuid() == 0 {
		places = append(places, fallbackClusterDir(abs))
	}
	for _, dir := range places {
		_, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION"))
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("embedded cluster of %s: %w", abs, err)
		}
	}
	return fmt.Errorf("no Relais database in %s (its embedded cluster does not exist yet): pass the RELAIS_DATA_DIR (or --data-dir) that relais serve uses, or RELAIS_DATABASE_URL; or create it first with relais serve or relais migrate", abs)
}

// fallbackClusterDir is where the cluster of the data directory abs lives
// when abs cannot be traversed by the cluster user (see clusterDir).
func fallbackClusterDir(abs string) string {
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join("/var/lib/relais/clusters", hex.EncodeToString(sum[:8]))
}

// clusterDir is where the embedded cluster lives: DATA_DIR/pg. As root the
// cluster runs as an unprivileged user who must be able to traverse every
// parent folder; when DATA_DIR sits under a private folder (such as /root),
// the cluster lives under /var/lib/relais instead and DATA_DIR/pg-location
// says where, so that `relais serve` works from any checkout.
func clusterDir(dataDir string, logger *slog.Logger) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("RELAIS_DATA_DIR: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("RELAIS_DATA_DIR: %w", err)
	}
	dir := filepath.Join(abs, "pg")
	if os.Geteuid() != 0 {
		return dir, nil
	}
	// The cluster user must traverse DATA_DIR itself, not read it.
	if err := os.Chmod(abs, 0o711); err != nil {
		return "", fmt.Errorf("RELAIS_DATA_DIR: %w", err)
	}
	blocked := embeddedpg.UntraversableParent(dir)
	if blocked == "" {
		return dir, nil
	}
	alt := fallbackClusterDir(abs)
	if err := os.MkdirAll(filepath.Dir(alt), 0o711); err != nil {
		return "", fmt.Errorf("embedded cluster: %s is not traversable by the cluster user and %s cannot be created: %w", blocked, alt, err)
	}
	note := fmt.Sprintf("The embedded PostgreSQL cluster of this data directory lives in %s\nbecause %s is not traversable by the unprivileged cluster user.\n", alt, blocked)
	if err := os.WriteFile(filepath.Join(abs, "pg-location"), []byte(note), 0o600); err != nil {
		logger.Warn("cannot write where the embedded cluster lives", "file", filepath.Join(abs, "pg-location"), "err", err)
	}
	logger.Warn("embedded cluster placed outside the data directory", "dir", alt, "reason", blocked+" is not traversable by the cluster user")
	return alt, nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		// Durations as the text format writes them ("4.87ms"): the JSON
		// handler's bare nanoseconds read as a bug in a log search.
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// oneLine is s with its line breaks and their indentation as single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(distinctLines(s)), " ")
}

// distinctLines drops the lines of s that repeat an earlier one: pgx
// writes a line per attempt, and with sslmode=prefer (the default) it
// tries each address twice, with and without TLS, failing the same way
// (evaluator QA: the cause read twice).
func distinctLines(s string) string {
	lines := strings.Split(s, "\n")
	seen := map[string]bool{}
	kept := lines[:0]
	for _, l := range lines {
		if k := strings.TrimSpace(l); !seen[k] || k == "" {
			seen[k] = true
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// unreachable is a connection's failure, its repeated attempts said once.
type unreachable struct {
	msg string
	err error
}

func (u unreachable) Error() string { return u.msg }
func (u unreachable) Unwrap() error { return u.err }

// defaultPoolSize is how many connections a replica opens at most unless
// RELAIS_DATABASE_URL sets pool_max_conns.
const defaultPoolSize = 20

// urlHint says what pgx's parse error leaves the reader to guess: a value
// that is neither a postgres:// URL nor key=value pairs was probably meant
// as a URL with a misspelt or missing scheme.
func urlHint(url string) string {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") || strings.Contains(url, "=") {
		return ""
	}
	return " (a URL starts with postgres:// or postgresql://, as in postgres://user:password@host:5432/database)"
}

// unencodedUserinfo names the characters a postgres:// URL's user name
// or password holds unencoded that cut it short (an @, /, ? or #), or
// returns "". Such a URL parses into another host, port or database
// taken from inside the password (pgx then says "invalid port", or
// "password authentication failed"), and every message naming the host
// or quoting the URL shows part of the password, however it is redacted.
// The user name and password then run to the URL's last @: when the
// authority (up to the first /, ? or #) holds two @, or one followed by
// an @ before a host and port or database (u:p@ss/x?y@host:5432/db), or
// when it holds none but ends in a port that is no number (u:pa/ss@host:
// the authority u:pa). An @ in the query (?options=a@b,
// ?password=p@ss) is none of these.
func unencodedUserinfo(url string) string {
	_, rest, ok := strings.Cut(url, "://")
	if !ok || !strings.HasPrefix(url, "postgres") {
		return ""
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	last := strings.LastIndex(rest, "@")
	userinfo := ""
	switch ats := strings.Count(authority, "@"); {
	case ats > 1:
		userinfo = authority[:strings.LastIndex(authority, "@")]
	case last <= len(authority):
	case ats == 1 && hostAhead.MatchString(rest[last+1:]):
		userinfo = rest[:last]
	case ats == 0 && strings.Contains(authority, ":") && !allDigits(authority[strings.LastIndex(authority, ":")+1:]):
		userinfo = rest[:last]
	}
	var found []string
	for _, c := range []string{"@", "/", "?", "#"} {
		if strings.Contains(userinfo, c) {
			found = append(found, c)
		}
	}
	if len(found) < 2 {
		return strings.Join(found, "")
	}
	return strings.Join(found[:len(found)-1], ", ") + " and " + found[len(found)-1]
}

// hostAhead matches what follows a URL's authority @: a host with a port,
// or a host and a database.
var hostAhead = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:[0-9]+(/|$)|/)`)

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// withheldParseError is pgx's refusal of a URL that holds credentials,
// without its text: pgx quotes the URL, redacting the password only up to
// the first @ it finds, and a password holding an unencoded @ or ? would
// show in the rest.
func withheldParseError(url string, err error) error {
	lower := strings.ToLower(url)
	if !strings.Contains(url, "@") && !strings.Contains(lower, "password") {
		return fmt.Errorf("RELAIS_DATABASE_URL: %w%s", err, urlHint(url))
	}
	if redacted, ok := withoutPassword(url); ok {
		// A URL that parses, the password left out, is refused for one of
		// its parameters (sslmode=bogus, pool_max_conns=abc, port 99999):
		// pgx's message names it, and quotes no password (SRE QA: the
		// advice on percent-encoding sent them to the password).
		if _, perr := pgxpool.ParseConfig(redacted); perr != nil {
			return fmt.Errorf("RELAIS_DATABASE_URL: %w", perr)
		}
	}
	return fmt.Errorf("RELAIS_DATABASE_URL cannot be parsed as a URL (pgx's message is not repeated: it would quote the password); if the password holds @, /, ? or #, percent-encode them (%%40, %%2F, %%3F, %%23)%s", urlHint(url))
}

// keywordPassword is a password=… of the keyword/value form, quoted or
// not.
var keywordPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactedPassword stands for a password in a URL quoted back.
const redactedPassword = "REDACTED"

// withoutPassword is url with its password (in its user information or
// its password parameter) replaced by redactedPassword, if url parses as
// a PostgreSQL URL at all.
func withoutPassword(url string) (string, bool) {
	if !strings.Contains(url, "://") && strings.Contains(url, "=") {
		// The keyword/value form (host=… password=…), which pgx takes too.
		return keywordPassword.ReplaceAllString(url, "${1}"+redactedPassword), true
	}
	u, err := neturl.Parse(url)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" || u.Host == "" {
		return "", false
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = neturl.UserPassword(u.User.Username(), redactedPassword)
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", redactedPassword)
		u.RawQuery = q.Encode()
	}
	return u.String(), true
}

// applicationName names this process to PostgreSQL: "relais" and the
// engine's default replica name (host and process id), within the 63
// bytes PostgreSQL keeps.
func applicationName() string {
	name := "relais " + engine.DefaultReplica
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}
