package embeddedpg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// readyTimeout bounds how long Start waits for a started server to accept
// connections when ctx has no earlier deadline.
const readyTimeout = 60 * time.Second

// killGrace is how long an immediate shutdown (SIGQUIT) may take before
// the process group is killed.
const killGrace = 5 * time.Second

// portAttempts bounds retries when a picked free port is taken by someone
// else before postgres binds it.
const portAttempts = 5

// maxSocketPath is the room in sockaddr_un.sun_path, terminator included.
const maxSocketPath = 108

// Options configures Start.
type Options struct {
	// Dir is the cluster folder: the data directory is Dir/data, sockets
	// are in Dir/run and server output goes to Dir/postgres.log. It is
	// created (mode 0700) if missing.
	Dir string
	// BinDir is the folder with initdb and postgres; "" means FindBinDir("").
	BinDir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one on each start.
	Port int
	// Fast trades durability for speed (fsync, synchronous_commit and
	// full_page_writes off). For tests only, never for a server whose data
	// matters.
	Fast bool
	// Logger receives the package's own messages; nil discards them. The
	// server's output always goes to Dir/postgres.log, not to the terminal.
	Logger *slog.Logger
	// Settings are extra server settings passed as -c name=value; they
	// override the package's defaults (such as max_connections=200), but
	// not port, listen_addresses, unix_socket_directories or hba_file.
	Settings map[string]string
}

// config is Options resolved by Start.
type config struct {
	dir, dataDir, runDir, logPath string
	binDir                        string
	ra                            *runAs
	fast                          bool
	logger                        *slog.Logger
	settings                      map[string]string
}

// Cluster is a running embedded PostgreSQL server started by Start.
type Cluster struct {
	cfg     *config
	port    int
	proc    *child
	lock    *os.File
	exited  chan struct{}
	logFrom int64 // offset in postgres.log where this start's output begins
	// password is the postgres role's, required over TCP; "" when TCP is
	// still trusted (see hostTrust).
	password string

	stopRequested atomic.Bool
	mu            sync.Mutex
	unexpected    bool  // the server exited before Stop was called; guarded by mu
	escalated     error // why Stop went beyond fast shutdown; guarded by mu
}

// Start creates the cluster in opts.Dir on first use, then starts the
// server and returns once it accepts connections. ctx bounds the start
// only (at most 60 s are spent waiting for readiness); the server keeps
// running after ctx ends, until Stop is called or the process dies.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	began := time.Now()
	if opts.Dir == "" {
		return nil, errors.New("embeddedpg: Options.Dir is required")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("embeddedpg: invalid port %d", opts.Port)
	}
	for name := range opts.Settings {
		if name == "" || strings.ContainsAny(name, "= \t\n") {
			return nil, fmt.Errorf("embeddedpg: invalid setting name %q", name)
		}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("embeddedpg: cluster folder: %w", err)
	}
	binDir, err := FindBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	ra, err := resolveRunAs()
	if err != nil {
		return nil, err
	}
	cfg := &config{
		dir:      dir,
		dataDir:  filepath.Join(dir, "data"),
		runDir:   filepath.Join(dir, "run"),
		logPath:  filepath.Join(dir, "postgres.log"),
		binDir:   binDir,
		ra:       ra,
		fast:     opts.Fast,
		logger:   opts.Logger,
		settings: opts.Settings,
	}
	if cfg.logger == nil {
		cfg.logger = discardLogger
	}

	if err := prepareDir(dir, ra); err != nil {
		return nil, err
	}
	lock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	keepLock := false
	defer func() {
		if !keepLock {
			lock.Close()
		}
	}()
	if err := ensureSubdir(cfg.runDir, ra); err != nil {
		return nil, err
	}
	password, err := readPassword(dir)
	if err != nil {
		return nil, err
	}
	// The role has the recorded password (or gets it from initdb);
	// otherwise the cluster predates passwords, or a crash came between
	// setting one and recording it, and a new one is set once it runs.
	recorded := password != ""
	if !recorded {
		password = newPassword()
	}
	created, err := ensureCluster(ctx, cfg, password)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(cfg.dataDir); err != nil {
		return nil, err
	}
	if err := clearStale(ctx, cfg.dataDir, cfg.runDir, cfg.logger); err != nil {
		return nil, err
	}
	sockets := socketsFit(cfg.runDir)
	host, err := writeAuthConfig(cfg, recorded || created, sockets, created)
	if err != nil {
		return nil, err
	}

	attempts := 1
	if opts.Port == 0 {
		attempts = portAttempts
	}
	// The port of the last start first, when free: a replica attached to
	// this cluster through its URL (RELAIS_DATABASE_URL) finds it again
	// after a restart (chaos QA: it stayed unready until restarted with
	// the new port).
	previous := 0
	if opts.Port == 0 {
		previous = lastPort(dir)
	}
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 && attempt == 1 && previous > 0 {
			port = previous
		} else if port == 0 {
			if port, err = pickPort(); err != nil {
				return nil, err
			}
		}
		c, retry, err := launch(ctx, cfg, port)
		if err == nil {
			if opts.Port == 0 && port != previous {
				if err := writeLastPort(dir, port); err != nil {
					cfg.logger.Warn("embedded postgres: the port could not be recorded; the next start may pick another", "err", err)
				}
			}
			c.lock = lock
			keepLock = true
			go c.watch()
			if sockets {
				if err := c.ensurePassword(ctx, password, recorded || created); err != nil {
					return nil, err
				}
			}
			if host == hostPassword {
				c.password = password
			}
			cfg.logger.Info("embedded postgres started",
				"port", port, "dir", dir, "bin", cfg.binDir, "pid", c.proc.pid, "created", created, "tcp", host, "duration", time.Since(began))
			return c, nil
		}
		if !retry || attempt >= attempts {
			return nil, err
		}
		cfg.logger.Info("embedded postgres: port taken, retrying with another", "port", port)
	}
}

