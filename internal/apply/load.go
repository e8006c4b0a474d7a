// Package apply is the client behind `relais apply -f PATH`: it reads
// Definition, Release, Process and Destination documents (YAML or JSON),
// checks them locally, plans what each changes on a running Relais, and
// applies the plan through the HTTP API. Applying twice changes nothing the
// second time.
package apply

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

// Kinds, in the order they are applied: what a document refers to is
// applied before it.
const (
	KindDestination = "Destination"
	KindDefinition  = "Definition"
	KindRelease     = "Release"
	KindProcess     = "Process"
)

var kindOrder = map[string]int{KindDestination: 0, KindDefinition: 1, KindRelease: 2, KindProcess: 3}

// Document is one YAML or JSON document of a file.
type Document struct {
	File  string
	Index int // 1-based position in its file
	Multi bool
	Kind  string
	// ID is the key (definitions, processes) or name (destinations,
	// releases) the document is about.
	ID string
	// Definition is the definition a Release belongs to.
	Definition string
	// Body is the document without its envelope (kind and identity): what
	// the API receives. Pointers in errors are pointers into it, which are
	// also pointers into the file's document.
	Body map[string]any
	// ExpectRevision, when set on a Definition, is the revision the
	// document must become; on a Process (its version: member), the
	// version.
	ExpectRevision int

	// node is the document as parsed, its lines counted from the start of
	// the file, so that a problem's pointer can be shown with its line.
	node *yaml.Node
}

// Where names the document in messages: "file" or "file (document 2)".
func (d Document) Where() string {
	if d.Multi {
		return fmt.Sprintf("%s (document %d)", d.File, d.Index)
	}
	return d.File
}

// Name names what the document is about as results do: "definition
// add_company_to_crm", "release add_company_to_crm/2026.11".
func (d Document) Name() string {
	if d.Kind == KindRelease {
		return fmt.Sprintf("release %s/%s", d.Definition, d.ID)
	}
	return fmt.Sprintf("%s %s", strings.ToLower(d.Kind), d.ID)
}

// Problem is one error found in a document.
type Problem struct {
	Doc     Document
	Pointer string
	Message string
	// Unknown is set when a write got no answer (a timeout, a connection
	// lost): the server may have applied it. Applying again settles it,
	// since apply is idempotent.
	Unknown bool
	// Line is the problem's line in the file when no pointer gives it (a
	// document that does not parse), 0 when unknown.
	Line int
}

// String is the problem as compilers print theirs: "file:line: /pointer:
// message", so that an editor jumps to it. The line is the pointer's (its
// member's key), or its nearest ancestor's when the member is missing;
// the server's problems get one too, since their pointers are into the
// same document.
func (p Problem) String() string {
	ptr := p.Pointer
	if ptr == "" {
		ptr = "/"
	}
	// With its line, a problem needs no document number: editors and CI
	// annotations read "file:line:" and nothing between.
	where := p.Doc.Where()
	if line := p.line(); line > 0 {
		where = p.Doc.File + ":" + strconv.Itoa(line)
	}
	return fmt.Sprintf("%s: %s: %s", where, ptr, p.Message)
}

// line is the problem's line in its file, 0 when unknown.
func (p Problem) line() int {
	if p.Line > 0 {
		return p.Line
	}
	return lineOf(p.Doc.node, p.Pointer)
}

// member finds name in mapping m: its own keys first, then those a merge
// key (<<: *base, or a list of aliases) brings, as the decoder does.
func member(m *yaml.Node, name string) (key, value *yaml.Node) {
	var merged []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch {
		case k.Value == name && k.ShortTag() != "!!merge":
			return k, v
		case k.ShortTag() == "!!merge":
			merged = append(merged, v)
		}
	}
	for _, v := range merged {
		sources := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			sources = v.Content
		}
		for _, src := range sources {
			if src.Kind == yaml.AliasNode && src.Alias != nil {
				src = src.Alias
			}
			if src.Kind == yaml.MappingNode {
				if k, v := member(src, name); v != nil {
					return k, v
				}
			}
		}
	}
	return nil, nil
}

// lineOf is the line of what pointer names in n: a member's key line, an
// item's own line; the deepest existing ancestor's when the pointer goes
// further than the document; 0 without a document.
func lineOf(n *yaml.Node, pointer string) int {
	_, line := yamlAt(n, pointer)
	return line
}

