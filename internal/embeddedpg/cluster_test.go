package embeddedpg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/relais/relais/internal/testlog"
)

const (
	helperDirEnv       = "RELAIS_EMBEDDEDPG_HELPER_DIR"
	helperBinEnv       = "RELAIS_EMBEDDEDPG_HELPER_BIN"
	helperNoPdeathEnv  = "RELAIS_EMBEDDEDPG_HELPER_NO_PDEATHSIG"
	testStartTimeout   = 2 * time.Minute
	testStopTimeout    = 30 * time.Second
	helperReadyTimeout = 2 * time.Minute
)

// testBase is a folder under /tmp with mode 0711, so that the postgres
// user can traverse it when the tests run as root (t.TempDir is 0700).
var testBase string

var testDirs atomic.Int64

func TestMain(m *testing.M) {
	if os.Getenv(helperDirEnv) != "" {
		os.Exit(m.Run())
	}
	base, err := os.MkdirTemp("/tmp", "relais-embeddedpg-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.Chmod(base, 0o711); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(base)
		os.Exit(1)
	}
	testBase = base
	code := m.Run()
	if err := os.RemoveAll(base); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// testBinDir finds the server binaries or skips: machines without
// PostgreSQL cannot run these tests.
func testBinDir(t *testing.T) string {
	t.Helper()
	dir, err := FindBinDir(os.Getenv("RELAIS_PG_BIN"))
	if errors.Is(err, ErrNoServerBinaries) {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	if err != nil {
		t.Fatalf("FindBinDir: %v", err)
	}
	return dir
}

// testDir returns a not yet existing folder for this test under testBase.
func testDir(t *testing.T) string {
	t.Helper()
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "_")
	// Numbered so that -count=N runs do not find an earlier run's cluster.
	return filepath.Join(testBase, fmt.Sprintf("%s-%d", name, testDirs.Add(1)))
}

// newLogger logs into a buffer: the cluster logs from its own goroutines.
func newLogger() (*slog.Logger, *testlog.Buffer) {
	b := &testlog.Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// start starts a cluster and registers a Stop for the end of the test.
func start(t *testing.T, opts Options) (*Cluster, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	began := time.Now()
	c, err := Start(ctx, opts)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stop(t, c) })
	return c, took
}

func stop(t *testing.T, c *Cluster) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testStopTimeout)
	defer cancel()
	began := time.Now()
	err := c.Stop(ctx)
	return time.Since(began), err
}

// selectOne checks that the server answers a query.
func selectOne(t *testing.T, c *Cluster) {
	t.Helper()
	rows, err := query(c, "select 1")
	if err != nil {
		t.Fatalf("select 1 on port %d: %v", c.Port(), err)
	}
	if len(rows) != 1 || len(rows[0]) != 1 || rows[0][0] != "1" {
		t.Fatalf("select 1 returned %q, want [[1]]", rows)
	}
}

func serverPid(t *testing.T, c *Cluster) int {
	t.Helper()
	return c.proc.pid
}

