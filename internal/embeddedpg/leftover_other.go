//go:build !linux

package embeddedpg

import (
	"os/exec"
	"strconv"
)

// postgresFor tells whether pid is a postgres process working on dataDir,
// from its command line as ps shows it (there is no /proc here); the
// postmaster is started with -D and the data directory.
func postgresFor(pid int, dataDir string) identity {
	out, err := exec.Command("ps", "-ww", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		if !processAlive(pid) {
			return notOurs // it ended meanwhile
		}
		return unknown
	}
	return psIdentity(string(out), dataDir)
}

// postgresProcessesIn finds nothing without /proc: the backends of a
// postmaster that died exit on their own once they notice, and postgres's
// own interlock on the data directory covers the moment before.
func postgresProcessesIn(string) []int { return nil }
