package embeddedpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxLogSize bounds postgres.log: past it, Start moves the file to
// postgres.log.old, so a long-lived installation keeps two generations.
const maxLogSize = 16 << 20

// prepareDir creates the cluster folder and any missing parents. Parents
// that already exist are only checked: the run-as user must be able to
// traverse them, and silently loosening permissions of folders such as
// /root is not this package's call. Parents it creates itself are made
// traversable (0755) whatever the umask.
func prepareDir(dir string, ra *runAs) error {
	existing := dir
	var missing []string
	for {
		fi, err := os.Stat(existing)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("embeddedpg: cluster folder: %s is not a folder", existing)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("embeddedpg: cluster folder: %w", err)
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return fmt.Errorf("embeddedpg: cluster folder: %w", err)
		}
		missing = append(missing, existing)
		existing = parent
	}
	if err := checkTraversable(existing, ra); err != nil {
		if existing == dir {
			// Another user's cluster: say whose, which is what to fix.
			if oerr := checkOwner(dir, ra); oerr != nil {
				return oerr
			}
		}
		return err
	}
	for _, p := range slices.Backward(missing) {
		mode := os.FileMode(0o755)
		if p == dir {
			// The cluster folder holds the password, the trusted Unix
			// socket and the data: nobody else has business inside.
			mode = 0o700
		}
		if err := os.Mkdir(p, mode); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return fmt.Errorf("embeddedpg: create cluster folder: %w", err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("embeddedpg: create cluster folder: %w", err)
		}
		if p == dir {
			if err := ra.chown(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOwner explains a cluster folder another user owns (not root), which
// the run-as user cannot enter: made by a relais run as root, it belongs
// to the account its server ran as, and loosening its mode is not the fix.
func checkOwner(dir string, ra *runAs) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("embeddedpg: cluster folder: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == ra.uid || st.Uid == 0 {
		// Root's folder (a volume mounted for the cluster) is the
		// traversal's business.
		return nil
	}
	owner := "uid " + strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(st.Uid), 10)); err == nil {
		owner = u.Username + " (" + owner + ")"
	}
	return fmt.Errorf("embeddedpg: cluster folder %s belongs to %s, but its server would run as %s (uid %d); "+
		"a relais run as root runs the server as postgres (else nobody): run relais the way that made the cluster (as root, or as its owner), or chown -R the folder to %s",
		dir, owner, ra.name, ra.uid, ra.name)
}

// checkTraversable verifies that ra can reach path: every folder on the
// way, both as written and after resolving symlinks, needs search
// permission for that user. It reads mode bits only; an ACL that grants
// access is not seen.
func checkTraversable(path string, ra *runAs) error {
	if ra.uid == 0 {
		return nil
	}
	paths := ancestors(path)
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		paths = append(paths, ancestors(real)...)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("embeddedpg: cluster folder: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		perm := fi.Mode().Perm()
		var bit os.FileMode = 0o001
		switch {
		case st.Uid == ra.uid:
			bit = 0o100
		case slices.Contains(ra.groups, st.Gid):
			bit = 0o010
		}
		if perm&bit == 0 {
			return fmt.Errorf("embeddedpg: folder %s (mode %04o, owner uid %d) is not traversable by user %s (uid %d), which runs the PostgreSQL server; "+
				"use a cluster folder whose parents all allow traversal, e.g. under /var/tmp or /tmp (like /var/tmp/relais/pg), "+
				"or grant traversal yourself (chmod o+x %s)",
				p, perm, st.Uid, ra.name, ra.uid, p)
		}
	}
	return nil
}