func TestColdStartQueryStop(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)
	root := testDir(t)
	// Parents that Start creates itself must end up traversable.
	dir := filepath.Join(root, "nested", "pg")
	logger, logs := newLogger()

	c, took := start(t, Options{Dir: dir, BinDir: bin, Fast: true, Logger: logger})
	t.Logf("cold start (initdb + start + ready): %v", took)
	selectOne(t, c)

	password := checkPasswordFile(t, dir)
	wantURL := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/relais?sslmode=disable", password, c.Port())
	if got := c.URL("relais"); got != wantURL {
		t.Errorf("URL(relais) = %q, want %q", got, wantURL)
	}
	checkTCPNeedsPassword(t, c)
	running, err := RunningURL(dir, "postgres")
	if err != nil {
		t.Fatalf("RunningURL: %v", err)
	}
	if running != c.URL("postgres") {
		t.Errorf("RunningURL = %q, want %q", running, c.URL("postgres"))
	}
	if rows, err := urlQuery(running, "select current_user"); err != nil || len(rows) != 1 || rows[0][0] != "postgres" {
		t.Errorf("select current_user over RunningURL = %q, %v; want [[postgres]]", rows, err)
	}
	if logs := logs.String(); strings.Contains(logs, password) {
		t.Errorf("log = %q, want it without the password", logs)
	}
	if !strings.Contains(logs.String(), "embedded postgres started") {
		t.Errorf("log = %q, want an 'embedded postgres started' record", logs.String())
	}
	if strings.Contains(logs.String(), "now need the password") {
		t.Errorf("log = %q, want no upgrade record for a new cluster", logs.String())
	}

	for _, p := range []string{root, filepath.Join(root, "nested")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o755 {
			t.Errorf("mode of created parent %s = %04o, want 0755", p, got)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("mode of cluster folder = %04o, want 0700", got)
	}
	ra, err := resolveRunAs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "data"), filepath.Join(dir, "run")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Sys().(*syscall.Stat_t).Uid; got != ra.uid {
			t.Errorf("owner of %s = uid %d, want %d (%s)", p, got, ra.uid, ra.name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "run", ".s.PGSQL."+strconv.Itoa(c.Port()))); err != nil {
		t.Errorf("Unix socket in the run folder: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "postgres.log")); err != nil {
		t.Errorf("server log: %v", err)
	} else if bytes.Contains(b, []byte(password)) {
		t.Errorf("server log holds the password")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, initdbPasswordPrefix+"*")); len(leftovers) > 0 {
		t.Errorf("initdb's password file left behind: %v", leftovers)
	}

	// A second cluster on the same folder must be refused, not clobber it.
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	if c2, err := Start(ctx, Options{Dir: dir, BinDir: bin, Fast: true}); err == nil {
		c2.Stop(ctx)
		t.Errorf("second Start on a folder in use succeeded, want an error")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Start error = %q, want it to say the folder is in use", err)
	}

	pid := serverPid(t, c)
	stopTook, err := stop(t, c)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stop: %v", stopTook)
	if processAlive(pid) {
		t.Errorf("postgres pid %d still alive after Stop", pid)
	}
	select {
	case <-c.Wait():
	default:
		t.Errorf("Wait() channel not closed after Stop")
	}
	if _, err := stop(t, c); err != nil {
		t.Errorf("second Stop = %v, want nil (idempotent)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("postmaster.pid after Stop: err = %v, want it removed", err)
	}
}

func TestWarmRestartReusesCluster(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)
	dir := testDir(t)
	logger, logs := newLogger()
	opts := Options{Dir: dir, BinDir: bin, Fast: true, Logger: logger,
		Settings: map[string]string{"max_connections": "50"}}

	c, cold := start(t, opts)
	if _, err := query(c, "create table kept (v text); insert into kept values ('still here')"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	rows, err := query(c, "show max_connections")
	if err != nil || len(rows) != 1 || rows[0][0] != "50" {
		t.Errorf("show max_connections = %q, %v; want [[50]] from Options.Settings", rows, err)
	}
	port := c.Port()
	stop1, err := stop(t, c)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	pgVersion, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION"))
	if err != nil {
		t.Fatal(err)
	}

	c, warm := start(t, opts)
	// On the port of its last start, which is free: a replica attached
	// by URL finds it again (chaos QA).
	if c.Port() != port {
		t.Errorf("warm start on port %d, want the last start's %d", c.Port(), port)
	}
	rows, err = query(c, "select v from kept")
	if err != nil || len(rows) != 1 || rows[0][0] != "still here" {
		t.Errorf("select from kept = %q, %v; want [[still here]] (cluster reused)", rows, err)
	}
	stop2, err := stop(t, c)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := strings.Count(logs.String(), "created new cluster"); n != 1 {
		t.Errorf("initdb ran %d times over two starts, want 1", n)
	}
	if fi, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil || !os.SameFile(fi, pgVersion) {
		t.Errorf("PG_VERSION replaced by the warm start (err %v), want the same cluster", err)
	}
	t.Logf("cold start %v, stop %v; warm start %v, stop %v", cold, stop1, warm, stop2)

	// A server that dies on its own must close Wait and make Stop report it;
	// SIGKILL also leaves orphaned backends for the next Start to clear.
	c, _ = start(t, opts)
	pid := serverPid(t, c)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Wait():
	case <-time.After(10 * time.Second):
		t.Fatalf("Wait() not closed 10s after postgres was killed")
	}
	if _, err := stop(t, c); err == nil || !strings.Contains(err.Error(), "exited before Stop") {
		t.Errorf("Stop after the server died = %v, want an 'exited before Stop' error", err)
	}

	c, _ = start(t, opts)
	rows, err = query(c, "select v from kept")
	if err != nil || len(rows) != 1 || rows[0][0] != "still here" {
		t.Errorf("after crash, select from kept = %q, %v; want [[still here]]", rows, err)
	}
	if _, err := stop(t, c); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// TestHelperProcess is not a test: TestKill9Recovery runs the test binary
