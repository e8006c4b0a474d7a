package embeddedpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// parentDeathSignal is what the kernel sends initdb and postgres when the
// thread that started them dies, which (see startChild) means when relais
// dies. SIGINT asks the postmaster for a fast shutdown: sessions are ended
// and a checkpoint is written. SIGTERM (smart shutdown) would wait for
// every client, possibly forever, and SIGKILL would orphan the backends
// and leave crash recovery for the next start. It is a variable so the
// kill -9 test can also produce a truly orphaned server.
var parentDeathSignal = syscall.SIGINT

// runAs is the account initdb and postgres run under.
type runAs struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32            // primary and supplementary groups, for permission checks
	cred   *syscall.Credential // nil: run as the current user
}

// resolveRunAs picks the current user, or an unprivileged account when
// running as root because initdb and postgres refuse to run as root.
func resolveRunAs() (*runAs, error) {
	if os.Geteuid() != 0 {
		ra := &runAs{
			name: "uid " + strconv.Itoa(os.Geteuid()),
			uid:  uint32(os.Geteuid()),
			gid:  uint32(os.Getegid()),
		}
		if u, err := user.Current(); err == nil {
			ra.name = u.Username
		}
		ra.groups = append(ra.groups, ra.gid)
		if gs, err := os.Getgroups(); err == nil {
			for _, g := range gs {
				ra.groups = append(ra.groups, uint32(g))
			}
		}
		return ra, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		ra := &runAs{name: name, uid: uint32(uid), gid: uint32(gid), groups: []uint32{uint32(gid)}}
		var supplementary []uint32
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil {
					supplementary = append(supplementary, uint32(g))
				}
			}
		}
		ra.groups = append(ra.groups, supplementary...)
		// Groups must be set explicitly: otherwise the child keeps root's
		// supplementary groups.
		ra.cred = &syscall.Credential{Uid: ra.uid, Gid: ra.gid, Groups: supplementary}
		if ra.cred.Groups == nil {
			ra.cred.Groups = []uint32{}
		}
		return ra, nil
	}
	return nil, errors.New("embeddedpg: running as root, but neither user postgres nor nobody exists to run the PostgreSQL server, which refuses to run as root; create a postgres user or run relais as a regular user")
}

// chown hands a folder the package created to the run-as user; a no-op
// when running as self.
func (ra *runAs) chown(path string) error {
	if ra.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(ra.uid), int(ra.gid)); err != nil {
		return fmt.Errorf("embeddedpg: hand %s to user %s: %w", path, ra.name, err)
	}
	return nil
}

func (ra *runAs) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{
		// A process group of its own keeps a terminal Ctrl-C away from
		// the server: relais stops it in order, after draining its work.
		Setpgid:    true,
		Credential: ra.cred,
	}
	setParentDeathSignal(a)
	return a
}

// childEnv is the environment for initdb and postgres. PG* variables in
// relais's environment describe relais's own connections (PGPORT would
// even become the server's default port), not the private server.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// child is a started process whose exit is observable through done.
type child struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
	err  error // result of cmd.Wait; read only after done is closed
}

