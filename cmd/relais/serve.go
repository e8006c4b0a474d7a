package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/server"
)

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// SIGHUP, which operators send for a reload (logrotate, a renewed
	// certificate, systemd's ExecReload), must not end the replica as Go's
	// default would, without its drain: it reloads what can be reloaded.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := config.Load("usage: relais serve [flags]\n\nRuns the API, the pull protocol, worker streams, the push runner,\ntimers and the console.", args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	if err := checkEnvironment(config.ServeVariables(), cfg.Flagged, warnTo(logger)); err != nil {
		return err
	}
	start := time.Now()
	// The keys, the address and the TLS files first: a malformed key, a
	// port in use or a bad certificate fails before a cluster is created
	// or a bootstrap token is shown (once) for a server that never ran.
	configured, err := configuredKeys(cfg)
	if err != nil {
		return err
	}

	srv, cert, err := server.NewHTTPServer(cfg, nil, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("%s %s: %w", cfg.Named("RELAIS_LISTEN"), cfg.Listen, err)
	}
	serving := false
	defer func() {
		if !serving {
			ln.Close()
		}
	}()

	db, _, err := openMigrated(ctx, cfg, logger, false)
	if err != nil {
		return err
	}
	defer db.close()
	schema, err := engine.SchemaVersion(ctx, db.pool)
	if err != nil {
		return err
	}
	writable, err := checkDatabaseRole(ctx, db.pool, logger)
	if err != nil {
		return err
	}
	keys, err := loadKeys(ctx, cfg, configured, db, logger)
	if err != nil {
		return err
	}
	eng := engine.New(db.pool, engine.Options{Logger: logger, Keys: keys, Limits: engine.Limits{
		MaxRetryDelay: cfg.Pull.MaxRetryDelay, DefaultPushTimeout: cfg.Push.DefaultTimeout, MaxPushTimeout: cfg.Push.MaxTimeout}})
	token := ""
	if writable {
		// On a standby the replica stays up, not ready, rather than fail
		// its boot on this one write.
		if token, err = eng.Bootstrap(ctx, cfg.BootstrapToken); err != nil {
			return err
		}
	}
	// With JSON logs, what serve prints is JSON records too: a container's
	// stdout and stderr reach one log pipeline (SRE QA).
	printed := newLogger(cfg, stdout)
	if token != "" {
		if cfg.LogFormat == "json" {
			printed.Warn("bootstrap admin token (shown once, store it now)", "token", token)
		} else {
			fmt.Fprintf(stdout, "\nBootstrap admin token (shown once, store it now):\n\n    %s\n\n", token)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	if cert != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "relais_tls_certificate_expiry_timestamp_seconds",
			Help: "When the TLS certificate served expires (Unix seconds): alert well before it, should its renewal fail."},
			func() float64 { return float64(cert.NotAfter().Unix()) }))
	}
	// The replica's background work (the NOTIFY listener, the push runner,
	// the timers) stops with the replica, after the drain, not at the
	// signal: streams settling what they hold must still hear of
	// cancellations, and a push claim cut short by the signal would leave
	// its call never made.
	replica := server.Start(context.WithoutCancel(ctx), server.Deps{Logger: logger, Config: cfg, Engine: eng, Registry: reg, SchemaVersion: schema})
	stopReplica := sync.OnceFunc(replica.Stop)
	defer stopReplica()

	srv.Handler = replica.Handler
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	scheme := "http"
	if cfg.TLSCertFile != "" {
		scheme = "https"
	}
	serveErr := make(chan error, 1)
	serving = true // Serve closes ln
	go func() { serveErr <- server.Serve(srv, ln) }()
	// The ready line is logged before the listening line is printed: a
	// supervisor (or a test) that waits for the latter then finds the former.
	logReady(logger, cfg, ln.Addr(), scheme == "https", db.cluster != nil, schema, time.Since(start))
	if listening := fmt.Sprintf("%s://%s", scheme, ln.Addr()); cfg.LogFormat == "json" {
		printed.Info("Relais listening on "+listening, "url", listening)
	} else {
		fmt.Fprintf(stdout, "Relais listening on %s\n", listening)
	}

	// A dead embedded server is restarted while the HTTP surface stays up
	// (API requests answer 503 database_unavailable meanwhile); only when
	// restarts keep failing does serve give up.
	clusterFailed := db.superviseCluster(embeddedpg.DefaultRestartPolicy)
	// A renewed certificate is taken when its files change (a mounted
	// secret is replaced without any signal), or at once on SIGHUP.
	var certCheck <-chan time.Time
	if cert != nil {
		t := time.NewTicker(certCheckInterval)
		defer t.Stop()
		certCheck = t.C
	}
