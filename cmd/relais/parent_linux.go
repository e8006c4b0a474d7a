package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// stopWithGoRun ties relais's life to `go run` when that is what started
// it: `go run` does not forward a kill -9 of itself to its child, and an
// orphaned relais would keep the port and the embedded cluster, so the next
// `go run ./cmd/relais serve` could not start. With the parent-death signal
// the orphan gets SIGTERM and shuts down gracefully. A relais started any
// other way is left alone.
func stopWithGoRun() {
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return
	}
	const prSetPdeathsig = 1
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return
	}
	// The parent may have died before the signal was armed.
	if os.Getppid() != ppid {
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
