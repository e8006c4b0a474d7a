package relaistest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/embeddedpg"
)

// OwnCluster starts a PostgreSQL cluster of the test's own on a fixed
// port, so that the test may stop it and start it again (embeddedpg.Start
// with the options returned) where its pool looks for it, and opens a pool
// on its migrated postgres database. Stopping the cluster is the test's.
func OwnCluster(t *testing.T) (embeddedpg.Options, *embeddedpg.Cluster, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("/tmp", "relais-own-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := embeddedpg.Options{Dir: filepath.Join(dir, "pg"), Port: port, Fast: true, BinDir: os.Getenv("RELAIS_PG_BIN")}
	c, err := embeddedpg.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := engine.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return opts, c, pool
}

// Freeze stops (SIGSTOP) the PostgreSQL cluster of opts (OwnCluster's)
// and its processes: a server that hangs, as behind a network black hole.
// thaw lets them go on; calling it again does nothing (a test may thaw
// early and defer it too).
func Freeze(t *testing.T, opts embeddedpg.Options) (thaw func()) {
	t.Helper()
	pidFile := filepath.Join(opts.Dir, "data", "postmaster.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	postmaster, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	pids := []int{postmaster}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, not ")".
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(postmaster) {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		// A backend that exited since it was listed (a session closing)
		// has nothing left to freeze (CI: "no such process").
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil && (pid == postmaster || !errors.Is(err, syscall.ESRCH)) {
			t.Fatalf("freezing %d: %v", pid, err)
		}
	}
	return sync.OnceFunc(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
}