// yamlAt is the node pointer names in n, nil when it names none, and its
// line as lineOf says.
func yamlAt(n *yaml.Node, pointer string) (*yaml.Node, int) {
	if n == nil {
		return nil, 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	if pointer == "" {
		return n, line
	}
	if pointer[0] != '/' {
		return nil, 0
	}
	for _, token := range strings.Split(pointer[1:], "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch n.Kind {
		case yaml.MappingNode:
			key, value := member(n, token)
			if value == nil {
				return nil, line
			}
			line, n = key.Line, value
		case yaml.SequenceNode:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil, line
			}
			n = n.Content[i]
			line = n.Line
		default:
			return nil, line
		}
	}
	return n, line
}

// otherTools are the YAML and JSON files of other tools that live beside
// Relais documents (a worker's package, its code generation, a
// repository's bots): a folder's walk skips them, as it skips
// node_modules and hidden files and folders (.gitlab-ci.yml, .github).
var otherTools = map[string]bool{
	"package.json": true, "package-lock.json": true, "tsconfig.json": true, "jsconfig.json": true,
	"buf.yaml": true, "buf.gen.yaml": true, "buf.work.yaml": true, "docker-compose.yaml": true, "docker-compose.yml": true,
	"renovate.json": true, "mkdocs.yml": true, "mkdocs.yaml": true, "codecov.yml": true, "codecov.yaml": true,
	"sqlc.yaml": true, "sqlc.yml": true, "sqlc.json": true,
}

// skipped reports whether a folder's walk leaves d out.
func skipped(d fs.DirEntry) bool {
	if strings.HasPrefix(d.Name(), ".") {
		return true
	}
	if d.IsDir() {
		return d.Name() == "node_modules"
	}
	return otherTools[d.Name()]
}

// Load reads paths (each a file, or a folder of .yaml, .yml and .json
// files, recursively, in name order, other tools' files skipped) as one set
// and checks every document locally. It returns the documents in apply
// order and every problem found; a path with no document at all is an
// error, and a file named twice (directly or through a folder) is read once.
func Load(paths ...string) ([]Document, []Problem, error) {
	if len(paths) == 0 {
		return nil, nil, errors.New("no file or folder to apply")
	}
	var docs []Document
	var problems []Problem
	read := map[string]bool{}
	for _, path := range paths {
		files, others, err := documentFiles(path)
		if err != nil {
			return nil, nil, err
		}
		found := false
		for _, f := range files {
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, nil, err
			}
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real // a link to a file already read is that file
			}
			if read[abs] {
				found = true
				continue
			}
			read[abs] = true
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, nil, err
			}
			ds, ps := parseFile(f, raw)
			docs = append(docs, ds...)
			problems = append(problems, ps...)
			found = found || len(ds) > 0 || len(ps) > 0
		}
		if !found {
			// As with kubectl apply: a path that names nothing to apply
			// is most likely the wrong path, and succeeding would hide it.
			slices.Sort(others)
			others = slices.Compact(others)
			if len(files) == 0 && len(others) > 0 {
				// Not "holds none" of a folder that shows some (evaluator
				// QA: a worker's package.json and buf.gen.yaml).
				return nil, nil, fmt.Errorf("no documents found in %s: its only .yaml, .yml or .json files are other tools' (%s), which apply skips", path, strings.Join(others, ", "))
			}
			if len(files) == 0 {
				return nil, nil, fmt.Errorf("no documents found in %s: it holds no .yaml, .yml or .json file", path)
			}
			return nil, nil, fmt.Errorf("no documents found in %s: only empty documents or comments", path)
		}
	}
	// One set applies each document once: the same one twice (from two
	// folders, say) would make two revisions or versions, the last one
	// read winning, with nothing to say which was meant.
	first := map[string]Document{}
	for _, d := range docs {
		if d.ID == "" {
			continue // its own problem says what is missing
		}
		if prev, ok := first[d.Name()]; ok {
			where := prev.Where()
			if line := lineOf(prev.node, ""); line > 0 {
				where = prev.File + ":" + strconv.Itoa(line)
			}
			problems = append(problems, Problem{Doc: d, Message: fmt.Sprintf("%s is also defined at %s: each document may appear once in what is applied", d.Name(), where)})
			continue
		}
		first[d.Name()] = d
	}
	sort.SliceStable(docs, func(i, j int) bool { return kindOrder[docs[i].Kind] < kindOrder[docs[j].Kind] })
	return docs, problems, nil
}

