//go:build linux

package faultsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/relaistest"
)

// buildRelais builds cmd/relais into dir without the race detector: the
// replicas are what the faults hit, and under -race they would run several
// times slower on a small machine without telling more (the SDK workers,
// the destination and the checks run in the test process, with -race when
// the suite has it).
func buildRelais(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		// go test sets GOROOT for the tests it runs.
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out := filepath.Join(dir, "relais")
	began := time.Now()
	cmd := exec.Command(goBin, "build", "-o", out, "./cmd/relais")
	cmd.Dir = relaistest.Root()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/relais: %v\n%s", err, b)
	}
	t.Logf("built relais in %v", time.Since(began).Round(time.Millisecond))
	return out
}

// freePort asks the kernel for a port nobody listens on; a replica keeps
// its port across restarts so that its workers find it again.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// replica is one `relais serve` child process, restartable on its port.
type replica struct {
	name    string
	bin     string
	env     []string
	base    string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func newReplica(name, bin, logPath string, port int, env ...string) *replica {
	return &replica{name: name, bin: bin, logPath: logPath, base: fmt.Sprintf("http://127.0.0.1:%d", port),
		env: append([]string{fmt.Sprintf("RELAIS_LISTEN=127.0.0.1:%d", port)}, env...)}
}

// start runs the process and waits until /readyz answers 200.
func (r *replica) start(ctx context.Context) error {
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(r.bin, "serve")
	// Without a URL of its own, a replica runs the embedded cluster,
	// whatever the test's environment says.
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "RELAIS_DATABASE_URL=") }), r.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should the test process die, the replica shuts down (and stops the
	// cluster it runs) rather than outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready; log tail:\n%s", r.name, tail(r.logPath, 30))
		default:
		}
		if status, _, err := get(ctx, r.base+"/readyz"); err == nil && status == 200 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready within 90 s; log tail:\n%s", r.name, tail(r.logPath, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig and, unless sig is nil, waits up to within for the
// exit; past it the process is killed.
func (r *replica) stop(sig syscall.Signal, within time.Duration) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill9 kills the replica outright: no drain, no goodbye.
func (r *replica) kill9() { r.stop(syscall.SIGKILL, 10*time.Second) }

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// logSize is the size of a log file, to read what was logged since.
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince returns what was appended to path past offset.
func logSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

var client = &http.Client{Timeout: 30 * time.Second}

func get(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// call sends a JSON request with token and decodes a JSON answer into out
// (when not nil); a status other than want is an error.
func call(ctx context.Context, method, url, token string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// pgCtl runs pg_ctl on the cluster's data directory as the account the
// cluster runs under (PostgreSQL refuses root), as an operator would.
func pgCtl(ctx context.Context, dataDir string, args ...string) (string, error) {
	binDir, err := embeddedpg.FindBinDir(os.Getenv("RELAIS_PG_BIN"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_ctl"), append([]string{"-D", dataDir}, args...)...)
	if os.Geteuid() == 0 {
		cred, err := clusterAccount(dataDir)
		if err != nil {
			return "", err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// clusterAccount is the owner of the data directory: embeddedpg runs the
// server as that account.
func clusterAccount(dataDir string) (*syscall.Credential, error) {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("no owner for " + dataDir)
	}
	u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
	if err != nil {
		return nil, err
	}
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: st.Uid, Gid: uint32(gid), Groups: []uint32{}}, nil
}

// postmasterPID reads the postmaster's process id from its pid file.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// pid is the process id of the running replica (0 when none runs).
func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// lockedFile is an append-only log file safe for concurrent writers.
type lockedFile struct {
	path string
	mu   sync.Mutex
}

func (f *lockedFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.OpenFile(f.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	return fh.Write(p)
}