// startChild starts cmd from a goroutine locked to its OS thread until
// the process has exited. The kernel delivers the parent-death signal when
// the thread that forked the child exits, not the process; Go may retire
// a thread when a locked goroutine ends, so starting from an arbitrary
// goroutine would make the signal fire at a random time. Holding the
// thread until the child exits makes it fire only when relais itself dies.
func startChild(cmd *exec.Cmd) (*child, error) {
	c := &child{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		c.pid = cmd.Process.Pid
		started <- nil
		c.err = cmd.Wait()
		// Unlocking (rather than exiting locked) keeps the thread alive
		// for reuse; the child is gone, so its death no longer matters.
		runtime.UnlockOSThread()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// exited reports whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// forceStop ends a server that did not shut down in time: SIGQUIT
// (immediate shutdown, the postmaster still takes its backends down), and
// after grace SIGKILL to the whole process group so no backend survives
// to block the next start on its shared memory.
func (c *child) forceStop(grace time.Duration) {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return
	case <-t.C:
	}
	if !c.exited() {
		// The postmaster leads its group (Setpgid) and is not yet reaped,
		// so the group id cannot have been reused.
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	}
	<-c.done
}

// clearStale makes the data directory startable after relais died
// without stopping its server. A postmaster that still runs on this data
// directory is stopped rather than adopted: its lifetime is not ours to
// manage (no exit notification, no parent-death signal). A pid file whose
// PID is dead or belongs to an unrelated process is removed, because
// postgres refuses to start while that PID is alive.
func clearStale(ctx context.Context, dataDir, runDir string, logger *slog.Logger) error {
	pidPath := filepath.Join(dataDir, "postmaster.pid")
	if pid, ok := readPidFile(pidPath); ok && pid != os.Getpid() && processAlive(pid) {
		switch postgresFor(pid, dataDir) {
		case isOurs:
			logger.Warn("embedded postgres: stopping a server left running by an earlier process", "pid", pid, "data", dataDir)
			if err := stopLeftover(ctx, pid); err != nil {
				return err
			}
		case unknown:
			// Removing the pid file of a live server would let a second
			// postmaster start on the same data directory.
			return fmt.Errorf("embeddedpg: process %d, named in %s, is alive and cannot be identified: if it is a PostgreSQL server of this data directory, stop it (kill -INT %d); otherwise remove that file", pid, pidPath, pid)
		}
	}
	// Backends of a postmaster that was killed outright keep the shared
	// memory attached; removing the pid file would hide them from
	// postgres's own interlock, so they are found by working folder.
	if pids := postgresProcessesIn(dataDir); len(pids) > 0 {
		logger.Warn("embedded postgres: ending leftover server processes", "pids", pids, "data", dataDir)
		if err := killLeftovers(ctx, pids); err != nil {
			return err
		}
	}
	if err := os.Remove(pidPath); err == nil {
		logger.Info("embedded postgres: removed stale postmaster.pid", "data", dataDir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("embeddedpg: remove stale pid file: %w", err)
	}
	sockets, _ := filepath.Glob(filepath.Join(runDir, ".s.PGSQL.*"))
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("embeddedpg: remove stale socket file: %w", err)
		}
	}
	return nil
}

// identity is what can be told of a live process named in a pid file.
type identity int

const (
	notOurs identity = iota // another program, which reused the PID
	isOurs                  // postgres working on the data directory
	unknown                 // nothing tells (no way to read its command line)
)

// readPidFile returns the PID on the first line of postmaster.pid.
func readPidFile(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// processAlive treats zombies as dead: an orphaned postmaster whose new
// parent does not reap it stays a zombie forever, holding nothing.
func processAlive(pid int) bool {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// The state follows the command name, which is in parentheses
		// and may itself contain spaces or parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			state := b[i+2]
			return state != 'Z' && state != 'X'
		}
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// stopLeftover shuts down a postmaster we did not start: fast shutdown
// first, as Stop does, then harder signals if it takes too long.
func stopLeftover(ctx context.Context, pid int) error {
	steps := []struct {
		sig   syscall.Signal
		group bool
		wait  time.Duration
	}{
		{syscall.SIGINT, false, 10 * time.Second},
		{syscall.SIGQUIT, false, 5 * time.Second},
		{syscall.SIGKILL, true, 5 * time.Second},
	}
	for _, s := range steps {
		target := pid
		// Only a process leading its own group (as ours do) may be
		// killed as a group; otherwise the group is someone else's.
		if s.group && processGroup(pid) == pid {
			target = -pid
		}
		if err := syscall.Kill(target, s.sig); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return fmt.Errorf("embeddedpg: stop leftover postgres (pid %d): %w", pid, err)
		}
		if waitGone(ctx, []int{pid}, s.wait) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("embeddedpg: stop leftover postgres (pid %d): %w", pid, context.Cause(ctx))
		}
	}
	return fmt.Errorf("embeddedpg: leftover postgres (pid %d) survived SIGKILL", pid)
}

// killLeftovers ends backends that outlived their postmaster. They have no
// state worth saving (the postmaster that would write it is gone), so
// SIGQUIT, the postmaster's own crash signal, is the gentlest useful one.
func killLeftovers(ctx context.Context, pids []int) error {
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL} {
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
		if waitGone(ctx, pids, 5*time.Second) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("embeddedpg: end leftover postgres processes %v: %w", pids, context.Cause(ctx))
		}
	}
	return fmt.Errorf("embeddedpg: leftover postgres processes %v survived SIGKILL", pids)
}

// waitGone polls until every pid is dead, the timeout passes or ctx ends.
func waitGone(ctx context.Context, pids []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		alive := false
		for _, pid := range pids {
			if processAlive(pid) {
				alive = true
				break
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// processGroup returns the process group of pid, or 0 when unknown.
func processGroup(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	// After the name: state, ppid, pgrp.
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 3 {
		return 0
	}
	pgrp, _ := strconv.Atoi(fields[2])
	return pgrp
}