// documentFiles lists the files Load reads for path, and the names of the
// other tools' files its walk skipped (see otherTools).
func documentFiles(path string) (files, others []string, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil, nil
	}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != path && skipped(d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			if otherTools[d.Name()] {
				others = append(others, d.Name())
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(files)
	return files, others, nil
}

var separator = regexp.MustCompile(`(?m)^---\s*$`)

func parseFile(file string, raw []byte) ([]Document, []Problem) {
	text := string(raw)
	var docs []Document
	var problems []Problem
	var nonEmpty []string
	from, before := 0, 0 // before: the lines ahead of text[from:]
	for _, sep := range append(separator.FindAllStringIndex(text, -1), []int{len(text), len(text)}) {
		if p := text[from:sep[0]]; strings.TrimSpace(stripComments(p)) != "" {
			// Blank lines in place of the file's earlier lines: the
			// parser's lines, in its errors and its nodes, are then the
			// file's.
			nonEmpty = append(nonEmpty, strings.Repeat("\n", before)+p)
		}
		before += strings.Count(text[from:sep[1]], "\n")
		from = sep[1]
	}
	if strings.EqualFold(filepath.Ext(file), ".json") {
		// JSON is read by the YAML parser, which takes what JSON refuses
		// (a trailing comma, a comment): a file apply takes must also be
		// a body the API takes.
		if p, bad := jsonProblem(file, raw); bad {
			return nil, []Problem{p}
		}
	}
	for i, part := range nonEmpty {
		d := Document{File: file, Index: i + 1, Multi: len(nonEmpty) > 1}
		// YAML 1.2 (yaml.v3): yes, no, on and off stay strings, as choice
		// values often are.
		var node yaml.Node
		var v any
		err := yaml.Unmarshal([]byte(part), &node)
		if err == nil {
			v, err = nodeValue(&node, "")
		}
		if nf := (*nonFinite)(nil); errors.As(err, &nf) {
			d.node = &node
			problems = append(problems, Problem{Doc: d, Pointer: nf.pointer, Message: nf.Error()})
			continue
		}
		if err != nil {
			problems = append(problems, syntaxProblem(d, part, err))
			continue
		}
		d.node = &node
		top, _ := v.(map[string]any)
		kind, _ := top["kind"].(string)
		if ps := controlProblems(d, kind, &node, ""); len(ps) > 0 {
			problems = append(problems, ps...)
			continue
		}
		js, err := json.Marshal(v)
		if err != nil {
			// nodeValue took only string keys and finite numbers.
			problems = append(problems, Problem{Doc: d, Message: "holds a value JSON cannot hold: " + err.Error()})
			continue
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || m == nil {
			problems = append(problems, Problem{Doc: d, Message: "a document must be a mapping with a kind"})
			continue
		}
		d.Kind, _ = m["kind"].(string)
		// The body is checked even when the envelope is wrong: one run
		// reports every problem of the document.
		ps := envelope(&d, m)
		problems = append(problems, asWritten(missedKeys(append(slices.Clone(ps), check(d)...)))...)
		if len(ps) == 0 {
			docs = append(docs, d)
		}
	}
	// Problems in file order: the body's checks come after the
	// envelope's, and an editor walks them top to bottom.
	sort.SliceStable(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		if a.Doc.Index != b.Doc.Index {
			return a.Doc.Index < b.Doc.Index
		}
		return a.line() < b.line()
	})
	return docs, problems
}

// jsonNumber is a JSON number literal.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// nodeValue is the value of a YAML node as encoding/json with UseNumber
// reads JSON: maps, lists, strings, booleans, null, and numbers as
// json.Number holding their literal as written. Decoding numbers into Go's
// int and float64, as yaml.v3 does, rounded a contract's bounds
// (0.1000000000000000000001 became 0.1, a stricter maximum) before the
// API, which keeps every digit, saw them. A YAML number that is no JSON
// literal (0x1F, 1_000, .inf) is decoded as YAML reads it.
func nodeValue(n *yaml.Node, at string) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return nodeValue(n.Content[0], at)
	case yaml.AliasNode:
		return nodeValue(n.Alias, at)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		lines := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.ShortTag() == "!!merge" {
				// A merge key (<<: *defaults): the mapping's members, those
				// written beside it winning.
				merged, err := nodeValue(n.Content[i+1], at)
				if err != nil {
					return nil, err
				}
				mm, ok := merged.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("line %d: a merge key (<<) takes a mapping", k.Line)
				}
				for mk, mv := range mm {
					if _, set := m[mk]; !set {
						m[mk] = mv
					}
				}
				continue
			}
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" && k.ShortTag() != "!!timestamp" {
				// As encoding/json would refuse it: a key that is no string.
				return nil, fmt.Errorf("line %d: mapping keys must be strings, not %s", k.Line, strings.TrimPrefix(k.ShortTag(), "!!"))
			}
			if at, dup := lines[k.Value]; dup {
				// Worded as yaml.v3's own decoder words it.
				return nil, fmt.Errorf("line %d: mapping key %q already defined at line %d", k.Line, k.Value, at)
			}
			lines[k.Value] = k.Line
			val, err := nodeValue(n.Content[i+1], jsontree.Pointer(at, k.Value))
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			val, err := nodeValue(c, jsontree.Pointer(at, strconv.Itoa(i)))
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
		return out, nil
	}
	if t := n.ShortTag(); (t == "!!int" || t == "!!float") && jsonNumber.MatchString(n.Value) {
		return json.Number(n.Value), nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!timestamp" {
		// YAML 1.2 has no timestamps: 2026-01-01 is the text written, as
		// docs/commands.md promises of yes and no. Decoded, it became a time.Time,
		// 2026-01-01T00:00:00Z in JSON (designer QA: a choice's values
		// changed unsaid, a date literal refused as no date).
		return n.Value, nil
	}
	if n.Kind == yaml.ScalarNode && n.Style == 0 && n.ShortTag() == "!!str" && yamlNumberish.MatchString(n.Value) {
		if jsonNumber.MatchString(n.Value) {
			// JSON holds it (1e400): the document's checks judge it
			// with everything else, where refusing it here hid the
			// document's other problems (designer QA).
			return json.Number(n.Value), nil
		}
		// Unquoted, a number too large for YAML's own types (a 20-digit
		// hex) is read as a string, and was told to be an integer, "not
		// string" (verifier QA).
		return nil, &nonFinite{pointer: at, literal: n.Value, why: "is a number too large to hold"}
	}
	var x any
	if err := n.Decode(&x); err != nil {
		return nil, err
	}
	if f, ok := x.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
		return nil, &nonFinite{pointer: at, literal: n.Value, why: "is a number JSON cannot hold"}
	}
	return x, nil
}

