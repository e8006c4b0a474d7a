package apply

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadOrdersKindsAndKeepsYAMLStrings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "a.yaml", `kind: Process
key: p_one
inputs: {fields: []}
start: done
nodes: {done: {kind: end}}
---
# a comment-only document is skipped
---
kind: Definition
key: consent
name: Consent
inputs:
  fields:
    - {name: answer, type: choice, required: true, values: [yes, no, on, off]}
    - {name: quarter, type: choice, description: 2026-01-01, values: [2026-01-01, 2026-04-01 10:00:00, !!timestamp 2026-07-01]}
outputs: {fields: []}
`)
	write(t, dir, "b.json", `{"kind": "Destination", "name": "d", "url": "https://example.com", "max_timeout": "PT1S"}`)
	docs, problems, err := Load(dir)
	if err != nil || len(problems) > 0 {
		t.Fatalf("load: %v %v", err, problems)
	}
	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, d.Kind)
	}
	if got := strings.Join(kinds, ","); got != "Destination,Definition,Process" {
		t.Errorf("apply order %s", got)
	}
	values := docs[1].Body["inputs"].(map[string]any)["fields"].([]any)[0].(map[string]any)["values"].([]any)
	if len(values) != 4 || values[0] != "yes" || values[3] != "off" {
		t.Errorf("choice values %v; want the strings yes, no, on, off", values)
	}
	// YAML 1.2 has no timestamps: a date is the text written, never a
	// date-time (designer QA: 2026-01-01 became 2026-01-01T00:00:00Z).
	quarter := docs[1].Body["inputs"].(map[string]any)["fields"].([]any)[1].(map[string]any)
	if got := fmt.Sprint(quarter["description"], quarter["values"]); got != "2026-01-01[2026-01-01 2026-04-01 10:00:00 2026-07-01]" {
		t.Errorf("dates read as %s; want the strings written", got)
	}
	if !docs[1].Multi || docs[1].Index != 2 {
		t.Errorf("document position %d (multi %v); want 2 in a multi-document file", docs[1].Index, docs[1].Multi)
	}
}

func TestLoadReportsFilePointerMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := write(t, dir, "bad.yaml", `kind: Definiton
key: x
`)
	q := write(t, dir, "worse.yaml", `kind: Definition
key: broken
name: Broken
inputs: {fields: [{name: a, type: text, max_items: 3}]}
outputs: {fields: []}
`)
	_, problems, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, pr := range problems {
		lines = append(lines, pr.String())
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{p + `:1: /kind: unknown kind "Definiton" (Definition, Release, Process or Destination) (did you mean "Definition"?)`, q + ":4: /inputs/fields/0/max_items: "} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

// TestLoadChecksDestinationKeys: a Destination's unknown keys and wrongly
// typed values are found before anything is sent, worded as for the other
// kinds.
func TestLoadChecksDestinationKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := write(t, dir, "destinations.yaml", `kind: Destination
name: scoring
url: https://scoring.example.com/score
header:
  Authorization: Bearer x
max_timeout: PT5S
---
kind: Destination
name: payments
url: https://payments.example.com/charge
timeout: PT5S
---
kind: Destination
name: typed
url: 3
headers: {X-Count: 3}
max_timeout: PT11S
---
kind: Destination
name: fine
url: https://fine.example.com/
headers: {Authorization: Bearer y}
max_timeout: PT10S
---
kind: Destination
name: bare
url: https://bare.example.com/
headers:
max_timeout: PT1S
`)
	got := problemLines(t, p)
	want := []string{
		`4: /header: unknown key "header" (did you mean "headers"?)`,
		// A missing member is placed at its document's first line; a
		// document's problems go in line order.
		`8: /max_timeout: is required (an ISO-8601 duration from PT0.1S to PT10S)`,
		`11: /timeout: unknown key "timeout"`,
		`15: /url: must be a string`,
		`16: /headers/X-Count: must be a string`,
		`17: /max_timeout: must be an ISO-8601 duration from PT0.1S to PT10S`,
	}
	sameProblems(t, got, want)
}

