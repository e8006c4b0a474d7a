package relaistest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireNode skips a test that needs Node.js and npm when the machine
// lacks them, saying what it would have run, except under CI=true, where
// it fails: CI must run every such test.
func RequireNode(t testing.TB, what string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; CI=true runs %s, which needs Node.js 20 and npm", tool, what)
			}
			t.Skipf("%s is not installed: skipping %s (install Node.js 20 and npm to run it)", tool, what)
		}
	}
}

// Script is a script (Node.js, Python) running, its standard output's lines
// collected as they come, each line that is a JSON object also as an event.
type Script struct {
	// Cmd is the process (to signal it).
	Cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	events []map[string]any
	stderr strings.Builder // under mu: exec writes it from its own goroutine
	exited chan error
}

type scriptStderr struct{ s *Script }

func (w scriptStderr) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.stderr.Write(p)
}

// RequirePython skips a test that needs python3 when the machine lacks it,
// except under CI=true, where it fails.
func RequirePython(t testing.TB, what string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 is not installed; CI=true runs %s, which needs Python 3.8 or later", what)
		}
		t.Skipf("python3 is not installed: skipping %s", what)
	}
}

// StartNode runs `node script` in dir with env added to this process's
// environment. The process is killed when the test ends, whatever
// happened.
func StartNode(t testing.TB, dir, script string, env ...string) *Script {
	t.Helper()
	return StartScript(t, dir, "node", script, env...)
}

// StartScript runs `interpreter script` in dir with env added to this
// process's environment, as StartNode does.
func StartScript(t testing.TB, dir, interpreter, script string, env ...string) *Script {
	t.Helper()
	s := &Script{Cmd: exec.Command(interpreter, script), exited: make(chan error, 1)}
	s.Cmd.Dir = dir
	s.Cmd.Env = append(os.Environ(), env...)
	s.Cmd.Stderr = scriptStderr{s}
	stdout, err := s.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				s.events = append(s.events, ev)
			}
			s.mu.Unlock()
		}
	}()
	go func() {
		<-read // Wait closes the pipe: every line is read first
		s.exited <- s.Cmd.Wait()
	}()
	t.Cleanup(func() { _ = s.Cmd.Process.Kill() })
	return s
}

// Events returns the events logged so far, or only those whose "event"
// member is one of names.
func (s *Script) Events(names ...string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, ev := range s.events {
		if name, _ := ev["event"].(string); len(names) == 0 || slices.Contains(names, name) {
			out = append(out, ev)
		}
	}
	return out
}

// Output is everything the script wrote so far, for a failure message.
func (s *Script) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "stdout:\n" + strings.Join(s.lines, "\n") + "\nstderr:\n" + s.stderr.String()
}

// Exited delivers the script's exit once: nil for status 0. Wait reads
// the same channel: use one or the other.
func (s *Script) Exited() <-chan error { return s.exited }

// Wait fails the test unless the script exits 0 within d.
func (s *Script) Wait(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("the script failed: %v\n%s", err, s.Output())
		}
	case <-time.After(d):
		_ = s.Cmd.Process.Kill()
		t.Fatalf("the script did not finish within %v\n%s", d, s.Output())
	}
}