// yamlNumberish is a plain scalar written as a YAML number: decimal,
// hexadecimal or octal, with an exponent or digit separators.
var yamlNumberish = regexp.MustCompile(`^[-+]?(0x[0-9a-fA-F_]+|0o[0-7_]+|[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?|\.[0-9]+([eE][-+]?[0-9]+)?)$`)

// nonFinite is a YAML number JSON cannot hold (.inf, .nan, 1e999), at
// its pointer: the whole document was blamed, at its first line (designer
// QA).
type nonFinite struct{ pointer, literal, why string }

func (e *nonFinite) Error() string {
	return fmt.Sprintf("%s %s: write a finite number that fits, or quote it (%q) for a string", e.literal, e.why, e.literal)
}

// yamlLine finds the line yaml.v3 names in its errors ("yaml: line 20:
// …", "line 5: mapping key … already defined").
var yamlLine = regexp.MustCompile(`line (\d+): `)

// syntaxProblem is a document that does not parse, at the line the parser
// names, with a hint for the YAML mistakes designers make most.
func syntaxProblem(d Document, text string, err error) Problem {
	msg := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "yaml: ")), " ")
	p := Problem{Doc: d}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		msg = strings.Replace(msg, m[0], "", 1)
	}
	if strings.Contains(msg, "tab character") && p.Line > 0 {
		// The parser names the line before the tab's, where the token
		// it was reading began: name the tab's own.
		lines := strings.Split(text, "\n")
		for i := p.Line - 1; i < len(lines); i++ {
			indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
			if strings.Contains(indent, "\t") {
				p.Line = i + 1
				break
			}
		}
	}
	block := 0
	if (strings.Contains(msg, "did not find expected key") || strings.Contains(msg, "did not find expected '-' indicator")) && p.Line > 0 {
		// The parser names the line where the enclosing block began, not
		// the one that broke it (a line indented one space off, the usual
		// slip): the shortest prefix of the text that fails to parse ends
		// at that line. A prefix past a broken line fails too, so a
		// binary search finds it in a few parses, however long the file.
		// A prefix that ends inside a flow list, a flow mapping or a
		// quoted string fails too, for a reason of its own: only the
		// document's own error, word for word, marks the slip.
		lines := strings.Split(text, "\n")
		fails := func(k int) bool {
			var n yaml.Node
			e := yaml.Unmarshal([]byte(strings.Join(lines[:k], "\n")), &n)
			return e != nil && e.Error() == err.Error()
		}
		if k := p.Line + sort.Search(len(lines)-p.Line, func(i int) bool { return fails(p.Line + 1 + i) }) + 1; k <= len(lines) && k > p.Line {
			block, p.Line = p.Line, k
		}
	}
	continued := 0
	if strings.Contains(msg, "mapping values are not allowed in this context") {
		continued = continuedLine(text, p.Line)
	}
	msg = strings.TrimPrefix(msg, "unmarshal errors: ")
	switch {
	case continued > 0:
		msg += fmt.Sprintf(" (this line is indented deeper than line %d, so it reads as the rest of that line's value: align it with its siblings)", continued)
	case block > 0:
		msg += fmt.Sprintf(" (this line is indented unlike its neighbours in the block that starts at line %d: align it with its siblings, or under the key it belongs to)", block)
	case strings.Contains(msg, "did not find expected alphabetic or numeric character"):
		msg += ` (a key or value starting with * or & is an alias or an anchor in YAML: quote it, as "*")`
	case strings.Contains(msg, "found unknown escape character"):
		msg += ` (in double quotes a backslash starts an escape: write a pattern in single quotes, as '^CLM-\d{8}$')`
	case strings.Contains(msg, "found character that cannot start any token"), strings.Contains(msg, "tab character"):
		msg += " (YAML indents with spaces, never tabs)"
	}
	language := "YAML"
	if strings.EqualFold(filepath.Ext(d.File), ".json") {
		// A .json file is read as YAML once it passed as JSON: what the
		// YAML reader still refuses (a duplicate key) is JSON's problem
		// to its author.
		language = "JSON"
		msg = strings.Replace(msg, "mapping key", "key", 1)
	}
	p.Message = "not valid " + language + ": " + msg
	return p
}