// with it to own a cluster in a process that can be killed with SIGKILL.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestKill9Recovery")
	}
	if os.Getenv(helperNoPdeathEnv) == "1" {
		parentDeathSignal = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	c, err := Start(ctx, Options{Dir: dir, BinDir: os.Getenv(helperBinEnv), Fast: true})
	if err != nil {
		fmt.Printf("ERROR %v\n", strings.ReplaceAll(err.Error(), "\n", " | "))
		os.Exit(1)
	}
	fmt.Printf("READY %d %d\n", c.Port(), c.proc.pid)
	time.Sleep(10 * time.Minute)
	os.Exit(1)
}

func TestKill9Recovery(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)
	for _, tc := range []struct {
		name      string
		pdeathsig bool
	}{
		{"parent-death-signal", true},
		// Without it, the server outlives relais and must be found and
		// stopped by the next Start.
		{"orphaned-server", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := testDir(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperBinEnv+"="+bin)
			if !tc.pdeathsig {
				cmd.Env = append(cmd.Env, helperNoPdeathEnv+"=1")
			}
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

			lines := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					if l := sc.Text(); strings.HasPrefix(l, "READY ") || strings.HasPrefix(l, "ERROR ") {
						lines <- l
						return
					}
				}
				lines <- "ERROR helper exited without reporting"
			}()
			var line string
			select {
			case line = <-lines:
			case <-time.After(helperReadyTimeout):
				t.Fatalf("helper did not report within %v", helperReadyTimeout)
			}
			var port, oldPid int
			if _, err := fmt.Sscanf(line, "READY %d %d", &port, &oldPid); err != nil {
				t.Fatalf("helper said %q, want READY PORT PID", line)
			}
			// If the test fails before the next Start handles it, the
			// orphan must not outlive the test run.
			t.Cleanup(func() {
				if processAlive(oldPid) && postgresFor(oldPid, filepath.Join(dir, "data")) == isOurs {
					syscall.Kill(-oldPid, syscall.SIGKILL)
				}
			})

			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if tc.pdeathsig {
				// The start thread is held until the server exits, so the
				// signal fires when, and only when, relais dies.
				if !waitGone(context.Background(), []int{oldPid}, 10*time.Second) {
					t.Errorf("postgres pid %d still alive 10s after its parent was killed; want the parent-death signal to shut it down", oldPid)
				}
			} else {
				time.Sleep(200 * time.Millisecond)
				if !processAlive(oldPid) {
					t.Fatalf("orphaned postgres pid %d died with its parent; want it left running for this test", oldPid)
				}
			}

			logger, logs := newLogger()
			c, took := start(t, Options{Dir: dir, BinDir: bin, Fast: true, Logger: logger})
			t.Logf("start after kill -9: %v", took)
			selectOne(t, c)
			if processAlive(oldPid) {
				t.Errorf("old postgres pid %d still alive after the new Start", oldPid)
			}
			if !tc.pdeathsig && !strings.Contains(logs.String(), "left running") {
				t.Errorf("log = %q, want a record about stopping the server left running", logs.String())
			}
			if _, err := stop(t, c); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}