// ensurePassword gives the role password over the Unix socket and records
// it unless it was recorded already. Setting it at every start costs a
// millisecond and repairs a role whose password went astray. A failure
// stops the server: it would refuse relais's own connections.
func (c *Cluster) ensurePassword(ctx context.Context, password string, recorded bool) error {
	err := setPassword(ctx, socketPath(c.cfg.runDir, c.port), password)
	if err == nil && !recorded {
		if err = writePassword(c.cfg.dir, password); err == nil {
			c.cfg.logger.Info("embedded postgres: TCP connections now need the password kept in the cluster folder",
				"file", filepath.Join(c.cfg.dir, passwordFile))
		}
	}
	if err != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), killGrace)
		defer cancel()
		_ = c.Stop(stopCtx)
		return err
	}
	return nil
}

// portFile records, in the cluster folder, the port of the last start.
const portFile = "port"

// lastPort is the port the cluster last listened on, 0 when none is
// recorded (or the record is not one).
func lastPort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, portFile))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1024 || n > 65535 {
		return 0
	}
	return n
}

// writeLastPort records port for the next start (see lastPort).
func writeLastPort(dir string, port int) error {
	return replaceFile(dir, portFile, []byte(strconv.Itoa(port)+"\n"))
}

// pickPort is freePort, replaceable so a test can hand out a taken port.
var pickPort = freePort

// freePort asks the kernel for an unused loopback port. Another process
// may grab it before postgres binds it; Start then retries.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("embeddedpg: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serverArgs builds the postgres command line.
func serverArgs(cfg *config, port int) []string {
	sockets := cfg.runDir
	if !socketsFit(cfg.runDir) {
		// postgres would refuse to start with a socket path this long;
		// relais connects over TCP, so Unix sockets are expendable.
		cfg.logger.Warn("embedded postgres: cluster folder path too long for Unix sockets, using TCP only", "dir", cfg.dir)
		sockets = ""
	} else {
		// The setting is a comma-separated list; quoting keeps commas or
		// spaces in the path from splitting it.
		sockets = `"` + strings.ReplaceAll(sockets, `"`, `""`) + `"`
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(port),
		"unix_socket_directories": sockets,
		"max_connections":         "200",
		"shared_buffers":          "128MB",
	}
	if cfg.fast {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range cfg.settings {
		// Where the server binds and whom it trusts are the package's
		// business: the URL, the readiness check and setting the password
		// over the socket depend on them.
		if k == "port" || k == "listen_addresses" || k == "unix_socket_directories" || k == "hba_file" {
			continue
		}
		settings[k] = v
	}
	args := []string{"-D", cfg.dataDir}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, "-c", k+"="+settings[k])
	}
	return args
}

// exitedEarly marks a server that exited before becoming ready.
type exitedEarly struct{ err error }

func (e *exitedEarly) Error() string {
	if e.err == nil {
		return "postgres exited before accepting connections"
	}
	return "postgres exited before accepting connections: " + e.err.Error()
}

func (e *exitedEarly) Unwrap() error { return e.err }

