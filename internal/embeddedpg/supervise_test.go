package embeddedpg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSupervisorRestartsAndGivesUp: a server killed with SIGKILL is
// started again on the same port; when restarts keep failing,
// the Supervisor gives up after its bound and says why.
func TestSupervisorRestartsAndGivesUp(t *testing.T) {
	t.Parallel()
	bin := testBinDir(t)
	logger, logs := newLogger()
	opts := Options{Dir: testDir(t), BinDir: bin, Fast: true, Logger: logger}
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := Supervise(c, opts, RestartPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond, MaxFailures: 3, MaxDown: time.Minute})
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), testStopTimeout)
		defer cancel()
		_ = s.Stop(sctx)
	})

	if err := syscall.Kill(c.proc.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := queryAt(filepath.Join(opts.Dir, "run"), s.Port(), "select 1")
		if err == nil && len(rows) == 1 && rows[0][0] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server on port %d 30s after the kill: %v\n%s", s.Port(), err, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The server may answer a moment before Start returns and the
	// restart is logged.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "server restarted"); {
		if time.Now().After(deadline) {
			t.Fatalf("the restart was not logged:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A data directory that no longer starts: every restart fails.
	s.mu.Lock()
	pid := s.cur.proc.pid
	s.mu.Unlock()
	if err := os.WriteFile(filepath.Join(opts.Dir, "data", "PG_VERSION"), []byte("9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.Failed():
		if !strings.Contains(err.Error(), "3 restarts") || !strings.Contains(err.Error(), "PostgreSQL 10 or later") {
			t.Errorf("gave up with %v; want the count of failed restarts and the last cause", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the Supervisor did not give up\n%s", logs)
	}
}