func TestStalePidFile(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)

	// A PID that certainly belonged to a process that has exited.
	ver := exec.Command(filepath.Join(bin, "postgres"), "--version")
	if err := ver.Run(); err != nil {
		t.Fatalf("postgres --version: %v", err)
	}
	deadPid := ver.Process.Pid

	for _, tc := range []struct {
		name string
		pid  int
	}{
		{"dead-pid", deadPid},
		// postgres itself refuses to start while the PID is alive.
		{"live-unrelated-pid", os.Getpid()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := testDir(t)
			c, _ := start(t, Options{Dir: dir, BinDir: bin, Fast: true})
			if _, err := stop(t, c); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			dataDir := filepath.Join(dir, "data")
			stale := fmt.Sprintf("%d\n%s\n1700000000\n5432\n%s\n127.0.0.1\n  5432001         0\nready   \n", tc.pid, dataDir, filepath.Join(dir, "run"))
			if err := os.WriteFile(filepath.Join(dataDir, "postmaster.pid"), []byte(stale), 0o600); err != nil {
				t.Fatal(err)
			}
			// A leftover socket lock file of a port the server no longer uses.
			if err := os.WriteFile(filepath.Join(dir, "run", ".s.PGSQL.5432.lock"), []byte(strconv.Itoa(tc.pid)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}

			c, _ = start(t, Options{Dir: dir, BinDir: bin, Fast: true})
			selectOne(t, c)
			if _, err := os.Stat(filepath.Join(dir, "run", ".s.PGSQL.5432.lock")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stale socket lock file: err = %v, want it removed", err)
			}
			if _, err := stop(t, c); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}

func TestInterruptedInitdbIsRedone(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)
	dir := testDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// What a kill -9 during initdb leaves behind.
	leftover := filepath.Join(dir, "data.init-12345")
	if err := os.MkdirAll(filepath.Join(leftover, "base"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Not Fast: the durable path syncs the new cluster before using it.
	c, took := start(t, Options{Dir: dir, BinDir: bin})
	t.Logf("cold start without Fast (initdb + sync + start + ready): %v", took)
	selectOne(t, c)
	rows, err := query(c, "show fsync")
	if err != nil || len(rows) != 1 || rows[0][0] != "on" {
		t.Errorf("show fsync = %q, %v; want [[on]] without Fast", rows, err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover initdb folder: err = %v, want it removed", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "postgres.log")); err != nil || !bytes.Contains(b, []byte(syncedAfterInitdb)) {
		t.Errorf("the cluster's log does not say initdb's skipped sync was made up for: %v", err)
	}

	// No time left for a fast shutdown: Stop must still end the server,
	// and report that it had to force it.
	pid := serverPid(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Stop(ctx); err == nil || !strings.Contains(err.Error(), "SIGQUIT") {
		t.Errorf("Stop with a cancelled context = %v, want an error saying it sent SIGQUIT", err)
	}
	if processAlive(pid) {
		t.Errorf("postgres pid %d alive after a forced Stop", pid)
	}
	c, _ = start(t, Options{Dir: dir, BinDir: bin})
	selectOne(t, c)
	if _, err := stop(t, c); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// TestPortTaken is sequential because it replaces pickPort.
func TestPortTaken(t *testing.T) {
	bin := testBinDir(t)
	dir := testDir(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	c, err := Start(ctx, Options{Dir: dir, BinDir: bin, Fast: true, Port: taken})
	if err == nil {
		c.Stop(ctx)
		t.Fatalf("Start on taken port %d succeeded, want an error", taken)
	}
	for _, want := range []string{"postgres.log", "could not create any TCP/IP sockets"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %q, want it to contain %q (the server log tail)", err, want)
		}
	}

	calls := 0
	pickPort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken, nil
		}
		return freePort()
	}
	t.Cleanup(func() { pickPort = freePort })
	logger, logs := newLogger()
	c, _ = start(t, Options{Dir: dir, BinDir: bin, Fast: true, Logger: logger})
	if c.Port() == taken || calls != 2 {
		t.Errorf("port %d after %d picks, want a retry away from taken port %d", c.Port(), calls, taken)
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("log = %q, want a record of the retry", logs.String())
	}
	selectOne(t, c)

	// The last start's port, taken meanwhile, is left for another.
	last := c.Port()
	if _, err := stop(t, c); err != nil {
		t.Fatal(err)
	}
	l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(last)))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	c, _ = start(t, Options{Dir: dir, BinDir: bin, Fast: true, Logger: logger})
	if c.Port() == last {
		t.Errorf("started on the last start's port %d, which is taken", last)
	}
	selectOne(t, c)
}

func TestNonTraversableParent(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	bin := testBinDir(t)
	private := testDir(t)
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(private, "pg")
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	c, err := Start(ctx, Options{Dir: dir, BinDir: bin, Fast: true})
	if err == nil {
		c.Stop(ctx)
		t.Fatalf("Start under a 0700 root folder succeeded, want an error")
	}
	for _, want := range []string{private, "not traversable", "/var/tmp"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %q, want it to contain %q", err, want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster folder created despite the error (stat err %v)", err)
	}
	fi, err := os.Stat(private)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("mode of the user's folder = %04o, want it left at 0700", got)
	}
}

