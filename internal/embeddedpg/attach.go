package embeddedpg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrInUse is wrapped by Start when another process (typically a running
// relais serve) holds the cluster folder.
var ErrInUse = errors.New("in use by another running cluster")

// RunningURL returns the URL of the cluster that another process runs in
// dir, so that administration commands (relais migrate, relais token create)
// can reach the database of a running relais serve instead of starting a
// second server on the same files. The URL carries the password kept in
// dir, which only the user running that relais (or root) can read: never
// log it whole.
func RunningURL(dir, database string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("embeddedpg: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(abs, "data", "postmaster.pid"))
	if err != nil {
		return "", fmt.Errorf("embeddedpg: no running cluster in %s: %w", abs, err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
		return "", fmt.Errorf("embeddedpg: the cluster in %s is not ready", abs)
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, err2 := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err1 != nil || err2 != nil || !processAlive(pid) {
		return "", fmt.Errorf("embeddedpg: no running cluster in %s", abs)
	}
	// No password file: a cluster that still trusts TCP (see hostTrust).
	password, err := readPassword(abs)
	if err != nil {
		return "", err
	}
	return clusterURL(port, password, database), nil
}

// UntraversableParent returns the first folder on the way to path that the
// user who runs the cluster cannot traverse, or "" when every existing one
// can be traversed (folders that do not exist yet are created traversable).
func UntraversableParent(path string) string {
	ra, err := resolveRunAs()
	if err != nil {
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	for _, p := range ancestors(abs) {
		if _, err := os.Stat(p); err != nil {
			break
		}
		if checkTraversable(p, ra) != nil {
			return p
		}
	}
	return ""
}
