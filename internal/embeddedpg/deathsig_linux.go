package embeddedpg

import "syscall"

// setParentDeathSignal has the kernel send parentDeathSignal to the child
// when the thread that started it dies.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = parentDeathSignal }