// launch starts one postgres process and waits until it is ready. retry
// reports a failure caused by the port being taken.
func launch(ctx context.Context, cfg *config, port int) (c *Cluster, retry bool, err error) {
	logf, logFrom, err := openLog(cfg.logPath, port)
	if err != nil {
		return nil, false, err
	}
	cmd := exec.Command(filepath.Join(cfg.binDir, "postgres"), serverArgs(cfg, port)...)
	cmd.Dir = cfg.dir
	cmd.Env = childEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = cfg.ra.sysProcAttr()
	proc, err := startChild(cmd)
	// The child holds its own descriptor.
	logf.Close()
	if err != nil {
		return nil, false, fmt.Errorf("embeddedpg: start postgres: %w", err)
	}
	if err := waitReady(ctx, proc, cfg.dataDir, port); err != nil {
		proc.forceStop(killGrace)
		tail := logTail(cfg.logPath, logFrom, 20)
		var early *exitedEarly
		retry = errors.As(err, &early) &&
			(strings.Contains(tail, "Address already in use") || strings.Contains(tail, "could not create any TCP/IP sockets"))
		return nil, retry, fmt.Errorf("embeddedpg: start postgres on port %d: %w; last lines of %s:\n%s", port, err, cfg.logPath, tail)
	}
	return &Cluster{cfg: cfg, port: port, proc: proc, exited: make(chan struct{}), logFrom: logFrom}, false, nil
}

// waitReady polls until postmaster.pid, rewritten by our process, says
// "ready" and the TCP port accepts a connection. The pid file status is
// what pg_ctl waits for; the dial guards against a loopback filter.
func waitReady(ctx context.Context, proc *child, dataDir string, port int) error {
	timeout := time.NewTimer(readyTimeout)
	defer timeout.Stop()
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	want := strconv.Itoa(proc.pid)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	delay := 2 * time.Millisecond
	for {
		if pidFileReady(pidFile, want) {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				return nil
			}
		}
		select {
		case <-proc.done:
			return &exitedEarly{proc.err}
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", context.Cause(ctx))
		case <-timeout.C:
			return fmt.Errorf("not ready after %v", readyTimeout)
		case <-time.After(delay):
		}
		delay = min(2*delay, 25*time.Millisecond)
	}
}

// pidFileReady reads the postmaster status from line 8 of postmaster.pid,
// which PostgreSQL 10 and later keep current. The port opens well before
// the server accepts sessions, so a successful dial alone proves nothing.
func pidFileReady(path, pid string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[0]) != pid {
		return false
	}
	status := strings.TrimSpace(lines[7])
	return status == "ready" || status == "standby"
}

// checkVersion rejects clusters older than PostgreSQL 10, whose pid file
// has no status line to tell when the server is ready.
func checkVersion(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return fmt.Errorf("embeddedpg: data directory: %w", err)
	}
	v := strings.TrimSpace(string(b))
	major, _, _ := strings.Cut(v, ".")
	if n, err := strconv.Atoi(major); err != nil || n < 10 {
		return fmt.Errorf("embeddedpg: the cluster in %s is PostgreSQL %s; PostgreSQL 10 or later is required", dataDir, v)
	}
	return nil
}

// watch releases the cluster folder once the server exits, whatever the
// reason, and records whether that exit was asked for.
func (c *Cluster) watch() {
	<-c.proc.done
	c.mu.Lock()
	c.unexpected = !c.stopRequested.Load()
	c.mu.Unlock()
	c.lock.Close()
	if c.unexpected {
		c.cfg.logger.Error("embedded postgres exited unexpectedly", "err", c.proc.err,
			"log", logTail(c.cfg.logPath, c.logFrom, 20))
	}
	close(c.exited)
}

// URL returns a connection URL for database as the postgres superuser,
// with its password: never log it whole (url.URL.Redacted hides the
// password).
func (c *Cluster) URL(database string) string {
	return clusterURL(c.port, c.password, database)
}

// Port returns the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Stop shuts the server down (fast shutdown: sessions are ended, a
// checkpoint is written) and waits for it to exit. When ctx ends first it
// escalates to an immediate shutdown and then kills the process group.
// Stop is idempotent and safe for concurrent use: every call returns the
// same result, including an error if the server had exited on its own.
func (c *Cluster) Stop(ctx context.Context) error {
	select {
	case <-c.exited:
		return c.stopResult()
	default:
	}
	c.stopRequested.Store(true)
	_ = c.proc.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.exited:
	case <-ctx.Done():
		c.mu.Lock()
		if c.escalated == nil {
			c.escalated = fmt.Errorf("fast shutdown did not finish in time (%w); sent SIGQUIT", context.Cause(ctx))
		}
		c.mu.Unlock()
		c.proc.forceStop(killGrace)
		<-c.exited
	}
	return c.stopResult()
}

func (c *Cluster) stopResult() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.escalated != nil:
		return fmt.Errorf("embeddedpg: stop: %w", c.escalated)
	case c.unexpected:
		status := "exit status 0"
		if c.proc.err != nil {
			status = c.proc.err.Error()
		}
		return fmt.Errorf("embeddedpg: postgres exited before Stop (%s); see %s", status, c.cfg.logPath)
	case c.proc.err != nil:
		return fmt.Errorf("embeddedpg: stop: postgres: %w", c.proc.err)
	}
	return nil
}

// Wait returns a channel that is closed when the server process has
// exited for any reason, so that relais can notice its database died.
func (c *Cluster) Wait() <-chan struct{} { return c.exited }
