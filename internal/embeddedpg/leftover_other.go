//go:build !linux

package embeddedpg

import (
	"os/exec"
	"strconv"
	"strings"
)

// postgresFor tells whether pid is a postgres process working on dataDir,
// from its command line as ps shows it (there is no /proc here); the
// postmaster is started with -D and the data directory.
func postgresFor(pid int, dataDir string) identity {
	out, err := exec.Command("ps", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return unknown
	}
	cmd := string(out)
	if strings.Contains(cmd, "postgres") && strings.Contains(cmd, "-D "+dataDir) {
		return isOurs
	}
	return notOurs
}

// postgresProcessesIn finds nothing without /proc: the backends of a
// postmaster that died exit on their own once they notice, and postgres's
// own interlock on the data directory covers the moment before.
func postgresProcessesIn(string) []int { return nil }