// TestLoadChecksReleaseKeys: a Release's misspelt key is refused, not
// dropped on the way to the server.
func TestLoadChecksReleaseKeys(t *testing.T) {
	t.Parallel()
	p := write(t, t.TempDir(), "release.yaml", `kind: Release
definition: add_company_to_crm
name: "2026.12"
revision: 1
note: The notes of this release.
---
kind: Release
definition: add_company_to_crm
name: "2026.13"
revision: 1
notes: [not, text]
`)
	got := problemLines(t, p)
	want := []string{`5: /note: unknown key "note" (did you mean "notes"?)`, `11: /notes: must be a string`}
	sameProblems(t, got, want)
}

// A misspelt envelope key (key, kind) is suggested where it is missing:
// the envelope's keys are taken out of the body before its check, whose
// candidates lacked them, and a document without a kind has no body
// checked at all (designer QA).
func TestLoadSuggestsMisspeltEnvelopeKeys(t *testing.T) {
	t.Parallel()
	p := write(t, t.TempDir(), "docs.yaml", `kind: Definition
kee: loans.notify
name: Notify
inputs: {fields: []}
outputs: {fields: []}
---
kin: Process
key: p
---
kind: Destination
name: d
ur: https://example.com
max_timeout: PT1S
`)
	got := problemLines(t, p)
	// "ur" is one edit from the url it lacks: short as it is, a typo.
	want := []string{`1: /key: is required`, `2: /kee: unknown key "kee" (did you mean "key"?)`,
		`7: /kind: is required (Definition, Release, Process or Destination); found "kin" (did you mean "kind"?)`,
		`10: /url: is required`, `12: /ur: unknown key "ur" (did you mean "url"?)`}
	sameProblems(t, got, want)
}

// A YAML number to quote is quoted as the file writes it, not as YAML
// reads it: 010 is octal 8 and 0x1F is 31 to the parser, and a
// zero-padded code quoted as read would become another value (verifier
// QA).
func TestQuoteHintsQuoteTheSource(t *testing.T) {
	t.Parallel()
	p := write(t, t.TempDir(), "codes.yaml", `kind: Definition
key: d
name: D
inputs:
  fields:
    - name: c
      type: choice
      values: [010, 0x1F, 1.10]
outputs: {fields: []}
---
kind: Release
definition: d
name: 07
revision: 1
`)
	got := problemLines(t, p)
	want := []string{
		`8: /inputs/fields/0/values/0: choice value must be a string, not number (quote it: "010")`,
		`8: /inputs/fields/0/values/1: choice value must be a string, not number (quote it: "0x1F")`,
		`8: /inputs/fields/0/values/2: choice value must be a string, not number (quote it: "1.10")`,
		`13: /name: must be a string, not a number (quote it: "07")`}
	sameProblems(t, got, want)
}

// TestLoadReadsEveryPath: several paths are one set, in apply order
// across them; a file named twice (itself and through its folder) is read
// once, and an empty path among them is refused by name.
func TestLoadReadsEveryPath(t *testing.T) {
	t.Parallel()
	procs := t.TempDir()
	proc := write(t, procs, "p.yaml", "kind: Process\nkey: p_one\ninputs: {fields: []}\nstart: done\nnodes: {done: {kind: end}}\n")
	def := write(t, t.TempDir(), "d.yaml", "kind: Definition\nkey: consent\nname: Consent\ninputs: {fields: []}\noutputs: {fields: []}\n")
	docs, problems, err := Load(proc, def, procs)
	if err != nil || len(problems) > 0 {
		t.Fatalf("load: %v %v", err, problems)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Name())
	}
	if strings.Join(got, ", ") != "definition consent, process p_one" {
		t.Errorf("documents %q; want the definition then the process, each once", got)
	}
	empty := t.TempDir()
	if _, _, err := Load(def, empty); err == nil || !strings.Contains(err.Error(), "no documents found in "+empty) {
		t.Errorf("an empty second path: err %v", err)
	}
	// The same document in two files is a problem, not two revisions.
	copied := write(t, t.TempDir(), "copy.yaml", "# the same definition\nkind: Definition\nkey: consent\nname: Consent, again\ninputs: {fields: []}\noutputs: {fields: []}\n")
	_, problems, err = Load(def, copied)
	if want := copied + ":2: /: definition consent is also defined at " + def + ":1: each document may appear once in what is applied"; err != nil || len(problems) != 1 || problems[0].String() != want {
		t.Errorf("a document twice: %v, %v; want %q", problems, err, want)
	}
}