wait:
	for {
		select {
		case err := <-serveErr:
			return fmt.Errorf("http server: %w", err)
		case err := <-clusterFailed:
			_ = srv.Close()
			return fmt.Errorf("giving up: %w; see postgres.log in that folder", err)
		case <-hup:
			if cert == nil {
				logger.Info("SIGHUP: nothing to reload (no TLS certificate); the configuration is read at start: restart to change it")
				continue
			}
			reloadCertificate(logger, cert, true)
		case <-certCheck:
			reloadCertificate(logger, cert, false)
		case <-ctx.Done():
			break wait
		}
	}

	stopping := time.Now()
	shutdown(logger, cfg, srv, replica.Drain)
	// The background work (timers, push calls, the listener) ends before
	// the line that says so; the embedded cluster, if any, stops after it
	// and logs its own line.
	stopReplica()
	logger.Info("stopped", "took", time.Since(stopping).Round(time.Millisecond))
	return nil
}

// certCheckInterval is how often the certificate's files are read for a
// renewal.
const certCheckInterval = time.Minute

// reloadCertificate takes the certificate's files again, logging a change
// or a failure (the certificate served then stays); asked says a SIGHUP
// asked for it, which is answered even when nothing changed.
func reloadCertificate(logger *slog.Logger, cert *server.Certificate, asked bool) {
	changed, err := cert.Reload()
	switch {
	case err != nil:
		logger.Error("reloading the TLS certificate failed; the one served stays", "err", err,
			"serial", cert.Serial(), "not_after", cert.NotAfter().UTC().Format(time.RFC3339))
	case changed:
		logger.Info("TLS certificate reloaded", "serial", cert.Serial(), "not_after", cert.NotAfter().UTC().Format(time.RFC3339))
	case asked:
		logger.Info("SIGHUP: the TLS certificate's files are unchanged", "serial", cert.Serial(), "not_after", cert.NotAfter().UTC().Format(time.RFC3339))
	}
}

// logReady says the replica serves, with what an operator checks first;
// a proxy list that trusts every peer is warned about.
func logReady(logger *slog.Logger, cfg config.Config, addr net.Addr, tls, embedded bool, schema int, took time.Duration) {
	proxies := make([]string, len(cfg.TrustedProxies))
	for i, p := range cfg.TrustedProxies {
		proxies[i] = p.String()
		if p.Bits() == 0 {
			logger.Warn("RELAIS_TRUSTED_PROXIES trusts every peer: any client can set the address and scheme Relais sees (sign-in throttle, Secure cookies); list the proxies' addresses instead, unless only proxies can reach this listener",
				"prefix", p.String())
		}
	}
	// The database's version: after a rollback it is newer than this
	// binary's, which the line then names too.
	versions := []any{"schema_version", schema}
	if known := engine.LatestSchemaVersion(); known != schema {
		versions = append(versions, "known_schema_version", known)
	}
	logger.Info("relais ready", append(append([]any{"version", strings.TrimPrefix(version(), "relais "), "listen", addr.String(), "tls", tls,
		"embedded_postgres", embedded}, versions...),
		"retention", retentionText(cfg.Retention), "trusted_proxies", strings.Join(proxies, ","),
		"startup", took.Round(time.Millisecond))...)
}

