package embeddedpg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A child forked by another goroutine holds a copy of the lock's
// descriptor until its exec: a lock released by Stop can look held for an
// instant, and Start right after must not call the folder in use.
func TestLockDirWaitsOutABriefCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := lockDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// What a forked child holds: another descriptor of the same open file
	// (close-on-exec, or the children of parallel tests would keep it).
	copyFd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, first.Fd(), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	first.Close()
	go func() {
		time.Sleep(100 * time.Millisecond)
		syscall.Close(int(copyFd))
	}()
	second, err := lockDir(context.Background(), dir)
	if err != nil {
		t.Fatalf("lockDir while a copy is closed 100ms later: %v", err)
	}
	second.Close()
}

func TestLockDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	held, err := lockDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	began := time.Now()
	_, err = lockDir(context.Background(), dir)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("lockDir on a held folder = %v, want ErrInUse", err)
	}
	if took := time.Since(began); took > 5*lockWait {
		t.Errorf("refusal took %v, want about %v", took, lockWait)
	}
	if _, err := os.Stat(filepath.Join(dir, "lock")); err != nil {
		t.Errorf("lock file: %v", err)
	}
}