// TestLoadRefusesAPathWithoutDocuments: a folder or file with nothing to
// apply is an error naming the path, as kubectl apply has it, not a
// silent success.
func TestLoadRefusesAPathWithoutDocuments(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	other := t.TempDir()
	write(t, other, "README.md", "# not a document\n")
	blank := t.TempDir()
	write(t, blank, "a.yaml", "")
	write(t, blank, "b.yml", "# only a comment\n---\n")
	emptyFile := write(t, t.TempDir(), "empty.yaml", "")
	tools := t.TempDir()
	write(t, tools, "package.json", "{}\n")
	write(t, tools, "buf.gen.yaml", "version: v2\n")
	write(t, tools, "sqlc.yaml", "version: \"2\"\n")
	write(t, tools, ".gitlab-ci.yml", "stages: []\n")
	for _, c := range []struct{ path, want string }{
		// Not "holds no .yaml" of a folder that shows some (evaluator QA).
		{tools, "no documents found in " + tools + ": its only .yaml, .yml or .json files are other tools' (buf.gen.yaml, package.json, sqlc.yaml), which apply skips"},
		{empty, "no documents found in " + empty + ": it holds no .yaml, .yml or .json file"},
		{other, "no documents found in " + other + ": it holds no .yaml, .yml or .json file"},
		{blank, "no documents found in " + blank + ": only empty documents or comments"},
		{emptyFile, "no documents found in " + emptyFile + ": only empty documents or comments"},
	} {
		docs, problems, err := Load(c.path)
		if err == nil || err.Error() != c.want {
			t.Errorf("Load(%s): %d documents, problems %v, err %v; want %q", c.path, len(docs), problems, err, c.want)
		}
	}
}

// problemLines loads path and returns its problems as they are printed,
// without the path and colon that start each (the line number stays).
// sameProblems fails t unless got lists want's problems, in order.
func sameProblems(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func problemLines(t *testing.T, path string) []string {
	t.Helper()
	_, problems, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pr := range problems {
		got = append(got, strings.TrimPrefix(pr.String(), path+":"))
	}
	return got
}

// TestProblemsCarryTheirFileLine: a problem is printed at its line in the
// file, counted from the file's start in every document of it, including
// the parser's own errors, so that an editor can jump to it.
func TestProblemsCarryTheirFileLine(t *testing.T) {
	t.Parallel()
	p := write(t, t.TempDir(), "two.yaml", `# A comment line first.
kind: Destination
name: fine
url: https://fine.example.com/
max_timeout: PT1S
---
kind: Destination
name: broken
url: [unclosed
max_timeout: PT1S
`)
	got := problemLines(t, p)
	// yaml.v3 places this error a line above the unclosed list (line 2 of
	// the document alone): line 8 of the file, not 2, where an editor
	// jumps ("file:8:").
	if len(got) != 1 || got[0] != "8: /: not valid YAML: did not find expected ',' or ']'" {
		t.Errorf("a syntax error in the second document: %q, want it at the file's line 8", got)
	}

	// Pointers through sequences, flow mappings, escaped members and
	// aliases; a pointer past the document stops at its deepest member.
	doc := Document{File: "f.yaml"}
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(`kind: Process
key: p
nodes:
  crm:
    inputs:
      a/b: x
    list:
      - one
      - {two: 2}
base: &base
  deep: 1
other: *base
merged:
  <<: *base
  own: 2
`), &node); err != nil {
		t.Fatal(err)
	}
	doc.node = &node
	for _, tc := range []struct {
		pointer string
		want    string
	}{
		{"", "f.yaml:1: /: m"},
		{"/nodes/crm", "f.yaml:4: /nodes/crm: m"},
		{"/nodes/crm/inputs/a~1b", "f.yaml:6: /nodes/crm/inputs/a~1b: m"},
		{"/nodes/crm/list/1/two", "f.yaml:9: /nodes/crm/list/1/two: m"},
		{"/nodes/crm/list/7", "f.yaml:7: /nodes/crm/list/7: m"},
		{"/nodes/crm/missing/deeper", "f.yaml:4: /nodes/crm/missing/deeper: m"},
		{"/other/deep", "f.yaml:11: /other/deep: m"},
		{"/key/below/a/scalar", "f.yaml:2: /key/below/a/scalar: m"},
		{"/merged/deep", "f.yaml:11: /merged/deep: m"},
		{"/merged/own", "f.yaml:15: /merged/own: m"},
		// Not a pointer: no line rather than a wrong one.
		{"nodes", "f.yaml: nodes: m"},
	} {
		if got := (Problem{Doc: doc, Pointer: tc.pointer, Message: "m"}).String(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.pointer, got, tc.want)
		}
	}
}

