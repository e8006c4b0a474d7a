package embeddedpg

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoServerBinaries is wrapped by the errors of FindBinDir (and Start)
// when no folder with the PostgreSQL server binaries initdb and postgres
// is found, so callers can tell "install PostgreSQL" apart from other
// failures.
var ErrNoServerBinaries = errors.New("embeddedpg: no PostgreSQL server binaries found")

// serverRoot is where Debian and Ubuntu install one bin folder per major
// version. It is a variable so tests can point it at an empty folder.
var serverRoot = "/usr/lib/postgresql"

// serverBinaries are the programs Start runs; a folder lacking either is useless.
var serverBinaries = []string{"initdb", "postgres"}

// FindBinDir returns the absolute path of the folder holding the
// PostgreSQL server binaries initdb and postgres. A non-empty explicit
// folder (for example from RELAIS_PG_BIN) is the only one considered.
// Otherwise it uses the folder of postgres found on PATH (when initdb sits
// beside it), and then the newest /usr/lib/postgresql/VERSION/bin holding
// both. pg_config is deliberately not consulted: on Debian its --bindir
// may name the client package, which has no server.
func FindBinDir(explicit string) (string, error) {
	if explicit != "" {
		abs, err := filepath.Abs(explicit)
		if err != nil {
			return "", fmt.Errorf("embeddedpg: PostgreSQL binary folder %q: %w", explicit, err)
		}
		if missing := missingBinaries(abs); len(missing) > 0 {
			return "", fmt.Errorf("%w: the PostgreSQL binary folder %s has no executable %s; point it at the folder holding initdb and postgres",
				ErrNoServerBinaries, abs, strings.Join(missing, " or "))
		}
		return abs, nil
	}
	if dir, ok := binDirFromPath(); ok {
		return dir, nil
	}
	if dir, ok := newestVersionedBinDir(serverRoot); ok {
		return dir, nil
	}
	return "", fmt.Errorf("%w (looked for initdb and postgres on PATH and in %s/*/bin): "+
		"install the PostgreSQL server package (e.g. apt-get install postgresql), "+
		"or set RELAIS_PG_BIN to the folder with initdb and postgres, "+
		"or set RELAIS_DATABASE_URL to use an existing server",
		ErrNoServerBinaries, serverRoot)
}

// missingBinaries lists the server programs that dir lacks or cannot execute.
func missingBinaries(dir string) []string {
	var missing []string
	for _, name := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	return missing
}

// binDirFromPath looks beside postgres and initdb on PATH, following
// symlinks too, because packagers often link only some programs into
// /usr/bin while the real folder holds both.
func binDirFromPath() (string, bool) {
	var candidates []string
	for _, name := range serverBinaries {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		candidates = append(candidates, filepath.Dir(p))
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	for _, dir := range candidates {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		if len(missingBinaries(abs)) == 0 {
			return abs, true
		}
	}
	return "", false
}

// newestVersionedBinDir picks root/VERSION/bin with the highest version,
// compared numerically so that 9.6 < 15 < 16.
func newestVersionedBinDir(root string) (string, bool) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", false
	}
	type versioned struct {
		dir     string
		version []int
	}
	var found []versioned
	for _, e := range entries {
		v, ok := parseVersion(e.Name())
		if !ok {
			continue
		}
		dir := filepath.Join(root, e.Name(), "bin")
		if len(missingBinaries(dir)) == 0 {
			found = append(found, versioned{dir, v})
		}
	}
	if len(found) == 0 {
		return "", false
	}
	best := slices.MaxFunc(found, func(a, b versioned) int { return slices.Compare(a.version, b.version) })
	return best.dir, true
}

// parseVersion turns "9.6" or "15" into its numeric parts.
func parseVersion(s string) ([]int, bool) {
	parts := strings.Split(s, ".")
	v := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}
