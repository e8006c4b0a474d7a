package embeddedpg

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// postgresFor tells whether pid is a postgres process working on dataDir.
// The postmaster and its backends run with the data directory as their
// working folder; the command line is the fallback when /proc/PID/cwd is
// not readable.
func postgresFor(pid int, dataDir string) identity {
	proc := "/proc/" + strconv.Itoa(pid)
	comm, _ := os.ReadFile(proc + "/comm")
	cmdline, _ := os.ReadFile(proc + "/cmdline")
	name := strings.TrimSpace(string(comm))
	if name != "postgres" && name != "postmaster" && !bytes.Contains(cmdline, []byte("postgres")) {
		return notOurs
	}
	if sameDir(proc+"/cwd", dataDir) {
		return isOurs
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == dataDir {
			return isOurs
		}
	}
	return notOurs
}

func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}

// postgresProcessesIn lists live postgres processes whose working folder
// is dataDir. It checks the command name first, so an administrator's
// shell that happens to sit in the data directory is never touched.
func postgresProcessesIn(dataDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want, err := os.Stat(dataDir)
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		proc := "/proc/" + e.Name()
		comm, err := os.ReadFile(proc + "/comm")
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(comm)); name != "postgres" && name != "postmaster" {
			continue
		}
		fi, err := os.Stat(proc + "/cwd")
		if err != nil || !os.SameFile(fi, want) || !processAlive(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