// TestLoadNamesAValueOfTheWrongType: a value YAML read as a number (an
// unquoted release name) or a string (a quoted revision) is there, of the
// wrong type: it is not called missing, and a malformed revision is a
// problem, not a crash.
func TestLoadNamesAValueOfTheWrongType(t *testing.T) {
	t.Parallel()
	p := write(t, t.TempDir(), "docs.yaml", `kind: Release
definition: add_company_to_crm
name: 2027.01
revision: "4"
---
kind: Process
key: 42
start: s
inputs: {fields: []}
nodes: {s: {kind: end}}
---
kind: Definition
key: probe
name: Probe
revision: "1"
inputs: {fields: []}
outputs: {fields: []}
---
kind: Definition
key: probe_two
name: Probe
revision:
inputs: {fields: []}
outputs: {fields: []}
---
kind: Definition
key: probe_three
name: Probe
revision: 1.5
inputs: {fields: []}
outputs: {fields: []}
---
kind: Release
definition: add_company_to_crm
revision: 1
---
kind: Process
key: p
version: "2"
start: s
inputs: {fields: []}
nodes: {s: {kind: end}}
`)
	got := problemLines(t, p)
	want := []string{
		`3: /name: must be a string, not a number (quote it: "2027.01")`,
		`4: /revision: must be a revision number (1 or more), not "4"`,
		`7: /key: must be a string, not a number (quote it: "42")`,
		`15: /revision: must be a revision number (1 or more), not "1"`,
		`22: /revision: must be a revision number (1 or more), not null`,
		`29: /revision: must be a revision number (1 or more), not 1.5`,
		`33: /name: is required`,
		`39: /version: must be a version number (1 or more), not "2"`,
	}
	sameProblems(t, got, want)
}