// continuedLine is the line before line (1-based) of text whose value the
// parser read line as continuing, or 0: a "key: value" line whose key
// begins left of line's indentation. Indented one space deeper than its
// sibling (the usual slip), a "key: value" line is refused as a mapping
// where a plain value goes on, the hint for "did not find expected key"
// does not apply, and the parser's words say nothing of indentation
// (designer QA).
func continuedLine(text string, line int) int {
	lines := strings.Split(text, "\n")
	if line < 2 || line > len(lines) {
		return 0
	}
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	at := indent(lines[line-1])
	for i := line - 2; i >= 0; i-- {
		rest := strings.TrimLeft(lines[i], " ")
		if rest == "" || strings.HasPrefix(rest, "#") {
			continue
		}
		key := indent(lines[i])
		for strings.HasPrefix(rest, "- ") {
			after := strings.TrimLeft(rest[2:], " ")
			key += len(rest) - len(after)
			rest = after
		}
		_, value, ok := strings.Cut(rest, ": ")
		if value = strings.TrimSpace(value); !ok || value == "" || strings.HasPrefix(value, "#") || at <= key {
			return 0
		}
		return i + 1
	}
	return 0
}

// controlProblems refuses the double-quoted strings under n (at pointer
// at) of a document of kind that hold a control character (a tab and line breaks aside):
// "\bACME\b" is a pattern of word boundaries to its author and two
// backspaces to YAML and JSON, a contract no input ever matches, and a
// name holding one is shown garbled in every refusal.
func controlProblems(d Document, kind string, n *yaml.Node, at string) []Problem {
	var out []Problem
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			out = append(out, controlProblems(d, kind, c, at)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			out = append(out, controlProblems(d, kind, c, jsontree.Pointer(at, strconv.Itoa(i)))...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			out = append(out, controlProblems(d, kind, n.Content[i], at)...)
			out = append(out, controlProblems(d, kind, n.Content[i+1], jsontree.Pointer(at, n.Content[i].Value))...)
		}
	case yaml.ScalarNode:
		if n.Style&yaml.DoubleQuotedStyle == 0 {
			break
		}
		i := strings.IndexFunc(n.Value, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' })
		if i < 0 {
			break
		}
		r, _ := utf8.DecodeRuneInString(n.Value[i:])
		how := "in double quotes a backslash starts an escape: write a pattern in single quotes, or double the backslash"
		if strings.EqualFold(filepath.Ext(d.File), ".json") {
			how = "in JSON a backslash starts an escape: double it"
		}
		if r == '\b' {
			how += `, as \\b for a word boundary`
		}
		shown := strconv.Quote(n.Value)
		if at == "/url" || strings.HasPrefix(at, "/headers/") {
			// A destination's credential (whatever the kind says: a
			// misspelt one is still a destination to its author),
			// printed into a CI log otherwise; no pattern there.
			shown = "the value"
			how = "HTTP cannot send it; in double quotes a backslash starts an escape"
			if strings.EqualFold(filepath.Ext(d.File), ".json") {
				how = "HTTP cannot send it; in JSON a backslash starts an escape"
			}
		}
		out = append(out, Problem{Doc: d, Pointer: at, Line: n.Line, Message: fmt.Sprintf("%s holds the control character %U (%s)", shown, r, how)})
	}
	return out
}

// jsonProblem refuses a .json file that is not JSON, at the line of its
// first error.
func jsonProblem(file string, raw []byte) (Problem, bool) {
	var v any
	err := json.Unmarshal(raw, &v)
	if err == nil {
		return Problem{}, false
	}
	p := Problem{Doc: Document{File: file, Index: 1}, Message: "not valid JSON: " + err.Error()}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		at := syntax.Offset
		if at > 0 && at <= int64(len(raw)) {
			// A closing bracket after a comma: the comma is the mistake,
			// on its own line (designer QA: the message named the line
			// after it, and no comma).
			before := bytes.TrimRight(raw[:at-1], " \t\r\n")
			if c := raw[at-1]; (c == '}' || c == ']') && bytes.HasSuffix(before, []byte(",")) {
				p.Message += " (a trailing comma before it: JSON allows none)"
				at = int64(len(before))
			}
		}
		p.Line = 1 + bytes.Count(raw[:at], []byte("\n"))
	}
	return p, true
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// envelope takes the kind and identity out of m into d.
func envelope(d *Document, m map[string]any) []Problem {
	body := map[string]any{}
	for k, v := range m {
		body[k] = v
	}
	delete(body, "kind")
	str := func(key string) (string, []Problem) {
		raw, present := body[key]
		delete(body, key)
		v, ok := raw.(string)
		switch {
		case !present || raw == nil || ok && v == "":
			return "", []Problem{{Doc: *d, Pointer: "/" + key, Message: "is required"}}
		case !ok:
			// YAML reads 2027.01 or 42 as a number: the value is there,
			// of the wrong type.
			return "", []Problem{{Doc: *d, Pointer: "/" + key, Message: fmt.Sprintf("must be a string, not %s (quote it: %q)", typeOf(raw), fmt.Sprint(raw))}}
		}
		return v, nil
	}
	// asserted takes the number a document asserts it is (a Definition's
	// revision, a Process's version) out of the body the API receives.
	asserted := func(key string) []Problem {
		r, ok := body[key]
		if !ok {
			return nil
		}
		delete(body, key)
		n, isNum := revisionNumber(r)
		d.ExpectRevision = n
		if !isNum {
			return []Problem{{Doc: *d, Pointer: "/" + key, Message: fmt.Sprintf("must be a %s number (1 or more), not %s", key, describe(r))}}
		}
		return nil
	}
	var ps []Problem
	switch d.Kind {
	case KindDefinition:
		d.ID, ps = str("key")
		ps = append(ps, asserted("revision")...)
	case KindProcess:
		d.ID, ps = str("key")
		ps = append(ps, asserted("version")...)
	case KindDestination:
		d.ID, ps = str("name")
	case KindRelease:
		var p2 []Problem
		d.Definition, ps = str("definition")
		d.ID, p2 = str("name")
		ps = append(ps, p2...)
	case "":
		msg := "is required (Definition, Release, Process or Destination)"
		// The body goes unchecked without a kind: a misspelt "kind" would
		// be reported nowhere else (designer QA: `kin: Process`).
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if _, ok := suggest.Closest(k, []string{"kind"}); ok {
				msg += fmt.Sprintf("; found %q%s", k, suggest.Meant("kind"))
				break
			}
		}
		return []Problem{{Doc: *d, Pointer: "/kind", Message: msg}}
	default:
		return []Problem{{Doc: *d, Pointer: "/kind", Message: fmt.Sprintf("unknown kind %q (Definition, Release, Process or Destination)%s", d.Kind,
			suggest.Hint(d.Kind, []string{KindDefinition, KindRelease, KindProcess, KindDestination}))}}
	}
	d.Body = body
	if d.Kind == KindDestination {
		ps = append(ps, expandSecrets(d)...)
	}
	return ps
}