// shutdown drains the replica's streams (drain) and then the requests in
// flight, within RELAIS_SHUTDOWN_TIMEOUT.
func shutdown(logger *slog.Logger, cfg config.Config, srv *http.Server, drain func()) {
	logger.Info("shutting down: draining in-flight requests", "timeout", isoduration.Format(cfg.ShutdownTimeout))
	// One deadline for the whole shutdown: the streams' grace (during
	// which requests are still served: their workers settle through them)
	// and then the requests still in flight.
	deadline := time.Now().Add(cfg.ShutdownTimeout)
	// Idle connections close, and HTTP/2 ones are told to go away once
	// idle, so that clients reconnect elsewhere while the streams' workers
	// settle what they hold (/readyz says 503 meanwhile).
	srv.SetKeepAlivesEnabled(false)
	drain()
	// Requests still in flight get a few seconds even if the streams took
	// the whole timeout.
	sctx, cancel := context.WithDeadline(context.Background(), later(deadline, time.Now().Add(shutdownFloor)))
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutdown deadline reached; closing remaining connections", "err", err)
		_ = srv.Close()
	}
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	status := len(args) > 0 && args[0] == "status"
	if status {
		args = args[1:]
	}
	cfg, logger, err := loadAdmin("usage: relais migrate [status] [flags]\n\nApplies the pending database migrations and exits; with status, lists them and applies nothing.", args, getenv, stderr)
	if err != nil {
		return err
	}
	if status {
		return migrationStatus(ctx, cfg, logger, stdout)
	}
	db, applied, err := openMigrated(ctx, cfg, logger, true)
	if err != nil {
		return err
	}
	defer db.close()
	schema, err := engine.SchemaVersion(ctx, db.pool)
	if err != nil {
		return err
	}
	if known := engine.LatestSchemaVersion(); schema > known {
		fmt.Fprintf(stdout, "schema version %d, newer than this binary's %d (a newer relais migrated it; nothing applied)\n", schema, known)
		return nil
	}
	fmt.Fprintf(stdout, "schema version %d (%s applied now)\n", schema, migrationsText(len(applied)))
	return nil
}

// migrationStatus says what relais migrate would apply, applying nothing:
// what a DBA reads before an upgrade.
func migrationStatus(ctx context.Context, cfg config.Config, logger *slog.Logger, stdout io.Writer) error {
	// Reading applies nothing, and creates nothing either: a mistyped
	// RELAIS_DATA_DIR made a cluster and read "schema version 0"
	// (lifecycle QA).
	if err := requireExistingDatabase(cfg); err != nil {
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
	ms := engine.Migrations()
	switch {
	case schema > len(ms):
		fmt.Fprintf(stdout, "schema version %d, newer than this binary's %d (a newer relais migrated it): nothing to apply\n", schema, len(ms))
	case schema == len(ms):
		fmt.Fprintf(stdout, "schema version %d: up to date, nothing to apply\n", schema)
	default:
		fmt.Fprintf(stdout, "schema version %d; relais migrate would apply %s, up to version %d:\n", schema, migrationsText(len(ms)-schema), len(ms))
		for _, m := range ms[schema:] {
			fmt.Fprintf(stdout, "  %s\n", m.Name)
		}
	}
	return nil
}

func version() string {
	b, ok := readBuild()
	if !ok {
		return "relais (unknown version)"
	}
	v := b.version
	if b.revision != "" {
		v += " " + b.revision
	}
	return "relais " + v
}

// build is what the binary says of itself: its module version ("(devel)"
// for a build from a checkout), the commit it was built from (empty when
// built without version control information) and the Go release.
type build struct{ version, revision, goVersion string }

func readBuild() (build, bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return build{}, false
	}
	b := build{version: info.Main.Version, goVersion: info.GoVersion}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			b.revision = s.Value
		}
	}
	return b, true
}

// buildInfo is relais_build_info: which build each replica runs, during a
// rolling deploy.
func buildInfo() prometheus.Collector {
	b, _ := readBuild()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "relais_build_info",
		Help: "Always 1; its labels say which build this replica runs: version, revision (the commit, empty when unknown), go_version."},
		[]string{"version", "revision", "go_version"})
	g.WithLabelValues(b.version, b.revision, b.goVersion).Set(1)
	return g
}

// retentionText is RELAIS_RETENTION as the ready line shows it, in the
// setting's own syntax: an operator checks there what history is kept.
func retentionText(d time.Duration) string {
	if d == 0 {
		return "forever"
	}
	return isoduration.Format(d)
}

// shutdownFloor is the least time in-flight requests get to finish once
// the streams are done.
const shutdownFloor = 5 * time.Second

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// migrationsText is n migrations in words: "1 migration", "3 migrations".
func migrationsText(n int) string {
	if n == 1 {
		return "1 migration"
	}
	return strconv.Itoa(n) + " migrations"
}