// TestLoadSyntaxProblems: a document that does not parse is reported at
// its line, with a hint for the YAML mistakes designers make most; a .json
// file must be JSON (the YAML parser would take a trailing comma the API
// refuses).
func TestLoadSyntaxProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, c := range map[string]struct{ body, want string }{
		"alias.yaml": {"kind: Process\nkey: p\non_error:\n  *: failed\n",
			`4: /: not valid YAML: did not find expected alphabetic or numeric character (a key or value starting with * or & is an alias or an anchor in YAML: quote it, as "*")`},
		// The tab's own line, where the parser names the line before it.
		"tab.yaml": {"kind: Definition\nkey: d\ninputs:\n  fields:\n    - name: a\n\t  type: text\n",
			`6: /: not valid YAML: found a tab character that violates indentation (YAML indents with spaces, never tabs)`},
		// The line indented one space off, where the parser names the
		// line its block began.
		"indent.yaml": {"kind: Definition\nkey: d\ninputs:\n  fields:\n    - name: a\n      type: text\n     - name: b\n      type: text\n",
			`7: /: not valid YAML: did not find expected '-' indicator (this line is indented unlike its neighbours in the block that starts at line 4: align it with its siblings, or under the key it belongs to)`},
		"indent-key.yaml": {"kind: Definition\nkey: d\ninputs:\n  fields:\n    - name: a\n      type: text\n    - name: b\n     type: text\n",
			`8: /: not valid YAML: did not find expected '-' indicator (this line is indented unlike its neighbours in the block that starts at line 4: align it with its siblings, or under the key it belongs to)`},
		// A key indented one space deeper than the one before it, whose
		// value it would continue (designer QA: no hint), in a mapping
		// and in a list's item.
		"indent-deeper.yaml": {"kind: Process\nkey: p\nnodes:\n  crm:\n    kind: pull\n     definition: x\n",
			`6: /: not valid YAML: mapping values are not allowed in this context (this line is indented deeper than line 5, so it reads as the rest of that line's value: align it with its siblings)`},
		"indent-deeper-item.yaml": {"kind: Definition\nkey: d\ninputs:\n  fields:\n    - name: a\n\n       type: text\n",
			`7: /: not valid YAML: mapping values are not allowed in this context (this line is indented deeper than line 5, so it reads as the rest of that line's value: align it with its siblings)`},
		// A flow list and a quoted string over two lines before the
		// slip: a prefix ending inside them is no slip.
		"indent-flow.yaml": {"kind: Definition\nkey: d\ninputs:\n  fields:\n    - name: a\n      type: choice\n      values: [FR, DE,\n               IT]\n    - {name: b,\n       type: text}\n    - name: c\n      type: text\n      pattern: '^a\n        b$'\n     - name: d\n",
			`15: /: not valid YAML: did not find expected '-' indicator (this line is indented unlike its neighbours in the block that starts at line 4: align it with its siblings, or under the key it belongs to)`},
		"escape.yaml": {"kind: Definition\nkey: d\npattern: \"^CLM-\\d{8}$\"\n",
			`3: /: not valid YAML: found unknown escape character (in double quotes a backslash starts an escape: write a pattern in single quotes, as '^CLM-\d{8}$')`},
		"backspace.yaml": {"kind: Definition\nkey: d\npattern: \"\\bACME\\b\"\n",
			`3: /pattern: "\bACME\b" holds the control character U+0008 (in double quotes a backslash starts an escape: write a pattern in single quotes, or double the backslash, as \\b for a word boundary)`},
		"backspace.json": {"{\"kind\": \"Release\", \"definition\": \"d\",\n \"name\": \"a\\b\", \"revision\": 1}\n",
			`2: /name: "a\b" holds the control character U+0008 (in JSON a backslash starts an escape: double it, as \\b for a word boundary)`},
		// A destination's URL and headers carry credentials: never
		// printed into a CI log.
		"header.yaml": {"kind: Destination\nname: d\nurl: https://example.com\nmax_timeout: PT1S\nheaders:\n  X-Bad: \"bad\\u0001 SECRET\"\n",
			`6: /headers/X-Bad: the value holds the control character U+0001 (HTTP cannot send it; in double quotes a backslash starts an escape)`},
		// Whatever the kind says: a misspelt kind is still a destination
		// to its author.
		"header-typo.yaml": {"kind: Destinaton\nname: d\nheaders:\n  X-A: \"s\\u0001 SECRET\"\n",
			`4: /headers/X-A: the value holds the control character U+0001 (HTTP cannot send it; in double quotes a backslash starts an escape)`},
		// A document that is no mapping at all is a problem, not a panic.
		"list.json":   {"[1, 2]\n", `1: /: a document must be a mapping with a kind`},
		"list.yaml":   {"- a\n- b\n", `1: /: a document must be a mapping with a kind`},
		"scalar.yaml": {"just words\n", `1: /: a document must be a mapping with a kind`},
		// At its own line and pointer, not the document's first line.
		"nan.yaml": {"kind: Definition\nkey: d\nx: .nan\n", `3: /x: .nan is a number JSON cannot hold: write a finite number that fits, or quote it (".nan") for a string`},
		"inf.yaml": {"kind: Definition\nkey: d\nfields:\n  a:\n    enum: [1, -.Inf]\n", `5: /fields/a/enum/1: -.Inf is a number JSON cannot hold: write a finite number that fits, or quote it ("-.Inf") for a string`},
		// Too large for YAML's types, it was read as a string (verifier QA).
		"huge.yaml": {"kind: Definition\nkey: d\nx:\n  max_length: 0x7FFFFFFFFFFFFFFFFFFF\n", `4: /x/max_length: 0x7FFFFFFFFFFFFFFFFFFF is a number too large to hold: write a finite number that fits, or quote it ("0x7FFFFFFFFFFFFFFFFFFF") for a string`},
		"duplicate.yaml": {"kind: Definition\nkey: d\nname: one\nname: two\n",
			`4: /: not valid YAML: mapping key "name" already defined at line 3`},
		"duplicate.json": {"{\"kind\": \"Definition\",\n \"key\": \"d\",\n \"key\": \"e\"}\n",
			`3: /: not valid JSON: key "key" already defined at line 2`},
		"comma.json": {"{\n  \"kind\": \"Definition\",\n  \"key\": \"d\",\n}\n",
			`3: /: not valid JSON: invalid character '}' looking for beginning of object key string (a trailing comma before it: JSON allows none)`},
	} {
		p := write(t, dir, name, c.body)
		if got := problemLines(t, p); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: %q\nwant %q", name, got, c.want)
		}
	}
	// A number JSON holds, too large for YAML's types, is judged with the
	// rest of the document, not before it (designer QA: minimum 1e400 hid
	// a bad field name).
	huge := write(t, dir, "e400.yaml", "kind: Definition\nkey: d\nname: D\ninputs:\n  fields:\n    - {name: amount, type: number, minimum: 1e400}\n    - {name: Bad Name, type: text}\noutputs:\n  fields: []\n")
	if got := problemLines(t, huge); len(got) != 2 || !strings.HasSuffix(got[0], "6: /inputs/fields/0/minimum: minimum 1e400 is out of range: 0, or a magnitude from 1e-40 to below 1e41") || !strings.Contains(got[1], "7: /inputs/fields/1/name: ") {
		t.Errorf("minimum 1e400 beside a bad name: %q", got)
	}
	// A long file, its slip near the end, in a second document: found at
	// its own line (by a search of a few parses, not one per line).
	var long strings.Builder
	long.WriteString("kind: Release\ndefinition: d\nname: a\nrevision: 1\n---\nkind: Definition\nkey: d\ninputs:\n  fields:\n")
	for i := range 3000 {
		fmt.Fprintf(&long, "    - name: f%d\n      type: text\n", i)
	}
	long.WriteString("     - name: slip\n      type: text\n")
	want := `6010: /: not valid YAML: did not find expected '-' indicator (this line is indented unlike its neighbours in the block that starts at line 9: align it with its siblings, or under the key it belongs to)`
	if got := problemLines(t, write(t, dir, "long.yaml", long.String())); len(got) != 1 || !strings.HasSuffix(got[0], want) {
		t.Errorf("a long file: %q\nwant one ending %q", got, want)
	}
	// A long flow list before the slip: the search's prefixes that end
	// inside it fail for a reason of their own, which is no slip.
	long.Reset()
	long.WriteString("kind: Definition\nkey: d\ninputs:\n  fields:\n    - name: a\n      type: choice\n      values: [\n")
	for i := range 200 {
		fmt.Fprintf(&long, "        V%d,\n", i)
	}
	long.WriteString("        W]\n    - name: b\n      type: text\n     - name: slip\n")
	want = `211: /: not valid YAML: did not find expected '-' indicator (this line is indented unlike its neighbours in the block that starts at line 4: align it with its siblings, or under the key it belongs to)`
	if got := problemLines(t, write(t, dir, "flow.yaml", long.String())); len(got) != 1 || !strings.HasSuffix(got[0], want) {
		t.Errorf("a long flow list before the slip: %q\nwant one ending %q", got, want)
	}
}

