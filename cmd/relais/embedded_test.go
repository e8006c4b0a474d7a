package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

// relaisProcess is relais serve running as a child process (the test binary
// re-executed), so the test can interrupt it or kill -9 it.
type relaisProcess struct {
	cmd    *exec.Cmd
	base   string
	stderr *testlog.Buffer
}

func startProcess(t *testing.T, env ...string) *relaisProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(withoutDatabaseURL(os.Environ()), append([]string{"RELAIS_TEST_AS_RELAIS=1", "RELAIS_TEST_ARGS=serve", "RELAIS_LISTEN=127.0.0.1:0"}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &relaisProcess{cmd: cmd, stderr: &testlog.Buffer{}}
	cmd.Stderr = p.stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p.base = <-found:
	case <-time.After(60 * time.Second):
		t.Fatalf("relais did not listen within 60s; stderr:\n%s", p.stderr)
	}
	for {
		res, err := http.Get(p.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Since(began) > 60*time.Second {
			t.Fatalf("relais not ready within 60s; stderr:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("ready in %v", time.Since(began).Round(time.Millisecond))
	return p
}

// awaitLog waits up to 10 s for the process to log a line holding text.
func (p *relaisProcess) awaitLog(t *testing.T, text string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.stderr.String(), text); {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 10s; stderr:\n%s", text, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postgresRunningIn reports whether a postgres process works in dataDir.
func postgresRunningIn(t *testing.T, dataDir string) bool {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && strings.HasSuffix(args[0], "postgres") && strings.Contains(string(b), dataDir) {
			return true
		}
	}
	return false
}

func TestEmbeddedServeStartsStopsAndSurvivesKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts embedded clusters")
	}
	dir, err := os.MkdirTemp("/tmp", "relais-serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o711)
	t.Cleanup(func() { os.RemoveAll(dir) })
	dataDir := filepath.Join(dir, "relais-data")
	env := []string{"RELAIS_DATA_DIR=" + dataDir}
	pgData := filepath.Join(dataDir, "pg", "data")

	cold := startProcess(t, env...)
	if !strings.Contains(cold.stderr.String(), "created new cluster") {
		t.Errorf("first start did not create a cluster; stderr:\n%s", cold.stderr)
	}
	if err := cold.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cold.cmd.Wait(); err != nil {
		t.Fatalf("relais exited with %v after SIGINT; stderr:\n%s", err, cold.stderr)
	}
	if postgresRunningIn(t, pgData) {
		t.Fatal("the cluster still runs after relais stopped")
	}

	warm := startProcess(t, env...)
	if strings.Contains(warm.stderr.String(), "created new cluster") {
		t.Error("the second start created a new cluster instead of reusing it")
	}
	if err := warm.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = warm.cmd.Wait()

	after := startProcess(t, env...)
	res, err := http.Get(after.base + "/readyz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("not ready after kill -9 and restart: %v", err)
	}
	res.Body.Close()
	_ = after.cmd.Process.Signal(syscall.SIGTERM)
	if err := after.cmd.Wait(); err != nil {
		t.Fatalf("relais exited with %v after SIGTERM", err)
	}
	if postgresRunningIn(t, pgData) {
		t.Fatal("the cluster still runs after relais stopped")
	}

	// The generated key file opens every sealed value: one others may
	// read is said at start; one lost is never silently replaced (a new
	// key opens nothing the old one sealed).
	keyFile := filepath.Join(dataDir, "data-keys")
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	shared := startProcess(t, env...)
	shared.awaitLog(t, "the data key file may be read by others than its owner")
	_ = shared.cmd.Process.Signal(syscall.SIGTERM)
	_ = shared.cmd.Wait()
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	lost := exec.Command(os.Args[0], "-test.run=^$")
	lost.Env = append(os.Environ(), append([]string{"RELAIS_TEST_AS_RELAIS=1", "RELAIS_TEST_ARGS=serve", "RELAIS_LISTEN=127.0.0.1:0"}, env...)...)
	out, err := lost.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is missing, but this database recorded data key(s) k1: restore the file") {
		t.Errorf("serve without its key file: %v\n%s\nwant a refusal saying to restore it", err, out)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Errorf("serve without its key file wrote one (%v): it would look right and open nothing", err)
	}
	if postgresRunningIn(t, pgData) {
		t.Fatal("the cluster still runs after relais refused to start")
	}
}

func TestNoServerBinariesExplainsWhatToDo(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	err := run(t.Context(), []string{"serve"}, func(k string) string {
		return map[string]string{"RELAIS_PG_BIN": empty, "RELAIS_DATA_DIR": filepath.Join(empty, "d"), "RELAIS_LISTEN": "127.0.0.1:0"}[k]
	}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "RELAIS_DATABASE_URL") || !strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), "RELAIS_PG_BIN:") {
		t.Fatalf("err = %v; want one naming RELAIS_PG_BIN, the folder and RELAIS_DATABASE_URL", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "d")); !os.IsNotExist(err) {
		t.Errorf("a start without PostgreSQL binaries left its data directory behind (%v)", err)
	}
	// Given as a flag, the setting is named with it (evaluator QA: the
	// variable alone sent the operator through an environment untouched).
	err = run(t.Context(), []string{"serve", "--pg-bin", empty}, func(k string) string {
		return map[string]string{"RELAIS_DATA_DIR": filepath.Join(empty, "d"), "RELAIS_LISTEN": "127.0.0.1:0"}[k]
	}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "RELAIS_PG_BIN (flag --pg-bin): ") {
		t.Errorf("err = %v; want RELAIS_PG_BIN named with its flag", err)
	}
}