// A cluster folder another account owns (a relais run as root made it for
// postgres, then one run as another user) is refused saying whose it is:
// the traversal advice would not help.
func TestClusterOfAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root can hand a folder to another user")
	}
	parent := testDir(t)
	dir := filepath.Join(parent, "pg")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	ra, err := resolveRunAs()
	if err != nil {
		t.Fatal(err)
	}
	other := ra.uid + 1
	if err := os.Chown(dir, int(other), int(ra.gid)); err != nil {
		t.Fatal(err)
	}
	err = prepareDir(dir, ra)
	if err == nil || !strings.Contains(err.Error(), "belongs to") || !strings.Contains(err.Error(), "run relais the way that made the cluster") {
		t.Errorf("prepareDir of another user's cluster = %v; want whose it is said", err)
	}
	if err := os.Chown(dir, int(ra.uid), int(ra.gid)); err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(dir, ra); err != nil {
		t.Errorf("prepareDir of the run-as user's own cluster = %v", err)
	}
}

func TestStartInvalidOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no-dir", Options{}, "Dir is required"},
		{"bad-port", Options{Dir: "/tmp/x", Port: 70000}, "invalid port"},
		{"bad-setting", Options{Dir: "/tmp/x", Settings: map[string]string{"a=b": "c"}}, "invalid setting"},
	} {
		if _, err := Start(ctx, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Start error = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestServerArgs(t *testing.T) {
	t.Parallel()
	cfg := &config{
		dir: "/srv/pg", dataDir: "/srv/pg/data", runDir: "/srv/pg/run", fast: true, logger: discardLogger,
		settings: map[string]string{"max_connections": "20", "port": "1", "work_mem": "8MB",
			"hba_file": "/etc/trust_all.conf", "unix_socket_directories": "/tmp"},
	}
	got := strings.Join(serverArgs(cfg, 5555), " ")
	for _, want := range []string{
		"-D /srv/pg/data", "-c port=5555", "-c listen_addresses=127.0.0.1",
		`-c unix_socket_directories="/srv/pg/run"`, "-c max_connections=20", "-c shared_buffers=128MB",
		"-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off", "-c work_mem=8MB",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args = %q, want them to contain %q", got, want)
		}
	}
	if strings.Contains(got, "port=1 ") || strings.Contains(got, "max_connections=200") {
		t.Errorf("args = %q, want port kept and max_connections overridden", got)
	}
	if strings.Contains(got, "hba_file") || strings.Contains(got, "unix_socket_directories=/tmp") {
		t.Errorf("args = %q, want hba_file and unix_socket_directories kept out of Settings' reach", got)
	}

	cfg.fast = false
	cfg.runDir = "/" + strings.Repeat("x", 100) + "/run"
	got = strings.Join(serverArgs(cfg, 5555), " ")
	if !strings.Contains(got, "unix_socket_directories= ") || strings.Contains(got, "fsync=off") {
		t.Errorf("args = %q, want sockets disabled for a too long path and no Fast settings", got)
	}
}

func TestPidFileReady(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "postmaster.pid")
	for _, tc := range []struct {
		content string
		want    bool
	}{
		{"42\n/d\n1\n5432\n/r\n127.0.0.1\n  1  2\nready   \n", true},
		{"42\n/d\n1\n5432\n/r\n127.0.0.1\n  1  2\nstarting\n", false},
		{"42\n/d\n1\n5432\n/r\n127.0.0.1\n  1  2\n", false},
		{"43\n/d\n1\n5432\n/r\n127.0.0.1\n  1  2\nready   \n", false},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := pidFileReady(path, "42"); got != tc.want {
			t.Errorf("pidFileReady(%q) = %v, want %v", tc.content, got, tc.want)
		}
	}
}

