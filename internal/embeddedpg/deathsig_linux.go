package embeddedpg

import "syscall"

func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = parentDeathSignal }