// ancestors returns path and all its parents, root first.
func ancestors(path string) []string {
	var out []string
	for p := path; ; p = filepath.Dir(p) {
		out = append(out, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	slices.Reverse(out)
	return out
}

// ensureSubdir creates a folder the package owns inside the cluster
// folder, owned by the run-as user with mode 0700.
func ensureSubdir(path string, ra *runAs) error {
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("embeddedpg: create %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("embeddedpg: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("embeddedpg: %s is not a folder", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && ra.cred != nil && st.Uid != ra.uid {
		if err := ra.chown(path); err != nil {
			return err
		}
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(path, 0o700); err != nil {
			return fmt.Errorf("embeddedpg: %w", err)
		}
	}
	return nil
}

// lockWait bounds how long lockDir retries a lock that looks held. The
// kernel keeps a flock while any descriptor of the open file exists, and a
// process forked by any goroutine of this program holds a copy of every
// descriptor until its exec closes the close-on-exec ones: a lock just
// released by Stop can look held for that instant. A real holder (another
// running relais) holds it far longer than this.
const lockWait = 500 * time.Millisecond

// lockDir takes an exclusive lock on the cluster folder for as long as the
// returned file stays open. Two servers on one data directory would be
// refused by postgres anyway, but a second Start would first have deleted
// the first one's initdb folder or pid file. The kernel drops the lock
// when the process dies, so a kill -9 never leaves the folder locked, and
// the descriptor is close-on-exec, so postgres does not inherit it.
func lockDir(ctx context.Context, dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embeddedpg: lock cluster folder: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("embeddedpg: lock cluster folder: %w", err)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, fmt.Errorf("embeddedpg: cluster folder %s: %w", dir, ErrInUse)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ensureCluster runs initdb when the data directory holds no cluster,
// giving the postgres role password. It builds the cluster in
// data.init-PID and renames it into place only once complete, so an
// interrupted initdb never leaves a folder that later passes for a valid
// cluster. It reports whether a cluster was created.
func ensureCluster(ctx context.Context, cfg *config, password string) (bool, error) {
	leftovers, _ := filepath.Glob(filepath.Join(cfg.dir, "data.init-*"))
	for _, l := range leftovers {
		cfg.logger.Info("embedded postgres: removing unfinished initdb folder", "path", l)
		if err := os.RemoveAll(l); err != nil {
			return false, fmt.Errorf("embeddedpg: remove unfinished initdb folder: %w", err)
		}
	}
	pwLeftovers, _ := filepath.Glob(filepath.Join(cfg.dir, initdbPasswordPrefix+"*"))
	for _, l := range pwLeftovers {
		if err := os.Remove(l); err != nil {
			return false, fmt.Errorf("embeddedpg: remove the password file of an unfinished initdb: %w", err)
		}
	}
	_, err := os.Stat(filepath.Join(cfg.dataDir, "PG_VERSION"))
	if err == nil {
		return false, checkDataDir(cfg.dataDir, cfg.ra)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("embeddedpg: data directory: %w", err)
	}
	if entries, err := os.ReadDir(cfg.dataDir); err == nil {
		if len(entries) > 0 {
			return false, fmt.Errorf("embeddedpg: %s is not empty but holds no PostgreSQL cluster (no PG_VERSION); move it away so a new cluster can be created", cfg.dataDir)
		}
		if err := os.Remove(cfg.dataDir); err != nil {
			return false, fmt.Errorf("embeddedpg: remove empty data directory: %w", err)
		}
	}

	began := time.Now()
	// Recorded before the cluster exists, so that the file never lacks
	// the password of a cluster; a failed initdb leaves it for the next.
	if err := writePassword(cfg.dir, password); err != nil {
		return false, err
	}
	pwfile, err := writeInitdbPassword(cfg.dir, password, cfg.ra)
	if err != nil {
		return false, err
	}
	defer os.Remove(pwfile)
	tmp := filepath.Join(cfg.dir, fmt.Sprintf("data.init-%d", os.Getpid()))
	// Created here rather than by initdb so that the cluster folder itself
	// need not be writable by the run-as user.
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return false, fmt.Errorf("embeddedpg: initdb: %w", err)
	}
	if err := cfg.ra.chown(tmp); err != nil {
		os.RemoveAll(tmp)
		return false, err
	}
	var out bytes.Buffer
	// Start rewrites pg_hba.conf anyway; a scram host method also makes
	// initdb before PostgreSQL 14 store the password as SCRAM, not MD5.
	cmd := exec.Command(filepath.Join(cfg.binDir, "initdb"),
		"-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile="+pwfile,
		"-E", "UTF8", "--locale=C", "--no-sync", "-D", tmp)
	cmd.Dir = cfg.dir
	cmd.Env = childEnv()
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = cfg.ra.sysProcAttr()
	proc, err := startChild(cmd)
	if err != nil {
		os.RemoveAll(tmp)
		return false, fmt.Errorf("embeddedpg: initdb: %w", err)
	}
	select {
	case <-proc.done:
	case <-ctx.Done():
		_ = proc.cmd.Process.Kill()
		<-proc.done
		os.RemoveAll(tmp)
		return false, fmt.Errorf("embeddedpg: initdb: %w", context.Cause(ctx))
	}
	appendLog(cfg.logPath, "initdb", out.Bytes())
	if proc.err != nil {
		os.RemoveAll(tmp)
		return false, fmt.Errorf("embeddedpg: initdb: %w\n%s", proc.err, strings.TrimSpace(out.String()))
	}
	if !cfg.fast {
		// initdb --no-sync skips fsync to save a second; a server that is
		// meant to keep data must not lose its catalog to a power cut
		// right after the rename below makes the cluster look valid.
		if err := syncTree(tmp); err != nil {
			os.RemoveAll(tmp)
			return false, fmt.Errorf("embeddedpg: initdb: sync: %w", err)
		}
		// initdb's own warning above reads as a corruption risk to whoever
		// opens this log in an incident (soak QA): said mended.
		appendLog(cfg.logPath, "initdb", []byte(syncedAfterInitdb+"\n"))
	}
	if err := os.Rename(tmp, cfg.dataDir); err != nil {
		os.RemoveAll(tmp)
		return false, fmt.Errorf("embeddedpg: initdb: %w", err)
	}
	if !cfg.fast {
		if err := syncPath(cfg.dir); err != nil {
			return false, fmt.Errorf("embeddedpg: initdb: sync: %w", err)
		}
	}
	cfg.logger.Info("embedded postgres: created new cluster", "data", cfg.dataDir, "duration", time.Since(began))
	return true, nil
}

// checkDataDir catches, with a message that says what to do, the data
// directory problems postgres would otherwise report tersely.
func checkDataDir(dataDir string, ra *runAs) error {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("embeddedpg: data directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Uid != ra.uid {
		return fmt.Errorf("embeddedpg: data directory %s is owned by uid %d, but the server runs as %s (uid %d); run relais as the user that created it, or chown -R the folder",
			dataDir, st.Uid, ra.name, ra.uid)
	}
	// postgres refuses a data directory with more than 0750.
	if fi.Mode().Perm()&0o027 != 0 {
		if err := os.Chmod(dataDir, 0o700); err != nil {
			return fmt.Errorf("embeddedpg: data directory: %w", err)
		}
	}
	return nil
}

func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		return syncPath(path)
	})
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// openLog opens postgres.log for appending and marks where this start
// begins, so that errors quote only this start's lines. It returns the
// file and the offset of the marker.
func openLog(path string, port int) (*os.File, int64, error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogSize {
		_ = os.Rename(path, path+".old")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("embeddedpg: open server log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("embeddedpg: open server log: %w", err)
	}
	fmt.Fprintf(f, "--- embeddedpg: starting postgres on port %d at %s ---\n", port, time.Now().Format(time.RFC3339))
	return f, fi.Size(), nil
}

// appendLog keeps the output of a helper program (initdb) next to the
// server's, for later diagnosis; failing to write it is not worth failing
// the start.
// syncedAfterInitdb follows initdb's output in the cluster's log once the
// new cluster was synced to disk.
const syncedAfterInitdb = "relais synced the new data directory to disk after initdb: the \"Sync to disk skipped\" above is answered, nothing is at risk"

func appendLog(path, what string, out []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "--- embeddedpg: %s at %s ---\n", what, time.Now().Format(time.RFC3339))
	f.Write(out)
}

// logTail returns the last n lines written to path since offset.
func logTail(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const maxRead = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > maxRead {
		offset = fi.Size() - maxRead
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// discardLogger is used when Options.Logger is nil.
var discardLogger = slog.New(slog.DiscardHandler)
