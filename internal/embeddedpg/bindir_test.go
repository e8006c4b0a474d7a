package embeddedpg

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBinDir creates dir with executable stand-ins for the given programs.
func fakeBinDir(t *testing.T, dir string, names ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The FindBinDir tests change PATH and serverRoot, so they do not run in
// parallel; Go runs parallel tests only after all sequential ones.

func TestFindBinDirExplicit(t *testing.T) {
	tmp := t.TempDir()
	good := fakeBinDir(t, filepath.Join(tmp, "good"), "initdb", "postgres")
	got, err := FindBinDir(good)
	if err != nil || got != good {
		t.Errorf("FindBinDir(%q) = %q, %v; want %q, nil", good, got, err, good)
	}

	half := fakeBinDir(t, filepath.Join(tmp, "half"), "postgres")
	// A non-executable initdb does not count.
	if err := os.WriteFile(filepath.Join(half, "initdb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{half, filepath.Join(tmp, "missing")} {
		_, err := FindBinDir(bad)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("FindBinDir(%q) error = %v, want one naming the folder", bad, err)
		}
		if !errors.Is(err, ErrNoServerBinaries) {
			t.Errorf("FindBinDir(%q) error = %v, want it to wrap ErrNoServerBinaries", bad, err)
		}
	}
	if _, err := FindBinDir(half); err == nil || !strings.Contains(err.Error(), "initdb") || strings.Contains(err.Error(), "postgres or") {
		t.Errorf("FindBinDir(half) error = %v, want it to name only initdb as missing", err)
	}
}

func TestFindBinDirNothingFound(t *testing.T) {
	t.Setenv("PATH", "")
	old := serverRoot
	serverRoot = t.TempDir()
	t.Cleanup(func() { serverRoot = old })

	got, err := FindBinDir("")
	if !errors.Is(err, ErrNoServerBinaries) {
		t.Fatalf("FindBinDir(\"\") = %q, %v; want ErrNoServerBinaries", got, err)
	}
	for _, want := range []string{"apt-get install postgresql", "RELAIS_PG_BIN", "RELAIS_DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %q, want it to mention %q", err, want)
		}
	}
}

func TestFindBinDirNewestVersion(t *testing.T) {
	t.Setenv("PATH", "")
	root := t.TempDir()
	old := serverRoot
	serverRoot = root
	t.Cleanup(func() { serverRoot = old })

	fakeBinDir(t, filepath.Join(root, "9.6", "bin"), "initdb", "postgres")
	want := fakeBinDir(t, filepath.Join(root, "15", "bin"), "initdb", "postgres")
	fakeBinDir(t, filepath.Join(root, "16", "bin"), "postgres") // client-only leftovers
	fakeBinDir(t, filepath.Join(root, "latest", "bin"), "initdb", "postgres")
	got, err := FindBinDir("")
	if err != nil || got != want {
		t.Errorf("FindBinDir(\"\") = %q, %v; want %q", got, err, want)
	}
}

func TestFindBinDirPath(t *testing.T) {
	tmp := t.TempDir()
	// Only postgres is linked onto PATH; the real folder holds both.
	real := fakeBinDir(t, filepath.Join(tmp, "lib", "bin"), "initdb", "postgres")
	onPath := filepath.Join(tmp, "bin")
	if err := os.Mkdir(onPath, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "postgres"), filepath.Join(onPath, "postgres")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", onPath)
	old := serverRoot
	serverRoot = t.TempDir()
	t.Cleanup(func() { serverRoot = old })

	got, err := FindBinDir("")
	if err != nil || got != real {
		t.Errorf("FindBinDir(\"\") = %q, %v; want %q", got, err, real)
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"15", []int{15}, true},
		{"9.6", []int{9, 6}, true},
		{"latest", nil, false},
		{"15.x", nil, false},
	} {
		got, ok := parseVersion(tc.in)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("parseVersion(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
