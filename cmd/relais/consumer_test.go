package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/relais/relais/internal/dbtest"
)

// consumerRun runs `relais consumer args...` against base with token.
func consumerRun(base, token string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	env := map[string]string{"RELAIS_URL": base, "RELAIS_TOKEN": token}
	err := run(context.Background(), append([]string{"consumer"}, args...), func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

var printedToken = regexp.MustCompile(`(?m)^    (rls_\S+)$`)

// tokenPrinted is the token a consumer command printed in out.
func tokenPrinted(t *testing.T, out string) string {
	t.Helper()
	m := printedToken.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token printed: %q", out)
	}
	return m[1]
}

// TestConsumerCommand creates, lists, rotates and revokes a consumer from
// the command line, each token it prints working as the API says, and
// each slip told what to type instead.
func TestConsumerCommand(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples/definitions"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	works := func(token string) int {
		return callH(t, "GET", r.base+"/api/v1/whoami", token, nil).status
	}

	out, stderr, err := consumerRun(r.base, bootstrap, "create", "--name", "crm-sync", "--grant", "add_company_to_crm")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, `consumer 1 "crm-sync" created, granted add_company_to_crm (all revisions)`) {
		t.Errorf("create said %q", out)
	}
	first := tokenPrinted(t, out)
	if s := works(first); s != 200 {
		t.Errorf("the printed token: whoami %d, want 200", s)
	}

	// The same name again, and a revision that does not exist.
	if _, _, err := consumerRun(r.base, bootstrap, "create", "--name", "crm-sync", "--grant", "add_company_to_crm"); err == nil || !strings.Contains(err.Error(), "consumer_exists") {
		t.Errorf("a second crm-sync: %v, want consumer_exists", err)
	}
	_, stderr, err = consumerRun(r.base, bootstrap, "create", "--name", "other", "--grant", "add_company_to_crm=1,7")
	if err == nil || !strings.Contains(err.Error(), "invalid_grants") || !strings.Contains(stderr, "/grants/0/revisions/1: ") {
		t.Errorf("a grant of revision 7: %v\n%s\nwant invalid_grants with its pointer", err, stderr)
	}

	out, _, err = consumerRun(r.base, bootstrap, "list")
	if err != nil || !strings.HasPrefix(out, "ID  NAME") || !regexp.MustCompile(`\n1 +crm-sync +add_company_to_crm \(all revisions\) +created `).MatchString(out) {
		t.Errorf("list: %q, %v", out, err)
	}
	out, _, err = consumerRun(r.base, bootstrap, "list", "--json")
	var listed []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0]["name"] != "crm-sync" {
		t.Errorf("list --json: %q, %v", out, err)
	}

	// A flag after the id is read all the same.
	out, stderr, err = consumerRun(r.base, bootstrap, "rotate", "1", "--overlap", "PT10M")
	if err != nil || !strings.Contains(out, "consumer 1: new token; the previous ones work until ") || !strings.Contains(out, "give the workers the new token before then") {
		t.Fatalf("rotate with an overlap: %q, %v\n%s", out, err, stderr)
	}
	second := tokenPrinted(t, out)
	if works(first) != 200 || works(second) != 200 {
		t.Errorf("during the overlap: old %d, new %d; want both 200", works(first), works(second))
	}
	// Grants added and withdrawn, the others kept (evolution QA: PUT
	// replaces the list, and adding a revision by hand cut workers off).
	out, stderr, err = consumerRun(r.base, bootstrap, "grant", "1", "--grant", "score_company=1")
	if err != nil || out != `consumer 1 "crm-sync" granted add_company_to_crm (all revisions), score_company (revisions 1) (was add_company_to_crm (all revisions))`+"\n" {
		t.Errorf("grant: %q, %v\n%s", out, err, stderr)
	}
	// A revision withdrawn from a grant of every revision leaves the
	// others that exist, in one write (here none: the grant goes).
	out, stderr, err = consumerRun(r.base, bootstrap, "ungrant", "1", "--grant", "add_company_to_crm=1")
	if err != nil || !strings.HasPrefix(out, `consumer 1 "crm-sync" granted score_company (revisions 1) (was `) {
		t.Errorf("ungrant the one revision of every one: %q, %v\n%s", out, err, stderr)
	}
	out, stderr, err = consumerRun(r.base, bootstrap, "ungrant", "1", "--grant", "score_company")
	if err != nil || !strings.HasPrefix(out, `consumer 1 "crm-sync" granted nothing (was `) {
		t.Errorf("ungrant: %q, %v\n%s", out, err, stderr)
	}
	consumerRun(r.base, bootstrap, "grant", "1", "--grant", "add_company_to_crm")
	if _, _, err := consumerRun(r.base, bootstrap, "grant", "1", "--grant", "score_company=9"); err == nil || !strings.Contains(err.Error(), "invalid_grants") {
		t.Errorf("grant of a revision that does not exist: %v, want invalid_grants", err)
	}
	out, _, err = consumerRun(r.base, bootstrap, "revoke", "1")
	if err != nil || out != "consumer 1 revoked: its tokens no longer work\n" {
		t.Errorf("revoke: %q, %v", out, err)
	}
	if works(second) != 401 {
		t.Errorf("after the revocation: whoami %d, want 401", works(second))
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"creat"}, `did you mean "create"?`},
		{[]string{"create", "--nme", "x"}, "did you mean --name?"},
		{[]string{"create", "--name", "x"}, "--grant is missing (a consumer needs at least one): usage: relais consumer create"},
		{[]string{"create", "--grant", "k"}, "--name is missing: usage: relais consumer create"},
		{[]string{"create"}, "--name and --grant are missing: usage: relais consumer create"},
		{[]string{"create", "--name", "x", "--grant", "k=one"}, `revisions are "all" or revision numbers`},
		{[]string{"rotate", "abc"}, `"abc" is not a consumer id`},
		{[]string{"rotate", "3", "--overlap", "10m"}, `--overlap: "10m": not an ISO-8601 duration`},
		{[]string{"revoke"}, "usage: relais consumer revoke ID"},
		{[]string{"grant", "1"}, "usage: relais consumer grant ID --grant"},
		{[]string{"grnt"}, `did you mean "grant"?`},
		{[]string{"list", "extra"}, `unexpected argument "extra"`},
	} {
		if _, _, err := consumerRun(r.base, bootstrap, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("consumer %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if _, _, err := consumerRun(r.base, "", "list"); err == nil || !strings.Contains(err.Error(), "RELAIS_TOKEN is required (an admin token)") {
		t.Errorf("no token: %v", err)
	}
}

// widen joins revisions and keys to a consumer's grants, narrow withdraws
// them, each keeping what it is not told of.
func TestGrantsWidenAndNarrow(t *testing.T) {
	t.Parallel()
	g := func(key, revs string) grantArg { return grantArg{Definition: key, Revisions: json.RawMessage(revs)} }
	text := func(gs []grantArg) string { return grantsText(gs) }
	had := []grantArg{g("a", "[1,3]"), g("b", `"all"`), g("c.*", `"all"`)}
	if got := text(widen(had, []grantArg{g("a", "[2,3]"), g("d", "[1]"), g("b", "[4]")})); got != "a (revisions 1,2,3), b (all revisions), c.* (all revisions), d (revisions 1)" {
		t.Errorf("widen: %s", got)
	}
	if got := text(widen(had, []grantArg{g("a", `"all"`)})); got != "a (all revisions), b (all revisions), c.* (all revisions)" {
		t.Errorf("widen to all: %s", got)
	}
	if text(had) != "a (revisions 1,3), b (all revisions), c.* (all revisions)" {
		t.Errorf("widen changed its argument: %s", text(had))
	}
	existing := func(key string) ([]int, error) { return []int{1, 2, 3, 4}, nil }
	if got, err := narrow(had, []grantArg{g("a", "[3]"), g("c.*", `"all"`)}, existing); err != nil || text(got) != "a (revisions 1), b (all revisions)" {
		t.Errorf("narrow: %s, %v", text(got), err)
	}
	if got, err := narrow(had, []grantArg{g("a", "[1,3]")}, existing); err != nil || text(got) != "b (all revisions), c.* (all revisions)" {
		t.Errorf("narrow to none: %s, %v", text(got), err)
	}
	// Every revision less one: the others that exist, listed.
	if got, err := narrow(had, []grantArg{g("b", "[2]")}, existing); err != nil || text(got) != "a (revisions 1,3), b (revisions 1,3,4), c.* (all revisions)" {
		t.Errorf("narrow every revision: %s, %v", text(got), err)
	}
	for _, less := range [][]grantArg{{g("a", "[2]")}, {g("c.*", "[1]")}, {g("z", `"all"`)}, {g("b", "[9]")}} {
		if _, err := narrow(had, less, existing); err == nil {
			t.Errorf("narrow by %s: no error", text(less))
		}
	}
	// Said as it is (verifier QA): a revision that does not exist, a key a
	// pattern grants.
	if _, err := narrow(had, []grantArg{g("b", "[9]")}, existing); err == nil || !strings.Contains(err.Error(), "b has no revision 9 (it is granted every revision, which are 1,2,3,4)") {
		t.Errorf("narrow b by 9: %v", err)
	}
	if _, err := narrow(had, []grantArg{g("c.x", `"all"`)}, existing); err == nil || !strings.Contains(err.Error(), "c.x is granted through the pattern c.*") {
		t.Errorf("narrow c.x: %v", err)
	}
	// Granting a revision a grant of every revision already covers: one
	// that does not exist is said (evaluator QA), one that does is fine.
	if err := absorbed(had, []grantArg{g("b", "[9]")}, existing); err == nil || !strings.Contains(err.Error(), "b has no revision 9 (it is granted every revision, which are 1,2,3,4)") {
		t.Errorf("grant b 9 over every revision: %v", err)
	}
	if err := absorbed(had, []grantArg{g("b", "[2]"), g("a", "[9]")}, existing); err != nil {
		t.Errorf("grant b 2 over every revision, a 9 over a list (the server's to judge): %v", err)
	}
}