// TestLoadSkipsOtherToolsFiles: a folder's walk leaves out the files other
// tools keep beside documents (a Node.js worker's package.json, its
// node_modules, buf.gen.yaml, hidden files and folders, a CI's or a bot's
// configuration); a file named on its own is
// read whatever its name.
func TestLoadSkipsOtherToolsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "release.yaml", "kind: Release\ndefinition: d\nname: \"1\"\nrevision: 1\n")
	write(t, dir, "package.json", `{"name": "worker"}`)
	write(t, dir, "buf.gen.yaml", "version: v2\n")
	// A repository root's CI and bot files.
	write(t, dir, ".gitlab-ci.yml", "stages: [apply]\n")
	write(t, dir, ".yamllint.yaml", "extends: default\n")
	write(t, dir, "renovate.json", `{"extends": ["config:base"]}`)
	for _, sub := range []string{"node_modules/pkg", ".github"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, sub), "x.yaml", "name: not a document\n")
	}
	docs, problems, err := Load(dir)
	if err != nil || len(problems) != 0 || len(docs) != 1 || docs[0].Kind != KindRelease {
		t.Errorf("Load(folder) = %d docs, problems %v, %v; want the release alone", len(docs), problems, err)
	}
	if _, problems, _ := Load(filepath.Join(dir, "package.json")); len(problems) != 1 {
		t.Errorf("package.json named on its own: %v; want it read (and refused: no kind)", problems)
	}
}

