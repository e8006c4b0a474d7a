package embeddedpg

import "strings"

// psIdentity tells, from a process's command line as ps shows it (its
// arguments joined by spaces), whether it is a postgres server started on
// dataDir (-D dataDir).
func psIdentity(cmd, dataDir string) identity {
	cmd = strings.TrimRight(cmd, "\n")
	if !strings.Contains(cmd, "postgres") {
		return notOurs
	}
	// A data directory may hold spaces (Application Support): match the
	// argument in the whole line, not among space-separated words.
	if i := strings.Index(cmd, " -D "+dataDir); i >= 0 {
		if rest := cmd[i+len(" -D "+dataDir):]; rest == "" || rest[0] == ' ' {
			return isOurs
		}
	}
	// Another postgres: a server of another directory that took a reused
	// PID, or ours under a path ps shows otherwise. Removing the pid file
	// of the second would let two postmasters share the directory.
	return unknown
}
