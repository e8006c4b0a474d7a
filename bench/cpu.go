package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat CPU times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// cpuSample is CPU time used so far by this process and by the embedded
// PostgreSQL server (its postmaster and every child: backends, WAL
// writer, checkpointer).
type cpuSample struct {
	self     time.Duration
	postgres time.Duration
	// ok is false when the server's processes cannot be read (an external
	// server).
	ok bool
}

func (p *postgres) cpu() cpuSample {
	var s cpuSample
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if p.cluster == nil {
		return s
	}
	raw, err := os.ReadFile(filepath.Join(p.dir, "pg", "data", "postmaster.pid"))
	if err != nil {
		return s
	}
	postmaster, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		return s
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return s
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, used, ok := procCPU(pid)
		if !ok || (pid != postmaster && ppid != postmaster) {
			continue
		}
		s.postgres += used
		s.ok = true
	}
	return s
}

// procCPU reads a process's parent and the CPU time it used (user and
// system, and for a parent that of its reaped children).
func procCPU(pid int) (ppid int, used time.Duration, ok bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name may hold spaces: fields start after its ')'.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	var ticks int64
	for _, k := range f[11:15] {
		n, _ := strconv.ParseInt(k, 10, 64)
		ticks += n
	}
	return ppid, time.Duration(ticks) * clockTick, true
}
