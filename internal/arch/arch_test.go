package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleFollowsTheRules reads the module's package graph with go list
// and fails naming every forbidden import.
func TestModuleFollowsTheRules(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of the module; the check would prove nothing", len(pkgs))
	}
	for _, p := range Check(pkgs) {
		t.Error(p)
	}
	// The rules must be looking at the real packages, not at nothing.
	for _, want := range []string{"engine", "contracts", "api", "camunda", "console", "pull", "push", "worker", "queries", "proto/relais/worker/v1", "stream"} {
		found := false
		for _, p := range pkgs {
			if p.ImportPath == Module+"/"+want {
				found = true
			}
		}
		if !found {
			t.Errorf("package %s not listed: a rule about it checks nothing", want)
		}
	}
}

func listModule(t *testing.T) []Package {
	t.Helper()
	// go test caches a result by the files the test opens; go list reads
	// them in another process, so consult every Go file here too, or a
	// planted import would be answered from the cache.
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") || d.Name() == "go.mod" {
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Deps,Module,Standard", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Package
			Standard bool
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !p.Standard && (p.ImportPath == Module || strings.HasPrefix(p.ImportPath, Module+"/")) {
			pkgs = append(pkgs, p.Package)
		}
	}
	return pkgs
}

// TestCheckNamesEachForbiddenImport plants each kind of violation in a
// small graph: the check must name the package and the import.
func TestCheckNamesEachForbiddenImport(t *testing.T) {
	t.Parallel()
	m := func(rel string) string { return Module + "/" + rel }
	tests := []struct {
		name string
		pkg  Package
		want string
	}{
		{"api imports queries", Package{ImportPath: m("api"), Imports: []string{m("queries")}}, "api imports " + m("queries")},
		{"a test harness imports queries", Package{ImportPath: m("internal/dbtest"), Imports: []string{m("queries")}}, "internal/dbtest imports " + m("queries")},
		{"console imports pull", Package{ImportPath: m("console"), Imports: []string{m("pull")}}, "console imports " + m("pull")},
		{"push imports api", Package{ImportPath: m("push"), Imports: []string{m("api")}}, "push imports " + m("api")},
		{"camunda imports pull", Package{ImportPath: m("camunda"), Imports: []string{m("pull")}}, "camunda imports " + m("pull")},
		{"api imports camunda", Package{ImportPath: m("api"), Imports: []string{m("camunda")}}, "api imports " + m("camunda")},
		{"contracts imports engine", Package{ImportPath: m("contracts"), Imports: []string{m("engine")}}, "contracts imports " + m("engine")},
		{"contracts imports queries", Package{ImportPath: m("contracts"), Imports: []string{m("queries")}}, "contracts imports " + m("queries")},
		{"worker imports engine", Package{ImportPath: m("worker"), Imports: []string{m("engine")}}, "worker imports " + m("engine")},
		{"worker imports httpjson", Package{ImportPath: m("worker"), Imports: []string{m("internal/httpjson")}}, "worker imports " + m("internal/httpjson")},
		{"stream imports pull", Package{ImportPath: m("stream"), Imports: []string{m("pull")}}, "stream imports " + m("pull")},
		{"pull imports stream", Package{ImportPath: m("pull"), Imports: []string{m("stream")}}, "pull imports " + m("stream")},
		{"the protocol imports isoduration", Package{ImportPath: m("proto/relais/worker/v1"), Imports: []string{m("internal/isoduration")}}, "proto/relais/worker/v1 imports " + m("internal/isoduration")},
		{"the engine speaks the protocol", Package{ImportPath: m("engine"), Imports: []string{m("proto/relais/worker/v1")}}, "engine imports " + m("proto/relais/worker/v1")},
		{"pull speaks the protocol", Package{ImportPath: m("pull"), Imports: []string{m("proto/relais/worker/v1/workerv1connect")}}, "pull imports " + m("proto/relais/worker/v1/workerv1connect")},
		{"engine links net/http", Package{ImportPath: m("engine"), Imports: []string{m("internal/httpjson")}, Deps: []string{"net/http", m("internal/httpjson")}}, "engine depends on net/http (through " + m("internal/httpjson")},
		{"process links net/http", Package{ImportPath: m("engine/process"), Imports: []string{"net/http"}, Deps: []string{"net/http"}}, "engine/process depends on net/http"},
		{"contracts links pgx", Package{ImportPath: m("contracts"), Imports: []string{"github.com/jackc/pgx/v5"}, Deps: []string{"github.com/jackc/pgx/v5"}}, "contracts depends on github.com/jackc/pgx/v5"},
		{"process links pgconn", Package{ImportPath: m("engine/process"), Deps: []string{"github.com/jackc/pgx/v5/pgconn"}}, "engine/process depends on github.com/jackc/pgx/v5/pgconn"},
		{"plumbing imports a surface", Package{ImportPath: m("internal/longpoll"), Imports: []string{m("pull")}}, "internal/longpoll imports " + m("pull")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkgs := []Package{tt.pkg, {ImportPath: m("internal/httpjson"), Deps: []string{"net/http"}}}
			got := Check(pkgs)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) {
				t.Errorf("Check = %q, want one problem starting %q", got, tt.want)
			}
		})
	}
	allowed := []Package{
		{ImportPath: m("engine"), Imports: []string{m("queries"), m("contracts")}},
		{ImportPath: m("worker"), Imports: []string{m("internal/isoduration"), "net/http", m("proto/relais/worker/v1"), m("proto/relais/worker/v1/workerv1connect")}},
		{ImportPath: m("stream"), Imports: []string{m("engine"), m("proto/relais/worker/v1"), m("proto/relais/worker/v1/workerv1connect")}},
		{ImportPath: m("proto/relais/worker/v1/workerv1connect"), Imports: []string{m("proto/relais/worker/v1")}},
		{ImportPath: m("api"), Imports: []string{m("engine"), m("internal/httpjson")}, Deps: []string{"net/http"}},
		{ImportPath: m("internal/server"), Imports: []string{m("api"), m("camunda"), m("pull"), m("push"), m("console"), m("stream")}},
		{ImportPath: m("camunda"), Imports: []string{m("engine"), m("internal/longpoll")}},
		{ImportPath: m("internal/relaistest"), Imports: []string{m("api"), m("console")}},
		{ImportPath: m("engine"), Deps: []string{"github.com/jackc/pgx/v5"}},
	}
	if got := Check(allowed); len(got) != 0 {
		t.Errorf("allowed imports reported: %q", got)
	}
}
