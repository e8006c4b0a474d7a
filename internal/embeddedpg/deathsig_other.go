//go:build !linux

package embeddedpg

import "syscall"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal: a server orphaned by a kill -9 of relais keeps running, and the
// next start stops it (see Start) before starting its own.
func setParentDeathSignal(*syscall.SysProcAttr) {}
