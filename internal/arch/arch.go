// Package arch states the module's dependency rules and checks a package
// graph against them. Its test runs the check on the module itself (read
// with go list), so a forbidden import fails CI naming the import.
package arch

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the module path every rule is written against.
const Module = "github.com/relais/relais"

// Package is what the rules read of one package of the module.
type Package struct {
	ImportPath string
	Imports    []string // direct imports of its non-test files
	Deps       []string // every package it depends on, transitively
}

// surfaces serve the product over a transport; none may import another, so
// each can be read, tested and changed alone.
var surfaces = []string{"api", "camunda", "console", "pull", "push", "stream"}

// pureDomain must link no net/http: the domain is reachable from any
// transport (REST, streams, the console, a CLI) and owned by none.
var pureDomain = []string{"engine", "engine/process", "contracts"}

// sqlFree must link no PostgreSQL driver: contracts and the process graph
// are pure rules, which the engine applies in its transactions.
var sqlFree = []string{"contracts", "engine/process"}

// assemblers are the internal packages that may import a surface: the
// replica that mounts them all, and the test harnesses that start one.
// Every other internal package is plumbing the surfaces build on.
var assemblers = []string{"internal/server", "internal/relaistest", "internal/dbtest", "internal/canary", "internal/faultsuite"}

// workerLeaves are what the public SDK may import of the module: it ships
// to other teams' services, so it stays free of the server. The generated
// worker protocol is the wire it speaks; isoduration and jsontree (the
// strict JSON check its outputs must pass) are standard-library leaves.
var workerLeaves = []string{"internal/isoduration", "internal/jsontree", protoPackage, protoPackage + "/workerv1connect"}

// protoPackage is the generated worker protocol. It is generated code on
// the wire format: it imports no other package of the module (the SDK and
// other teams' clients take it alone), and only the stream surface, the SDK
// and tests use it.
const protoPackage = "proto/relais/worker/v1"

// Check returns one message per broken rule, each naming the package and
// the import that breaks it.
func Check(pkgs []Package) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, p := range pkgs {
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			irel, mine := relative(imp)
			if !mine {
				continue
			}
			// Only the engine speaks SQL: generated rows never leave it.
			if irel == "queries" && rel != "engine" {
				add("%s imports %s: only engine may import queries (ask the engine instead)", rel, imp)
			}
			if slices.Contains(surfaces, rel) && slices.Contains(surfaces, irel) {
				add("%s imports %s: a surface never imports another surface (move what they share into engine or internal/)", rel, imp)
			}
			if rel == "contracts" && (irel == "engine" || strings.HasPrefix(irel, "engine/")) {
				add("%s imports %s: contracts knows nothing of the engine or SQL", rel, imp)
			}
			if (rel == "worker" || strings.HasPrefix(rel, "worker/")) && !slices.Contains(workerLeaves, irel) {
				add("%s imports %s: the worker SDK may import only %s of this module", rel, imp, strings.Join(workerLeaves, ", "))
			}
			if strings.HasPrefix(rel, "proto/") && !strings.HasPrefix(irel, protoPackage) {
				add("%s imports %s: the generated protocol imports nothing else of this module", rel, imp)
			}
			if strings.HasPrefix(rel, "internal/") && slices.Contains(surfaces, irel) && !slices.Contains(assemblers, rel) {
				add("%s imports %s: internal packages are plumbing under the surfaces; only %s may import one", rel, imp, strings.Join(assemblers, ", "))
			}
			if strings.HasPrefix(irel, "proto/") && !protoUser(rel) {
				add("%s imports %s: only the stream surface and the worker SDK speak the worker protocol (the domain stays transport-free)", rel, imp)
			}
		}
		if slices.Contains(pureDomain, rel) {
			for _, d := range p.Deps {
				if d == "net/http" {
					add("%s depends on net/http (through %s): the domain links no HTTP", rel, throughModule(p, pkgs))
				}
			}
		}
		if slices.Contains(sqlFree, rel) {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "github.com/jackc/pgx") {
					add("%s depends on %s: %s knows nothing of SQL", rel, d, rel)
					break
				}
			}
		}
	}
	return problems
}

// protoUser reports whether the package rel may import the generated
// protocol: the surface serving it, the SDK speaking it, and the generated
// packages themselves (the server mounts the surface's handler, not the
// protocol).
func protoUser(rel string) bool {
	return rel == "stream" || strings.HasPrefix(rel, "stream/") || rel == "worker" || strings.HasPrefix(rel, "worker/") ||
		strings.HasPrefix(rel, "proto/")
}

// throughModule names the module packages p imports that pull in net/http,
// to say where to look.
func throughModule(p Package, pkgs []Package) string {
	deps := map[string][]string{}
	for _, q := range pkgs {
		deps[q.ImportPath] = q.Deps
	}
	var via []string
	for _, imp := range p.Imports {
		if imp == "net/http" || slices.Contains(deps[imp], "net/http") {
			via = append(via, imp)
		}
	}
	if len(via) == 0 {
		return "an imported package"
	}
	return strings.Join(via, ", ")
}

func relative(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, Module+"/")
	return rel, ok
}
