package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relais/relais/internal/dbtest"
)

// testDataKeys is a fixed key for tests on external databases.
const testDataKeys = "t1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func applyRun(t *testing.T, base string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"RELAIS_URL": base, "RELAIS_TOKEN": bootstrap}
	err := run(context.Background(), append([]string{"apply"}, args...), func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestApplyExamplesIsIdempotent(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})

	plan, _, err := applyRun(t, r.base, "-f", "../../examples", "--dry-run")
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for _, want := range []string{"definition add_company_to_crm: created (revision 1)", "process onboard_company: published (version 1", "destination payments: created"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	if res := call(t, "GET", r.base+"/api/v1/definitions", bootstrap, nil); strings.Contains(string(res.body), "add_company_to_crm") {
		t.Fatal("the dry run changed the server")
	}

	first, stderr, err := applyRun(t, r.base, "-f", "../../examples")
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	if !strings.HasSuffix(first, "\n8 document(s): 6 created, 2 published\n") {
		t.Errorf("first apply does not end with its count:\n%s", first)
	}
	if strings.Contains(first, "unchanged") {
		t.Errorf("first apply reports unchanged documents:\n%s", first)
	}
	second, _, err := applyRun(t, r.base, "-f", "../../examples")
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(second), "\n")
	if len(lines) != len(strings.Split(strings.TrimSpace(first), "\n")) {
		t.Errorf("second apply reports %d documents, first %d", len(lines), len(strings.Split(strings.TrimSpace(first), "\n")))
	}
	// Its last line sums it up.
	n := len(lines) - 1
	if want := fmt.Sprintf("%d document(s): %d unchanged", n, n); lines[n] != want {
		t.Errorf("second apply ends with %q, want %q", lines[n], want)
	}
	for _, l := range lines[:n] {
		if !strings.Contains(l, ": unchanged") {
			t.Errorf("second apply changed something: %q", l)
		}
	}

	// One apply raises a destination's max_timeout and a node's timeout
	// with it: the check before writing judges the node against the
	// destination as the apply leaves it, not as it is.
	dir := t.TempDir()
	dest := "kind: Destination\nname: scoring-api\nurl: http://127.0.0.1:9091/score\nmax_timeout: PT8S\n"
	proc, err := os.ReadFile("../../examples/processes/onboard_company.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raised := strings.Replace(string(proc), "timeout: PT3S", "timeout: PT8S", 1)
	if raised == string(proc) {
		t.Fatal("the example's push timeout moved: update this test")
	}
	for name, body := range map[string]string{"dest.yaml": dest, "proc.yaml": raised} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, plus := range [][]string{{"--dry-run"}, nil} {
		if out, stderr, err := applyRun(t, r.base, append([]string{"-f", dir}, plus...)...); err != nil || !strings.Contains(out, "process onboard_company: published (version 2") {
			t.Errorf("apply %v of a raised timeout with its destination: %v\n%s%s", plus, err, out, stderr)
		}
	}

	// Lowering it again says which published nodes it cuts short.
	lowered := t.TempDir()
	if err := os.WriteFile(filepath.Join(lowered, "dest.yaml"), []byte(strings.Replace(dest, "PT8S", "PT5S", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := applyRun(t, r.base, "-f", lowered, "--dry-run"); err != nil ||
		!strings.Contains(out, "destination scoring-api: updated (max_timeout PT5S would cut the calls of published onboard_company version 2 node score (PT8S) short)") {
		t.Errorf("a dry run lowering max_timeout under a published node's: %v\n%s%s", err, out, stderr)
	}

	// A destination document is the whole destination: one that lost its
	// headers says it removes them.
	bare := t.TempDir()
	if err := os.WriteFile(filepath.Join(bare, "payments.yaml"), []byte("kind: Destination\nname: payments\nurl: http://127.0.0.1:9092/charge\nmax_timeout: PT10S\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := applyRun(t, r.base, "-f", bare, "--dry-run"); err != nil || !strings.Contains(out, "destination payments: updated (would remove headers Authorization, which the document no longer holds)") {
		t.Errorf("a dry run dropping the destination's headers: %v\n%s%s", err, out, stderr)
	}
}

func TestApplyReportsFilePointerMessage(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`kind: Definition
key: broken
name: Broken
inputs:
  fields:
    - {name: a, type: texte}
outputs:
  fields: []
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := applyRun(t, r.base, "-f", bad)
	if err == nil || !strings.Contains(stderr, bad+":6: /inputs/fields/0/type: ") {
		t.Fatalf("err %v, stderr %q; want file:line: pointer: message", err, stderr)
	}
	// A process the server refuses (unknown revision) is reported the same way.
	proc := filepath.Join(dir, "proc.yaml")
	if err := os.WriteFile(proc, []byte(`kind: Process
key: lonely
inputs: {fields: []}
start: a
nodes:
  a: {kind: pull, definition: nowhere, revision: 3, next: done}
  done: {kind: end}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = applyRun(t, r.base, "-f", proc)
	// The server's refusal, placed at its line too.
	if err == nil || !strings.Contains(stderr, proc+":6: /nodes/a/definition: ") {
		t.Fatalf("err %v, stderr %q", err, stderr)
	}

	// A key the server refuses travels in the request's path: placed at
	// the document's key line all the same.
	badKey := filepath.Join(dir, "badkey.yaml")
	if err := os.WriteFile(badKey, []byte("# A process.\nkind: Process\nkey: Claim-Triage\ninputs: {fields: []}\nstart: done\nnodes:\n  done: {kind: end}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := applyRun(t, r.base, "-f", badKey); err == nil || !strings.Contains(stderr, badKey+":3: /key: process key \"Claim-Triage\" must match") {
		t.Errorf("a process key the server refuses: err %v, stderr %q; want it at line 3, /key", err, stderr)
	}

	// A dry run asks the server to check a process whose definitions exist,
	// and changes nothing.
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples/definitions"); err != nil {
		t.Fatalf("apply definitions: %v\n%s", err, stderr)
	}
	routes := filepath.Join(dir, "routes.yaml")
	if err := os.WriteFile(routes, []byte(`kind: Process
key: half_routed
inputs: {fields: [{name: company, type: text, required: true}]}
start: a
nodes:
  a:
    kind: pull
    definition: add_company_to_crm
    revision: 1
    inputs: {company_name: {from: input.company}, country: {value: FR}, source: {value: web}}
    routes: {created: done}
  done: {kind: end}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = applyRun(t, r.base, "-f", routes, "--dry-run")
	if err == nil || !strings.Contains(stderr, routes+":11: /nodes/a/routes: ") {
		t.Fatalf("dry run of a half-routed process: err %v, stderr %q", err, stderr)
	}
	if res := call(t, "GET", r.base+"/api/v1/processes/half_routed", bootstrap, nil); res.status != 404 {
		t.Errorf("the dry run stored the process: %d", res.status)
	}
}

// TestApplySummarySaysWhatWasApplied: a document the server would refuse
// stops the run before anything is written (the set is checked first, as
// a dry run), since a revision or a release left behind by a refusal
// halfway could never be taken back. When the server refuses at apply
// what the check passed (another client changed it in between), the
// summary names what was applied and what was not in the order apply
// uses, which is not the file's. Problems found locally apply nothing.
func TestApplySummarySaysWhatWasApplied(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
	dir := t.TempDir()
	file := filepath.Join(dir, "qa.yaml")
	set := `kind: Release
definition: qa_score
name: r1
revision: 7
---
kind: Process
key: qa_flow
inputs: {fields: []}
start: done
nodes: {done: {kind: end}}
---
kind: Definition
key: qa_score
name: QA score
inputs: {fields: []}
outputs: {fields: []}
`
	if err := os.WriteFile(file, []byte(set), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := applyRun(t, r.base, "-f", file)
	if err == nil || err.Error() != "1 problem(s) in release qa_score/r1; nothing was applied (the whole set is checked before any of it is)" ||
		!strings.Contains(stderr, file+":4: /revision: no such revision (qa_score has only revision 1)\n") {
		t.Errorf("a refused release: err %v, stderr:\n%s", err, stderr)
	}
	if res := call(t, "GET", r.base+"/api/v1/definitions/qa_score", bootstrap, nil); res.status != 404 {
		t.Errorf("definition qa_score: %d; nothing was to be applied", res.status)
	}

	// A name the server refuses is refused by the check too (it passed the
	// dry run, and the real run created the definition before the
	// server's refusal: designer QA).
	badName := strings.Replace(strings.Replace(set, "revision: 7", "revision: 1", 1), "name: r1", `name: "bad name/x"`, 1)
	if err := os.WriteFile(file, []byte(badName), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		args := []string{"-f", file}
		if dry {
			args = append(args, "--dry-run")
		}
		_, stderr, err := applyRun(t, r.base, args...)
		if err == nil || !strings.Contains(stderr, file+":3: /name: must be 1 to 64 letters") {
			t.Errorf("a bad release name (dry run %v): err %v, stderr:\n%s", dry, err, stderr)
		}
	}
	if res := call(t, "GET", r.base+"/api/v1/definitions/qa_score", bootstrap, nil); res.status != 404 {
		t.Errorf("definition qa_score: %d; nothing was to be applied", res.status)
	}
	if err := os.WriteFile(file, []byte(set), 0o600); err != nil {
		t.Fatal(err)
	}

	_, stderr, err = applyRun(t, r.base, "-f", file, "--dry-run")
	if err == nil || err.Error() != "1 problem(s) in release qa_score/r1; nothing was changed (dry run)" ||
		!strings.Contains(stderr, "checked (in apply order: destinations, definitions, releases, processes): definition qa_score\n") {
		t.Errorf("dry run: err %v, stderr:\n%s", err, stderr)
	}

	// The check passes; the server then refuses the process's publication.
	if err := os.WriteFile(file, []byte(strings.Replace(set, "revision: 7", "revision: 1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(r.base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == "POST" && req.URL.Path == "/api/v1/processes/qa_flow/versions" && req.URL.RawQuery == "" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"code":"conflict","detail":"changed meanwhile","status":409}`)
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(refusing.Close)
	_, stderr, err = applyRun(t, refusing.URL, "-f", file)
	for _, want := range []string{
		"applied (in apply order: destinations, definitions, releases, processes): definition qa_score, release qa_score/r1\n",
		"not applied: process qa_flow (refused)\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if want := "1 problem(s) in process qa_flow; 2 document(s) applied before it, 1 not applied"; err == nil || err.Error() != want {
		t.Errorf("error %v; want %q", err, want)
	}
	if res := call(t, "GET", r.base+"/api/v1/definitions/qa_score", bootstrap, nil); res.status != 200 {
		t.Errorf("definition qa_score: %d; the summary says it was applied", res.status)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: Definition\nkey: other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := applyRun(t, r.base, "-f", dir); err == nil || !strings.HasSuffix(err.Error(), "found before sending anything; nothing was applied") {
		t.Errorf("local problems: err %v", err)
	}
}

// TestApplyRefusesAnEmptyPath: an empty folder or file fails before
// anything is sent, naming the path.
func TestApplyRefusesAnEmptyPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Nothing listens there: nothing may be sent.
	stdout, _, err := applyRun(t, "http://127.0.0.1:1", "-f", dir)
	if want := "no documents found in " + dir + ": "; err == nil || !strings.HasPrefix(err.Error(), want) || stdout != "" {
		t.Errorf("apply -f %s: err %v, stdout %q; want an error starting %q", dir, err, stdout, want)
	}
}

// TestApplyRefusesAStrayPath: a second path without its -f would go
// unread while the run reports success; it is refused before anything is
// sent.
func TestApplyRefusesAStrayPath(t *testing.T) {
	t.Parallel()
	// Nothing listens there: nothing may be sent.
	stdout, _, err := applyRun(t, "http://127.0.0.1:1", "-f", "../../examples/definitions", "../../examples/processes")
	if want := `unexpected argument "../../examples/processes": give each file or folder with its own -f`; err == nil || !strings.HasPrefix(err.Error(), want) || stdout != "" {
		t.Errorf("err %v, stdout %q; want an error starting %q", err, stdout, want)
	}
	// Each -f is read (the last is empty: its refusal shows it was).
	empty := t.TempDir()
	stdout, _, err = applyRun(t, "http://127.0.0.1:1", "-f", "../../examples/definitions", "-f", empty)
	if want := "no documents found in " + empty; err == nil || !strings.HasPrefix(err.Error(), want) || stdout != "" {
		t.Errorf("-f twice: err %v, stdout %q; want an error starting %q", err, stdout, want)
	}
}

// A token the server refuses, or a server that does not answer, is
// reported once as what it is, before any document is sent, not as the
// first document's problem.
func TestApplyChecksTheTokenFirst(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
	var out, errOut bytes.Buffer
	env := map[string]string{"RELAIS_URL": r.base, "RELAIS_TOKEN": "rls_not-a-token"}
	err := run(context.Background(), []string{"apply", "-f", "../../examples", "--dry-run"}, func(k string) string { return env[k] }, &out, &errOut)
	if err == nil || !strings.HasPrefix(err.Error(), "RELAIS_TOKEN is refused by "+r.base) || errOut.Len() != 0 || out.Len() != 0 {
		t.Errorf("apply with a refused token: err %v, stdout %q, stderr %q; want one error naming RELAIS_TOKEN", err, out.String(), errOut.String())
	}
	// A secret file's trailing newline is taken off; a token with white
	// space inside is named as RELAIS_TOKEN's problem, not the URL's.
	env["RELAIS_TOKEN"] = bootstrap + "\n"
	if err := run(context.Background(), []string{"apply", "-f", "../../examples/definitions", "--dry-run"}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
		t.Errorf("apply with the token and a newline: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	env["RELAIS_TOKEN"] = "rls_ab\x01cd"
	if err := run(context.Background(), []string{"apply", "-f", "../../examples/definitions", "--dry-run"}, func(k string) string { return env[k] }, &out, &errOut); err == nil || !strings.HasPrefix(err.Error(), "RELAIS_TOKEN holds") {
		t.Errorf("apply with a control character in the token: %v, want RELAIS_TOKEN named", err)
	}
	// The usual slips in RELAIS_URL, said as such before anything is sent.
	for base, want := range map[string]string{
		r.base + "/api/v1":   "must be Relais's base URL, without /api/v1 (apply adds the paths it calls)",
		r.base + "/api/v1/":  "must be Relais's base URL, without /api/v1/",
		r.base + "/console/": "must be Relais's base URL, without /console/",
		// A gateway's own prefix is not the API's path: that URL is tried.
		"http://127.0.0.1:1/api/v1/relais": "RELAIS_URL http://127.0.0.1:1/api/v1/relais does not answer",
		"127.0.0.1:8080":                   "must be an absolute http or https URL, as http://127.0.0.1:8080",
		"relais.example/x":                 "must be an absolute http or https URL",
		"ftp://relais.local":               "must be an absolute http or https URL",
	} {
		if _, stderr, err := applyRun(t, base, "-f", "../../examples"); err == nil || !strings.Contains(err.Error(), want) || stderr != "" {
			t.Errorf("apply to RELAIS_URL %q: err %v, stderr %q; want %q", base, err, stderr, want)
		}
	}
	_, stderr, err := applyRun(t, "http://127.0.0.1:1", "-f", "../../examples")
	if err == nil || !strings.HasPrefix(err.Error(), "RELAIS_URL http://127.0.0.1:1 does not answer") || stderr != "" {
		t.Errorf("apply to a server that does not answer: err %v, stderr %q", err, stderr)
	}
	// A pipeline tells Relais's absence (retry later) from its documents'
	// problems by the exit status: 75 (EX_TEMPFAIL) against 1.
	var ec interface{ ExitCode() int }
	if !errors.As(err, &ec) || ec.ExitCode() != 75 {
		t.Errorf("apply to a server that does not answer: %v, want exit status 75", err)
	}
	if _, _, err := applyRun(t, r.base+"/api/v1", "-f", "../../examples"); errors.As(err, &ec) {
		t.Errorf("a misconfigured RELAIS_URL exits %d, want 1 (not worth a retry)", ec.ExitCode())
	}

	// A designer's token may not apply destinations: said of each, before
	// anything is sent, rather than at the first one after the documents
	// ahead of it were applied.
	res := call(t, "POST", r.base+"/api/v1/tokens", bootstrap, strings.NewReader(`{"name":"designer","role":"designer"}`))
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(res.body, &tok); err != nil || tok.Token == "" {
		t.Fatalf("designer token: %s", res.body)
	}
	out.Reset()
	errOut.Reset()
	env["RELAIS_TOKEN"] = tok.Token
	err = run(context.Background(), []string{"apply", "-f", "../../examples"}, func(k string) string { return env[k] }, &out, &errOut)
	if err == nil || err.Error() != "2 document(s) this token may not apply; nothing was applied" || out.Len() != 0 ||
		strings.Count(errOut.String(), "a designer token may not apply destinations") != 2 {
		t.Errorf("a designer applying destinations: err %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
	if res := call(t, "GET", r.base+"/api/v1/definitions", bootstrap, nil); strings.Contains(string(res.body), "add_company_to_crm") {
		t.Error("a refused apply changed the server")
	}
	out.Reset()
	errOut.Reset()
	if err := run(context.Background(), []string{"apply", "-f", "../../examples/definitions"}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
		t.Errorf("a designer applying definitions: %v\n%s", err, errOut.String())
	}
}

// TestApplySaysWhatARevisionBreaks: a definition updated into a revision
// that breaks processes or workers says so as it is applied (and in a dry
// run), with where to read the changes; a compatible one says nothing.
func TestApplySaysWhatARevisionBreaks(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
	doc := filepath.Join(t.TempDir(), "claim.yaml")
	write := func(inputs string) {
		t.Helper()
		body := "kind: Definition\nkey: assess_claim\nname: Assess a claim\ninputs:\n  fields:\n" + inputs + "outputs:\n  fields: []\n"
		if err := os.WriteFile(doc, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("    - {name: amount, type: integer, required: true}\n")
	if out, stderr, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "created (revision 1)") {
		t.Fatalf("first apply: %q, %v\n%s", out, err, stderr)
	}
	// Compatible: an optional input added.
	write("    - {name: amount, type: integer, required: true}\n    - {name: note, type: text}\n")
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "updated (revision 2; 1 change(s) against revision 1, none breaking: /inputs/note (added optional text field))") || strings.Contains(out, "breaking change") {
		t.Errorf("a compatible update: %q, %v; want revision 2, its change, and no breaking change", out, err)
	}
	// Breaking: amount removed (both), a required input added (processes).
	write("    - {name: note, type: text}\n    - {name: policy, type: text, required: true}\n")
	changes := ": /inputs/amount (removed required integer field; may break processes and workers), /inputs/policy (added required text field; may break processes))"
	want := "; 2 breaking change(s) against revision 2, listed by GET /api/v1/definitions/assess_claim/revisions/2/diff/3"
	for _, c := range []struct {
		args []string
		want string
	}{
		// The revision a dry run would make does not exist yet.
		{[]string{"-f", doc, "--dry-run"}, want + " once applied" + changes},
		{[]string{"-f", doc}, want + changes},
	} {
		if out, _, err := applyRun(t, r.base, c.args...); err != nil || !strings.Contains(out, "revision 3"+c.want) {
			t.Errorf("apply %v of a breaking update: %q, %v; want %q", c.args, out, err, c.want)
		}
	}
	// Breaking and compatible changes together: both said (a dry run,
	// which leaves revision 3 the latest).
	write("    - {name: note, type: text}\n    - {name: policy, type: text, required: true}\n    - {name: channel, type: text}\n    - {name: region, type: text, required: true}\n")
	mixed := "revision 4; 1 breaking change(s) against revision 3, listed by GET /api/v1/definitions/assess_claim/revisions/3/diff/4 once applied: /inputs/region (added required text field; may break processes)" +
		"; 1 other change(s), breaking nobody: /inputs/channel (added optional text field))"
	if out, _, err := applyRun(t, r.base, "-f", doc, "--dry-run"); err != nil || !strings.Contains(out, mixed) {
		t.Errorf("breaking and compatible changes: %q, %v; want %q", out, err, mixed)
	}
	// A lowered classification breaks nobody, and is named all the same.
	write("    - {name: note, type: text, classification: sensitive}\n    - {name: policy, type: text, required: true}\n")
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "updated (revision 4;") || strings.Contains(out, "LOWERS") {
		t.Errorf("a raised classification: %q, %v; want revision 4 and nothing lowered", out, err)
	}
	write("    - {name: note, type: text}\n    - {name: policy, type: text, required: true}\n")
	lowered := "(revision 5; 1 breaking change(s) against revision 4, listed by GET /api/v1/definitions/assess_claim/revisions/4/diff/5: /inputs/note (classification sensitive → normal; may break processes)" +
		"; LOWERS PROTECTION of /inputs/note (classification sensitive → normal): values of these fields are shown and stored in clear from this revision on" +
		"; identical to revision 3, which a process may pin instead)"
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, lowered) {
		t.Errorf("a lowered classification: %q, %v; want %q", out, err, lowered)
	}
	// Past five, the rest are counted.
	write("    - {name: note, type: text}\n    - {name: policy, type: text, required: true}\n" +
		"    - {name: a, type: text, required: true}\n    - {name: b, type: text, required: true}\n    - {name: c, type: text, required: true}\n" +
		"    - {name: d, type: text, required: true}\n    - {name: e, type: text, required: true}\n    - {name: f, type: text, required: true}\n")
	many := "6 breaking change(s) against revision 5, listed by GET /api/v1/definitions/assess_claim/revisions/5/diff/6 once applied: /inputs/a (added required text field; may break processes), " +
		"/inputs/b (added required text field; may break processes), /inputs/c (added required text field; may break processes), " +
		"/inputs/d (added required text field; may break processes), /inputs/e (added required text field; may break processes), and 1 more)"
	if out, _, err := applyRun(t, r.base, "-f", doc, "--dry-run"); err != nil || !strings.Contains(out, many) {
		t.Errorf("six breaking changes: %q, %v; want %q", out, err, many)
	}
	// A field's description alone still makes a revision: said so
	// (evolution QA: it read as any update).
	write("    - {name: note, type: text, description: a free note}\n    - {name: policy, type: text, required: true}\n")
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "updated (revision 6; the contracts are revision 5's: only names or descriptions changed") {
		t.Errorf("a description's edit: %q, %v", out, err)
	}
	// A field saying less than the object holding it is raised: noted.
	write("    - {name: note, type: text, description: a free note}\n    - {name: policy, type: text, required: true}\n" +
		"    - {name: company, type: object, classification: sensitive, fields: [{name: name, type: text, classification: normal}]}\n")
	raised := "\n  note: /inputs/company/name: classification normal is raised to sensitive by /inputs/company, which holds it"
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, raised) {
		t.Errorf("a field's classification raised by its object: %q, %v; want %q", out, err, raised)
	}
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || strings.Contains(out, "note:") {
		t.Errorf("an unchanged apply notes again: %q, %v", out, err)
	}
}

// TestApplySaysWhatANewVersionRefuses: a process version whose inputs may
// refuse the starts the latest took (starts without a version run the new
// one) says which, as it is published and in a dry run.
func TestApplySaysWhatANewVersionRefuses(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
	doc := filepath.Join(t.TempDir(), "claims.yaml")
	write := func(inputs string) {
		t.Helper()
		body := "kind: Process\nkey: claims\ninputs:\n  fields:\n" + inputs + "start: done\nnodes:\n  done: {kind: end}\n"
		if err := os.WriteFile(doc, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("    - {name: email, type: text, required: true}\n")
	if out, stderr, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "published (version 1)") {
		t.Fatalf("version 1: %q, %v\n%s", out, err, stderr)
	}
	// Compatible: an optional input added.
	write("    - {name: email, type: text, required: true}\n    - {name: note, type: text}\n")
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "published (version 2)\n  changes from version 1:\n    /inputs/note: added optional text field\n") || strings.Contains(out, "refuse") {
		t.Errorf("a compatible version: %q, %v", out, err)
	}
	// A graph changed: said node by node, in a dry run too.
	body := "kind: Process\nkey: claims\ninputs:\n  fields:\n    - {name: email, type: text, required: true}\n    - {name: note, type: text}\n" +
		"start: done\nnodes:\n  done: {kind: end, status: failed}\n"
	if err := os.WriteFile(doc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := applyRun(t, r.base, "-f", doc, "--dry-run"); err != nil || !strings.Contains(out, "published (version 3)\n  changes from version 2:\n    node done: status completed → failed\n") {
		t.Errorf("a graph changed: %q, %v", out, err)
	}
	// A classification raised refuses no start.
	write("    - {name: email, type: text, required: true, classification: sensitive}\n    - {name: note, type: text}\n")
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "published (version 3)") || strings.Contains(out, "refuse") {
		t.Errorf("a version with a classification raised: %q, %v", out, err)
	}
	// The caller's email renamed contact_email.
	write("    - {name: contact_email, type: text, required: true}\n    - {name: note, type: text}\n")
	want := "; starts without a version run it from now on, and its inputs may refuse what version 3 took: /inputs/contact_email (added required text field), /inputs/email (removed required text field)"
	for _, args := range [][]string{{"-f", doc, "--dry-run"}, {"-f", doc}} {
		if out, _, err := applyRun(t, r.base, args...); err != nil || !strings.Contains(out, "(version 4"+want) {
			t.Errorf("apply %v of a version refusing old starts: %q, %v; want %q", args, out, err, want)
		}
	}
	// An input less protected than the last version's refuses no start,
	// and is named all the same.
	write("    - {name: contact_email, type: text, required: true, classification: sensitive}\n    - {name: note, type: text}\n")
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "published (version 5") {
		t.Fatalf("version 5: %q, %v", out, err)
	}
	write("    - {name: contact_email, type: text, required: true}\n    - {name: note, type: text, description: A note}\n")
	lowered := "(version 6; LOWERS PROTECTION of /inputs/contact_email (classification sensitive → normal): values of these inputs are shown and stored in clear from this version on)"
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, lowered) {
		t.Errorf("a version lowering an input: %q, %v; want %q", out, err, lowered)
	}
	// An input's description alone still makes a version: said so
	// (evolution QA: it read as any publication).
	write("    - {name: contact_email, type: text, required: true}\n    - {name: note, type: text, description: A free note}\n")
	same := "published (version 7; the same process as version 6: only its name or descriptions changed)"
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, same) {
		t.Errorf("a description's edit: %q, %v; want %q", out, err, same)
	}
	// An input saying less than its object is raised: noted, as for a
	// definition.
	write("    - {name: contact_email, type: text, required: true}\n    - {name: note, type: text, description: A free note}\n" +
		"    - {name: company, type: object, classification: sensitive, fields: [{name: name, type: text, classification: normal}]}\n")
	if out, _, err := applyRun(t, r.base, "-f", doc); err != nil || !strings.Contains(out, "\n  note: /inputs/company/name: classification normal is raised to sensitive by /inputs/company") {
		t.Errorf("a process input raised by its object: %q, %v", out, err)
	}
}

// A process naming a definition or a destination this apply creates, with
// a typo, is told the name it may mean, as it is once they exist on the
// server (designer QA: suppliers.aprove went unguessed while
// suppliers.approve was in the same folder).
func TestApplyGuessesANameTheSameApplyCreates(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
	dir := t.TempDir()
	files := map[string]string{
		"approve.yaml": "kind: Definition\nkey: suppliers.approve\nname: Approve\ninputs:\n  fields: []\noutputs:\n  fields: []\n",
		"hook.yaml":    "kind: Destination\nname: accounting\nurl: http://127.0.0.1:9/hook\nmax_timeout: PT2S\n",
		"process.yaml": "kind: Process\nkey: onboard\ninputs:\n  fields: []\nstart: approval\nnodes:\n" +
			"  approval: {kind: pull, definition: suppliers.aprove, revision: 1, next: notify}\n" +
			"  notify: {kind: push, definition: approve, revision: 1, destination: acounting, next: done}\n" +
			"  done: {kind: end}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, err := applyRun(t, r.base, "-f", dir, "--dry-run")
	for _, want := range []string{
		`/nodes/approval/definition: unknown definition revision suppliers.aprove@1 (did you mean "suppliers.approve"?)`,
		`/nodes/notify/definition: unknown definition revision approve@1 (did you mean "suppliers.approve"?)`,
		`/nodes/notify/destination: unknown destination "acounting" (did you mean "accounting"?)`,
	} {
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("dry run: %v\n%s\nwant %q", err, stderr, want)
		}
	}
}

// TestApplyNotesWorkersANewPinBreaks: a process version that moves a pull
// node to a revision whose changes break the workers built for the one
// before (an output added required) says so, naming the node, the
// revisions and the change, in a dry run (the revision only planned) and
// once applied (Go SDK QA: workers naming no revision took it silently,
// and failed its tasks invalid_outputs).
func TestApplyNotesWorkersANewPinBreaks(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap})
	dir := t.TempDir()
	write := func(outputs string, revision int) {
		t.Helper()
		def := "kind: Definition\nkey: review\nname: Review an order\ninputs:\n  fields:\n    - {name: order, type: text, required: true}\n" +
			"outputs:\n  fields:\n    - {name: decision, type: choice, required: true, values: [approve, reject]}\n" + outputs
		proc := fmt.Sprintf("kind: Process\nkey: reviewing\ninputs:\n  fields:\n    - {name: order, type: text, required: true}\nstart: review\nnodes:\n"+
			"  review: {kind: pull, definition: review, revision: %d, inputs: {order: {from: input.order}}, next: done}\n  done: {kind: end}\n", revision)
		for name, body := range map[string]string{"1-review.yaml": def, "2-reviewing.yaml": proc} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("", 1)
	if out, stderr, err := applyRun(t, r.base, "-f", dir); err != nil || strings.Contains(out, "note:") {
		t.Fatalf("first apply: %q, %v\n%s", out, err, stderr)
	}
	write("    - {name: currency, type: choice, required: true, values: [EUR, USD]}\n", 2)
	want := "note: node review moves from review revision 1 to 2, whose changes break workers built for revision 1: /outputs/currency (added required choice field)"
	for _, args := range [][]string{{"-f", dir, "--dry-run"}, {"-f", dir}} {
		if out, stderr, err := applyRun(t, r.base, args...); err != nil || !strings.Contains(out, want) {
			t.Errorf("apply %v: %q, %v\n%s\nwant %q", args, out, err, stderr, want)
		}
	}
	// A compatible revision says nothing of workers.
	write("    - {name: currency, type: choice, required: true, values: [EUR, USD]}\n    - {name: note, type: text}\n", 3)
	if out, _, err := applyRun(t, r.base, "-f", dir); err != nil || strings.Contains(out, "break workers") {
		t.Errorf("a compatible revision: %q, %v; want no note on workers", out, err)
	}
}