// checkPasswordFile checks the password file of the cluster in dir (mode
// 0600, owned by whoever runs relais, not the cluster user) and returns
// the password.
func checkPasswordFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, passwordFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("password file: %v", err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode of %s = %04o, want 0600", path, got)
	}
	if got := fi.Sys().(*syscall.Stat_t).Uid; got != uint32(os.Geteuid()) {
		t.Errorf("owner of %s = uid %d, want %d (the user running relais)", path, got, os.Geteuid())
	}
	password, err := readPassword(dir)
	if err != nil || len(password) < 20 {
		t.Fatalf("readPassword = %q, %v; want a generated password", password, err)
	}
	return password
}

// checkTCPNeedsPassword checks that TCP on 127.0.0.1 refuses a session
// without c's password and accepts one with it.
func checkTCPNeedsPassword(t *testing.T, c *Cluster) {
	t.Helper()
	if _, err := tcpQuery(c.Port(), "", "select 1"); !errors.Is(err, errPasswordRequired) {
		t.Errorf("TCP without a password: err = %v, want the server to ask for one", err)
	}
	if _, err := tcpQuery(c.Port(), "not-the-password", "select 1"); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("TCP with a wrong password: err = %v, want password authentication failed", err)
	}
	if rows, err := urlQuery(c.URL("postgres"), "select 1"); err != nil || len(rows) != 1 || rows[0][0] != "1" {
		t.Errorf("select 1 over URL() = %q, %v; want [[1]]", rows, err)
	}
}