// A port in use, or TLS files that cannot be loaded, fail serve before
// anything else: no cluster is created and no bootstrap token is shown
// (once) for a server that never ran.
func TestServeThatCannotListenCreatesNothing(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"port in use", map[string]string{"RELAIS_LISTEN": taken.Addr().String()}, "RELAIS_LISTEN"},
		{"bad certificate", map[string]string{"RELAIS_LISTEN": "127.0.0.1:0", "RELAIS_TLS_CERT_FILE": junk, "RELAIS_TLS_KEY_FILE": junk}, "RELAIS_TLS_CERT_FILE"},
	} {
		dataDir := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		c.env["RELAIS_DATA_DIR"] = dataDir
		var out strings.Builder
		err := run(t.Context(), []string{"serve"}, func(k string) string { return c.env[k] }, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v; want one naming %s", c.name, err, c.want)
		}
		if strings.Contains(out.String(), "rls_") {
			t.Errorf("%s: a bootstrap token was shown for a server that never ran:\n%s", c.name, out.String())
		}
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Errorf("%s: the data folder was created (%v)", c.name, err)
		}
	}
	err = run(t.Context(), []string{"serve", "--listen", taken.Addr().String()}, func(k string) string {
		return map[string]string{"RELAIS_DATA_DIR": filepath.Join(dir, "flag")}[k]
	}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "RELAIS_LISTEN (flag --listen) "+taken.Addr().String()) {
		t.Errorf("port in use given by flag: err = %v; want RELAIS_LISTEN named with its flag", err)
	}
}

