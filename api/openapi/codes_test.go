package openapi_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/relais/relais/api/openapi"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

// TestEveryProblemCodeIsDocumented reads the module's sources for every
// problem code they can answer (the code of each fault.New and fault.Error)
// and fails unless the OpenAPI document's ProblemCode and docs/api.md's table
// of problem codes list exactly those, each under the status its kind maps
// to. A code a client can meet is one it needs to find explained; a
// documented code nothing answers any more is a lie.
func TestEveryProblemCodeIsDocumented(t *testing.T) {
	t.Parallel()
	used := problemCodes(t, "../..")
	if len(used) < 40 {
		t.Fatalf("found %d problem codes in the sources; the scan would prove nothing", len(used))
	}

	var doc struct {
		Components struct {
			Schemas struct {
				ProblemCode struct {
					Enum []string `json:"enum"`
				} `json:"ProblemCode"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	documented := doc.Components.Schemas.ProblemCode.Enum
	for code, statuses := range used {
		if !slices.Contains(documented, code) {
			t.Errorf("code %s (status %v) is answered but not in the OpenAPI ProblemCode enum", code, statuses)
		}
	}
	for _, code := range documented {
		if used[code] == nil {
			t.Errorf("the OpenAPI ProblemCode enum lists %s, which no source answers", code)
		}
	}
	if !slices.IsSorted(documented) {
		t.Error("the OpenAPI ProblemCode enum is not in alphabetical order")
	}

	table := problemCodeTable(t, "../../docs/api.md")
	for code, statuses := range used {
		got, ok := table[code]
		if !ok {
			t.Errorf("code %s (status %v) is answered but not in docs/api.md's table of problem codes", code, statuses)
			continue
		}
		if !slices.Equal(got, statuses) {
			t.Errorf("docs/api.md: code %s with status %v, the sources answer it with %v", code, got, statuses)
		}
	}
	for code := range table {
		if used[code] == nil {
			t.Errorf("docs/api.md's table of problem codes lists %s, which no source answers", code)
		}
	}
	// The text before the table counts the codes that share 409.
	conflicts := 0
	for _, statuses := range used {
		if slices.Contains(statuses, 409) {
			conflicts++
		}
	}
	words := []string{"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
		"twenty", "twenty-one", "twenty-two", "twenty-three", "twenty-four", "twenty-five"}
	readme, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if conflicts < 10 || conflicts >= 10+len(words) {
		t.Errorf("%d codes share 409: extend the words of this check", conflicts)
	} else if want := "(" + words[conflicts-10] + " codes share 409)"; !strings.Contains(string(readme), want) {
		t.Errorf("docs/api.md should say %q: %d codes are answered with 409", want, conflicts)
	}
}

// kinds names fault's kinds as the sources spell them; their statuses are
// httpjson.Status's.
var kinds = map[string]fault.Kind{
	"Internal": fault.Internal, "BadRequest": fault.BadRequest, "Unauthorized": fault.Unauthorized,
	"Forbidden": fault.Forbidden, "NotFound": fault.NotFound, "MethodNotAllowed": fault.MethodNotAllowed,
	"Conflict": fault.Conflict, "TooLarge": fault.TooLarge, "Unprocessable": fault.Unprocessable,
	"TooManyRequests": fault.TooManyRequests, "Unavailable": fault.Unavailable, "Timeout": fault.Timeout,
	"PreconditionFailed": fault.PreconditionFailed,
}

// problemCodes maps each problem code the sources under root can answer to
// its statuses, sorted. A code is the second argument of fault.New, or the
// Code of a fault.Error literal: a string literal, a constant (of its
// package or another of the module), a parameter of the enclosing function
// (each literal its callers in the package pass), or a field of a struct
// literal in the enclosing function (each literal given to that field).
// Anything else fails the test, naming where: a code computed some other
// way is one this scan cannot vouch for.
func problemCodes(t *testing.T, root string) map[string][]int {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{} // directory → files
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "bench", "tools", ".ci", "camunda":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Every string constant of the module, by package directory's last
	// element (unique among the packages that define codes) and name.
	consts := map[string]string{}
	for dir, files := range pkgs {
		for _, f := range files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								consts[filepath.Base(dir)+"."+name.Name] = s
							}
						}
					}
				}
			}
		}
	}

	codes := map[string][]int{}
	add := func(code string, kind string) {
		k, ok := kinds[kind]
		if !ok {
			t.Errorf("unknown fault kind %s for code %s", kind, code)
		}
		status := httpjson.Status(k)
		if !slices.Contains(codes[code], status) {
			codes[code] = append(codes[code], status)
			slices.Sort(codes[code])
		}
	}
	for dir, files := range pkgs {
		pkg := filepath.Base(dir)
		for _, f := range files {
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					var kind, code ast.Expr
					switch n := n.(type) {
					case *ast.CallExpr:
						if isSelector(n.Fun, "fault", "New") && len(n.Args) >= 2 {
							kind, code = n.Args[0], n.Args[1]
						}
					case *ast.CompositeLit:
						if isSelector(n.Type, "fault", "Error") {
							for _, elt := range n.Elts {
								kv, ok := elt.(*ast.KeyValueExpr)
								if !ok {
									t.Errorf("%s: a fault.Error literal without field names: name them, so that this scan finds its code", fset.Position(n.Pos()))
									break
								}
								switch ident(kv.Key) {
								case "Kind":
									kind = kv.Value
								case "Code":
									code = kv.Value
								}
							}
						}
					}
					if code == nil {
						return true
					}
					k, ok := kind.(*ast.SelectorExpr)
					if !ok || ident(k.X) != "fault" {
						t.Errorf("%s: a fault whose kind is not a fault constant", fset.Position(n.Pos()))
						return true
					}
					vals := resolveCode(code, pkg, fn, files, consts, 0)
					if len(vals) == 0 {
						t.Errorf("%s: cannot tell which problem code %s is", fset.Position(code.Pos()), exprString(code))
					}
					for _, v := range vals {
						add(v, k.Sel.Name)
					}
					return true
				})
			}
		}
	}
	return codes
}

// resolveCode is every string e can be, or nil when the scan cannot tell.
func resolveCode(e ast.Expr, pkg string, fn *ast.FuncDecl, files []*ast.File, consts map[string]string, depth int) []string {
	if s, ok := stringLit(e); ok {
		return []string{s}
	}
	switch e := e.(type) {
	case *ast.Ident:
		if s, ok := consts[pkg+"."+e.Name]; ok {
			return []string{s}
		}
		if depth > 3 {
			return nil
		}
		idx := paramIndex(fn, e.Name)
		if idx < 0 {
			return nil
		}
		// Each caller in the package passes it: resolve what they pass, in
		// their own function.
		var out []string
		unresolved := false
		for _, f := range files {
			for _, decl := range f.Decls {
				caller, ok := decl.(*ast.FuncDecl)
				if !ok || caller.Body == nil {
					continue
				}
				ast.Inspect(caller.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || ident(call.Fun) != fn.Name.Name || idx >= len(call.Args) {
						return true
					}
					vals := resolveCode(call.Args[idx], pkg, caller, files, consts, depth+1)
					if len(vals) == 0 {
						unresolved = true
					}
					out = append(out, vals...)
					return true
				})
			}
		}
		if unresolved {
			return nil
		}
		return out
	case *ast.SelectorExpr:
		if x := ident(e.X); x != "" {
			if s, ok := consts[x+"."+e.Sel.Name]; ok {
				return []string{s}
			}
		}
		// A field of a struct literal in the enclosing function.
		var out []string
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if ok && ident(kv.Key) == e.Sel.Name {
				if s, ok := stringLit(kv.Value); ok {
					out = append(out, s)
				}
			}
			return true
		})
		return out
	}
	return nil
}

func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func ident(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func isSelector(e ast.Expr, x, sel string) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && ident(s.X) == x && s.Sel.Name == sel
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "an expression"
}

// problemCodeTable reads the API reference's table of problem codes: the
// rows after the heading "## Problem codes" whose first cell is a code in
// backquotes and whose second holds the statuses.
func problemCodeTable(t *testing.T, path string) map[string][]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## Problem codes\n")
	if start < 0 {
		t.Fatalf("%s has no section \"## Problem codes\"", path)
	}
	section := text[start+1:]
	if end := strings.Index(section[4:], "\n## "); end >= 0 {
		section = section[:end+4]
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9, ]+) \\|")
	table := map[string][]int{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if _, dup := table[m[1]]; dup {
			t.Errorf("%s: code %s has two rows", path, m[1])
		}
		for _, s := range strings.Split(m[2], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				t.Fatalf("%s: code %s: status %q", path, m[1], s)
			}
			table[m[1]] = append(table[m[1]], n)
		}
		slices.Sort(table[m[1]])
	}
	if len(table) == 0 {
		t.Fatalf("%s: the section \"## Problem codes\" has no rows", path)
	}
	return table
}