// Numbers reach the API as written, every digit kept: decoded into Go's
// float64, a contract's bounds were rounded (0.1000000000000000000001
// became 0.1, a stricter maximum) before the API, which keeps them
// exactly, saw them. YAML's merge keys still merge.
func TestLoadKeepsNumbersAsWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "d.yaml", `kind: Definition
key: d
name: D
x-defaults: &bounds
  minimum: 12345678901234567890.123
inputs:
  fields:
    - name: a
      type: number
      maximum: 0.1000000000000000000001
    - name: b
      type: number
      <<: *bounds
outputs:
  fields: []
`)
	write(t, dir, "e.json", `{"kind": "Definition", "key": "e", "name": "E", "inputs": {"fields": [{"name": "a", "type": "number", "maximum": 1e-7}]}, "outputs": {"fields": []}}`)
	docs, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, d := range docs {
		b, _ := json.Marshal(d.Body)
		all = append(all, string(b))
	}
	got := strings.Join(all, "\n")
	for _, want := range []string{`"maximum":0.1000000000000000000001`, `"minimum":12345678901234567890.123`, `"maximum":1e-7`} {
		if !strings.Contains(got, want) {
			t.Errorf("bodies %s\nwant %s in them", got, want)
		}
	}
}

// TestDestinationSecretsComeFromTheEnvironment: a destination's url,
// header values and signing secret may name environment variables
// (${NAME}), so that the files kept in git hold no credential; an unset
// one is a problem at its line, named, not an empty value sent.
func TestDestinationSecretsComeFromTheEnvironment(t *testing.T) {
	t.Setenv("RELAIS_TEST_HOOK_TOKEN", "tok-123")
	t.Setenv("RELAIS_TEST_SIGNING", "sign-secret-0123456789abcdefghijklmn")
	dir := t.TempDir()
	p := write(t, dir, "dest.yaml", "kind: Destination\nname: d\nurl: https://example.com/hook?key=${RELAIS_TEST_HOOK_TOKEN}\nmax_timeout: PT1S\n"+
		"signing_secret: ${RELAIS_TEST_SIGNING}\nheaders:\n  Authorization: Bearer ${RELAIS_TEST_HOOK_TOKEN}\n  X-Literal: $$HOME, $2a$10 and ${not a name}\n")
	docs, problems, err := Load(p)
	if err != nil || len(problems) != 0 || len(docs) != 1 {
		t.Fatalf("Load: %v %v %d documents", err, problems, len(docs))
	}
	b := docs[0].Body
	headers := b["headers"].(map[string]any)
	if b["url"] != "https://example.com/hook?key=tok-123" || b["signing_secret"] != "sign-secret-0123456789abcdefghijklmn" ||
		headers["Authorization"] != "Bearer tok-123" || headers["X-Literal"] != "$HOME, $2a$10 and ${not a name}" {
		t.Errorf("body %v, want the variables expanded and nothing else", b)
	}

	unset := write(t, dir, "unset.yaml", "kind: Destination\nname: d\nurl: https://example.com\nmax_timeout: PT1S\nheaders:\n  X-Key: ${RELAIS_TEST_NOT_SET}\n")
	if got, want := problemLines(t, unset), []string{"6: /headers/X-Key: ${RELAIS_TEST_NOT_SET} is not set in the environment"}; !slices.Equal(got, want) {
		t.Errorf("an unset variable: %q, want %q", got, want)
	}
	// A CI system expands a missing secret to nothing; Compose users
	// write $NAME.
	t.Setenv("RELAIS_TEST_EMPTY", "")
	empty := write(t, dir, "empty.yaml", "kind: Destination\nname: d\nurl: https://example.com\nmax_timeout: PT1S\nsigning_secret: ${RELAIS_TEST_EMPTY}\nheaders:\n  X-Key: Bearer $RELAIS_TEST_HOOK_TOKEN\n")
	if got, want := problemLines(t, empty), []string{
		"5: /signing_secret: ${RELAIS_TEST_EMPTY} is empty in the environment",
		"7: /headers/X-Key: $RELAIS_TEST_HOOK_TOKEN is sent as written: write ${RELAIS_TEST_HOOK_TOKEN} for the environment variable, or $$RELAIS_TEST_HOOK_TOKEN for a literal $",
	}; !slices.Equal(got, want) {
		t.Errorf("an empty variable and a bare one: %q, want %q", got, want)
	}
	// Other documents are left as written.
	proc := write(t, dir, "p.yaml", "kind: Process\nkey: p\ndescription: costs ${RELAIS_TEST_HOOK_TOKEN}\n")
	if docs, _, _ := Load(proc); len(docs) != 1 || docs[0].Body["description"] != "costs ${RELAIS_TEST_HOOK_TOKEN}" {
		t.Errorf("a process document was expanded: %v", docs)
	}
}