// missedKeys adds to an unknown top-level key of ps the required key it
// misspells, when one is missing: the envelope's keys (key, name,
// definition) are taken out of the body before it is checked, so the
// body's check had no such candidate (designer QA: `kee:` got no hint).
func missedKeys(ps []Problem) []Problem {
	var missing []string
	for _, p := range ps {
		if name, top := strings.CutPrefix(p.Pointer, "/"); top && !strings.Contains(name, "/") && strings.HasPrefix(p.Message, "is required") {
			missing = append(missing, name)
		}
	}
	for i, p := range ps {
		name, top := strings.CutPrefix(p.Pointer, "/")
		if !top || strings.Contains(name, "/") || p.Message != fmt.Sprintf("unknown key %q", name) {
			continue
		}
		ps[i].Message += suggest.Missing(name, missing)
	}
	return ps
}

// asWritten makes the "(quote it: …)" of ps quote a YAML number as its
// source writes it: the checks see the number YAML read, which for 010
// (octal), 0x1F or 1_000 is another text than the one to quote (verifier
// QA: a zero-padded code told to become "8").
func asWritten(ps []Problem) []Problem {
	const lead = "(quote it: "
	for i, p := range ps {
		at := strings.Index(p.Message, lead)
		if at < 0 {
			continue
		}
		quoted, err := strconv.QuotedPrefix(p.Message[at+len(lead):])
		if err != nil {
			continue
		}
		n, _ := yamlAt(p.Doc.node, p.Pointer)
		if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" && n.ShortTag() != "!!float" {
			continue
		}
		ps[i].Message = p.Message[:at+len(lead)] + strconv.Quote(n.Value) + p.Message[at+len(lead)+len(quoted):]
	}
	return ps
}