// createTrustCluster makes in dir what relais made before clusters had a
// password: initdb --auth=trust, with a table in it.
func createTrustCluster(t *testing.T, bin, dir string) {
	t.Helper()
	ra, err := resolveRunAs()
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(dir, ra); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	run := func(stdin string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = childEnv()
		cmd.Stdin = strings.NewReader(stdin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: ra.cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	run("", "initdb", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "-D", data)
	run("create table kept (v text);\ninsert into kept values ('from the trust era');\n",
		"postgres", "--single", "-D", data, "postgres")
	hba, err := os.ReadFile(filepath.Join(data, "pg_hba.conf"))
	if err != nil || !regexp.MustCompile(`(?m)^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust`).Match(hba) {
		t.Fatalf("pg_hba.conf of the old-style cluster (err %v):\n%s\nwant host trust", err, hba)
	}
}

// TestTrustClusterIsUpgraded: a cluster an earlier relais created with
// trust authentication keeps its data and needs a password over TCP from
// its next start on.
func TestTrustClusterIsUpgraded(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)
	dir := testDir(t)
	createTrustCluster(t, bin, dir)
	logger, logs := newLogger()
	opts := Options{Dir: dir, BinDir: bin, Fast: true, Logger: logger}

	c, _ := start(t, opts)
	rows, err := query(c, "select v from kept")
	if err != nil || len(rows) != 1 || rows[0][0] != "from the trust era" {
		t.Errorf("select from kept = %q, %v; want [[from the trust era]]", rows, err)
	}
	password := checkPasswordFile(t, dir)
	checkTCPNeedsPassword(t, c)
	if n := strings.Count(logs.String(), "created new cluster"); n != 0 {
		t.Errorf("initdb ran on an existing cluster")
	}
	if !strings.Contains(logs.String(), "now need the password") {
		t.Errorf("log = %q, want a record of the upgrade", logs)
	}
	hba, err := os.ReadFile(filepath.Join(dir, "data", "pg_hba.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`(?m)^local\s+all\s+all\s+trust$`, `(?m)^host\s+all\s+all\s+127\.0\.0\.1/32\s+scram-sha-256$`, `(?m)^host\s+all\s+all\s+::1/128\s+scram-sha-256$`} {
		if !regexp.MustCompile(want).Match(hba) {
			t.Errorf("pg_hba.conf:\n%s\nwant a line matching %s", hba, want)
		}
	}
	if regexp.MustCompile(`(?m)^host.*trust`).Match(hba) {
		t.Errorf("pg_hba.conf:\n%s\nwant no trusted host line", hba)
	}
	if _, err := stop(t, c); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// The next start keeps the password.
	c, _ = start(t, opts)
	if got := checkPasswordFile(t, dir); got != password {
		t.Errorf("password changed across restarts")
	}
	checkTCPNeedsPassword(t, c)
	if _, err := stop(t, c); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// What a crash between setting a password and recording it leaves: a
	// role with a password nobody knows. The next start sets a new one.
	if err := os.Remove(filepath.Join(dir, passwordFile)); err != nil {
		t.Fatal(err)
	}
	c, _ = start(t, opts)
	if got := checkPasswordFile(t, dir); got == password {
		t.Errorf("password file recreated with the lost password")
	}
	checkTCPNeedsPassword(t, c)
	if _, err := tcpQuery(c.Port(), password, "select 1"); err == nil {
		t.Errorf("the previous password still opens a session")
	}
	rows, err = query(c, "select v from kept")
	if err != nil || len(rows) != 1 || rows[0][0] != "from the trust era" {
		t.Errorf("select from kept = %q, %v; want [[from the trust era]]", rows, err)
	}
	if logs := logs.String(); strings.Contains(logs, password) {
		t.Errorf("log = %q, want it without the password", logs)
	}
}

// TestLongPathCluster: without room for a Unix socket, a new cluster gets
// its password from initdb, while an old trust cluster keeps working,
// trusted, with a warning that says how to fix it.
func TestLongPathCluster(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)
	long := strings.Repeat("x", 70)

	t.Run("new", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(testDir(t), long)
		c, _ := start(t, Options{Dir: dir, BinDir: bin, Fast: true})
		if _, err := os.Stat(filepath.Join(dir, "run", ".s.PGSQL."+strconv.Itoa(c.Port()))); err == nil {
			t.Fatalf("a Unix socket exists; want the path too long for one")
		}
		checkPasswordFile(t, dir)
		checkTCPNeedsPassword(t, c)
		running, err := RunningURL(dir, "postgres")
		if err != nil || running != c.URL("postgres") {
			t.Errorf("RunningURL = %q, %v; want %q", running, err, c.URL("postgres"))
		}
	})

	t.Run("trust", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(testDir(t), long)
		createTrustCluster(t, bin, dir)
		logger, logs := newLogger()
		c, _ := start(t, Options{Dir: dir, BinDir: bin, Fast: true, Logger: logger})
		rows, err := tcpQuery(c.Port(), "", "select v from kept")
		if err != nil || len(rows) != 1 || rows[0][0] != "from the trust era" {
			t.Errorf("select from kept over TCP without a password = %q, %v; want [[from the trust era]]", rows, err)
		}
		want := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port())
		if got := c.URL("postgres"); got != want {
			t.Errorf("URL = %q, want %q", got, want)
		}
		if got, err := RunningURL(dir, "postgres"); err != nil || got != want {
			t.Errorf("RunningURL = %q, %v; want %q", got, err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, passwordFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("password file: err = %v, want none for a password that could not be set", err)
		}
		for _, want := range []string{"still trusts every local TCP connection", "at most 88 characters"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log = %q, want a warning containing %q", logs, want)
			}
		}
	})
}