// TestEmbeddedServeRestartsAKilledCluster: when the embedded postmaster
// is killed (kill -9), relais keeps serving: /healthz stays 200, API
// requests answer 503 database_unavailable (never 500) until the cluster,
// restarted with backoff, is back, and then succeed again.
func TestEmbeddedServeRestartsAKilledCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts embedded clusters")
	}
	dir, err := os.MkdirTemp("/tmp", "relais-serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o711)
	t.Cleanup(func() { os.RemoveAll(dir) })
	dataDir := filepath.Join(dir, "relais-data")
	p := startProcess(t, "RELAIS_DATA_DIR="+dataDir, "RELAIS_BOOTSTRAP_TOKEN="+bootstrap)
	pgData := filepath.Join(dataDir, "pg", "data")
	pidFile, err := os.ReadFile(filepath.Join(pgData, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, "GET", p.base+"/api/v1/whoami", bootstrap, nil); res.status != 200 {
		t.Fatalf("whoami before the kill: %d %s", res.status, res.body)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	unavailable := 0
	for {
		res := call(t, "GET", p.base+"/api/v1/whoami", bootstrap, nil)
		// A connection to a backend that has not yet noticed its
		// postmaster's death may still answer: recovery is a 200 after
		// the outage was seen.
		if res.status == 200 && unavailable > 0 {
			break
		}
		if res.status == 200 {
			if time.Since(killed) > 20*time.Second {
				t.Fatalf("requests still succeed 20s after the kill; stderr:\n%s", p.stderr)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if res.status != 503 || res.json(t)["code"] != "database_unavailable" {
			t.Fatalf("whoami while the cluster is down: %d %s; want 503 database_unavailable", res.status, res.body)
		}
		unavailable++
		if h := call(t, "GET", p.base+"/healthz", "", nil); h.status != 200 {
			t.Fatalf("healthz while the cluster is down: %d", h.status)
		}
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("no recovery 60s after the kill; stderr:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("recovered %v after the kill, %d requests answered 503 meanwhile", time.Since(killed).Round(time.Millisecond), unavailable)
	// The server may accept a session a moment before Start returns and
	// the restart is logged.
	p.awaitLog(t, "server restarted")
	if res := call(t, "GET", p.base+"/readyz", "", nil); res.status != 200 {
		t.Errorf("readyz after recovery: %d %s", res.status, res.body)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("relais exited with %v after SIGTERM; stderr:\n%s", err, p.stderr)
	}
	if postgresRunningIn(t, pgData) {
		t.Fatal("the restarted cluster still runs after relais stopped")
	}
}

// SIGHUP, which operators send for a reload, does not end a replica (Go's
// default for it would, at once and without a drain): it says there is
// nothing to reload without a certificate, and the replica serves on.
func TestSIGHUPDoesNotStopTheReplica(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	p := startProcess(t, "RELAIS_DATABASE_URL="+url, "RELAIS_RETENSION=P3D", "RELAIS_RETENTION=P3D")
	// Beside: a misspelt setting is named at start (the setting it
	// misspells being set too, it is only ignored), and the replica's
	// connections are named in pg_stat_activity.
	// The text handler writes the message quoted, its quotes escaped.
	if !strings.Contains(p.stderr.String(), `RELAIS_RETENSION is not a Relais setting (did you mean \"RELAIS_RETENTION\"? it is set too)`) {
		t.Errorf("the misspelt RELAIS_RETENSION went unsaid; stderr:\n%s", p.stderr)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var named int
	if err := pool.QueryRow(context.Background(), "select count(*) from pg_stat_activity where application_name = 'relais ' || $1::text",
		fmt.Sprintf("%s-%d", hostname(t), p.cmd.Process.Pid)).Scan(&named); err != nil || named == 0 {
		t.Errorf("%d connections named after the replica in pg_stat_activity (%v)", named, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.awaitLog(t, "SIGHUP: nothing to reload")
	if res := call(t, "GET", p.base+"/readyz", "", nil); res.status != 200 {
		t.Fatalf("readyz after SIGHUP: %d %s", res.status, res.body)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("relais exited with %v after SIGTERM; stderr:\n%s", err, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "shutting down") {
		t.Errorf("SIGTERM after SIGHUP did not drain; stderr:\n%s", p.stderr)
	}
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestServeRefusesAMisspeltSetting: a variable that misspells a setting
// not set itself stops serve before anything is created: a misspelt
// RELAIS_DATABASE_URL would otherwise serve a new, empty embedded
// database with a new admin token.
func TestServeRefusesAMisspeltSetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RELAIS_TEST_AS_RELAIS=1", "RELAIS_TEST_ARGS=serve", "RELAIS_LISTEN=127.0.0.1:0",
		"RELAIS_DATA_DIR="+dir, "RELAIS_DATABASE_URI=postgres://db.example/relais")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `RELAIS_DATABASE_URI is not a Relais setting (did you mean "RELAIS_DATABASE_URL"?): correct or unset it`) {
		t.Fatalf("serve with RELAIS_DATABASE_URI: %v\n%s\nwant it refused, naming RELAIS_DATABASE_URL", err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused serve created %d entries in its data folder", len(entries))
	}
}

// TestServeRefusesAnEmptyDataDir: RELAIS_DATA_DIR set but empty (a
// variable a manifest failed to expand) stops serve before anything is
// created: it would otherwise serve a new, empty embedded database in
// ./relais-data with a new admin token.
func TestServeRefusesAnEmptyDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = append(withoutDatabaseURL(os.Environ()), "RELAIS_TEST_AS_RELAIS=1", "RELAIS_TEST_ARGS=serve", "RELAIS_LISTEN=127.0.0.1:0", "RELAIS_DATA_DIR=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "RELAIS_DATA_DIR is set but empty") {
		t.Fatalf("serve with RELAIS_DATA_DIR empty: %v\n%s\nwant it refused", err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused serve created %d entries in its working folder", len(entries))
	}
}

// withoutDatabaseURL is environ without RELAIS_DATABASE_URL: a child
// given no URL of its own runs the embedded cluster, whatever the test's
// environment says (set but empty, the variable is refused).
func withoutDatabaseURL(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, "RELAIS_DATABASE_URL=") })
}