// envReference is a ${NAME} in a destination's url, header values or
// signing secret, or $$ (a literal $), or a $NAME without braces (refused:
// Compose and envsubst read it as a variable, and it would be sent as
// written).
var envReference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\$|\$([A-Z_][A-Z0-9_]+)`)

// expandSecrets replaces each ${NAME} in the values of a destination that
// hold credentials (its url, its header values, its signing secret) by the
// environment variable NAME, so that the files kept in git hold none: a
// variable that is not set is a problem at its value's pointer, named,
// never guessed empty. Other documents and members are left as written.
func expandSecrets(d *Document) []Problem {
	var ps []Problem
	expand := func(ptr, v string) string {
		return envReference.ReplaceAllStringFunc(v, func(ref string) string {
			m := envReference.FindStringSubmatch(ref)
			name, bare := m[1], m[2]
			switch {
			case ref == "$$":
				return "$"
			case bare != "":
				ps = append(ps, Problem{Doc: *d, Pointer: ptr, Message: fmt.Sprintf("$%s is sent as written: write ${%s} for the environment variable, or $$%s for a literal $", bare, bare, bare)})
				return ref
			}
			val, ok := os.LookupEnv(name)
			switch {
			case !ok:
				ps = append(ps, Problem{Doc: *d, Pointer: ptr, Message: fmt.Sprintf("${%s} is not set in the environment", name)})
			case strings.TrimSpace(val) == "":
				// A CI system expands a missing secret to nothing: an
				// empty signing secret would turn signing off.
				ps = append(ps, Problem{Doc: *d, Pointer: ptr, Message: fmt.Sprintf("${%s} is empty in the environment", name)})
			}
			return val
		})
	}
	for _, key := range []string{"url", "signing_secret"} {
		if v, ok := d.Body[key].(string); ok {
			d.Body[key] = expand("/"+key, v)
		}
	}
	if h, ok := d.Body["headers"].(map[string]any); ok {
		for _, name := range slices.Sorted(maps.Keys(h)) {
			if v, ok := h[name].(string); ok {
				h[name] = expand(jsontree.Pointer("/headers", name), v)
			}
		}
	}
	return ps
}

// check validates a document locally with the server's own rules where
// they need nothing but the document.
func check(d Document) []Problem {
	js, _ := json.Marshal(d.Body)
	var ps []Problem
	add := func(vs []contracts.Violation) {
		for _, v := range vs {
			ps = append(ps, Problem{Doc: d, Pointer: v.Path, Message: v.Message})
		}
	}
	switch d.Kind {
	case KindDefinition:
		_, vs := contracts.ParseWorking(js)
		add(vs)
	case KindProcess:
		_, vs := process.Parse(js)
		add(vs)
	case KindRelease:
		// The client sends revision and notes only: any other key would
		// be dropped without a word.
		ps = append(ps, unknownKeys(d, releaseKeys)...)
		if n, ok := d.Body["notes"]; ok && !isString(n) {
			ps = append(ps, Problem{Doc: d, Pointer: "/notes", Message: "must be a string"})
		}
		if r, ok := d.Body["revision"]; !ok || r == nil {
			ps = append(ps, Problem{Doc: d, Pointer: "/revision", Message: "is required"})
		} else if _, isNum := revisionNumber(r); !isNum {
			ps = append(ps, Problem{Doc: d, Pointer: "/revision", Message: fmt.Sprintf("must be a revision number (1 or more), not %s", describe(r))})
		}
	case KindDestination:
		ps = append(ps, checkDestination(d)...)
	}
	return ps
}

// releaseKeys are the keys of a Release's body (definition and name are
// its envelope).
var releaseKeys = map[string]bool{"revision": true, "notes": true}

// destinationKeys are the keys of a Destination's body, as
// PUT /destinations/{name} takes them.
var destinationKeys = map[string]bool{"url": true, "headers": true, "max_timeout": true, "signing_secret": true}

// checkDestination checks a Destination's keys and their types locally, in
// the words the contract and process checks use: the server's decoder names
// only the first unknown key ("unknown field"), and only when the
// document's turn comes, after others were applied.
func checkDestination(d Document) []Problem {
	var ps []Problem
	add := func(ptr, format string, args ...any) {
		ps = append(ps, Problem{Doc: d, Pointer: ptr, Message: fmt.Sprintf(format, args...)})
	}
	ps = append(ps, unknownKeys(d, destinationKeys)...)
	switch u, ok := d.Body["url"]; {
	case !ok:
		add("/url", "is required")
	case !isString(u):
		add("/url", "must be a string")
	}
	// An empty `headers:` (YAML null) means none, as the server reads it.
	if h, ok := d.Body["headers"]; ok && h != nil {
		headers, isMap := h.(map[string]any)
		if !isMap {
			add("/headers", "must be a mapping of header names to values")
		}
		names := make([]string, 0, len(headers))
		for name := range headers {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if !isString(headers[name]) {
				add(jsontree.Pointer("/headers", name), "must be a string")
			}
		}
	}
	if v, ok := d.Body["signing_secret"]; ok && v != nil && !isString(v) {
		add("/signing_secret", "must be a string")
	}
	const wantTimeout = "an ISO-8601 duration from %s to %s"
	floor, ceiling := isoduration.Format(process.MinPushTimeout), isoduration.Format(process.HardMaxPushTimeout)
	t, ok := d.Body["max_timeout"]
	if !ok {
		add("/max_timeout", "is required ("+wantTimeout+")", floor, ceiling)
		return ps
	}
	s, _ := t.(string)
	if v, err := isoduration.Parse(s); err != nil || v < process.MinPushTimeout || v > process.HardMaxPushTimeout {
		add("/max_timeout", "must be "+wantTimeout, floor, ceiling)
	}
	return ps
}

// unknownKeys refuses the keys of d's body that are not allowed, in name
// order (the body is a map: the file's order is gone).
func unknownKeys(d Document, allowed map[string]bool) []Problem {
	keys := make([]string, 0, len(d.Body))
	for k := range d.Body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known := slices.Sorted(maps.Keys(allowed))
	var ps []Problem
	for _, k := range keys {
		if !allowed[k] {
			ps = append(ps, Problem{Doc: d, Pointer: jsontree.Pointer("", k), Message: fmt.Sprintf("unknown key %q", k) + suggest.Hint(k, known)})
		}
	}
	return ps
}

// revisionNumber reads a revision: a whole number from 1.
func revisionNumber(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil || i < 1 || i > math.MaxInt32 {
		return 0, false
	}
	return int(i), true
}

// typeOf names the JSON type of a decoded value, as problems say it.
func typeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// describe is a value as a problem quotes it: a scalar as written, or its
// type.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case json.Number:
		return v.String()
	case nil:
		return "null"
	}
	return typeOf(v)
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}
