package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCommandsRefuseAMisspeltVariable: every command refuses, as serve
// does, a variable misspelling one it reads, before it opens anything: a
// misspelt RELAIS_DATABASE_URL would otherwise create a token in (or
// migrate) the embedded database, a misspelt RELAIS_URL apply to the
// local server.
func TestCommandsRefuseAMisspeltVariable(t *testing.T) {
	t.Parallel()
	const misspeltDatabase = `RELAIS_DATABASE_URI is not a Relais setting (did you mean "RELAIS_DATABASE_URL"?): correct or unset it`
	for _, c := range []struct {
		args, variable, want string
	}{
		{"token create --role admin --name x", "RELAIS_DATABASE_URI=postgres://db.example/relais", misspeltDatabase},
		{"token list", "RELAIS_DATABASE_URI=postgres://db.example/relais", misspeltDatabase},
		{"token revoke 1", "RELAIS_DATABASE_URI=postgres://db.example/relais", misspeltDatabase},
		{"migrate", "RELAIS_DATABASE_URI=postgres://db.example/relais", misspeltDatabase},
		{"keys rotate", "RELAIS_DATABASE_URI=postgres://db.example/relais", misspeltDatabase},
		{"apply -f .", "RELAIS_URI=http://relais.example", `RELAIS_URI is not a Relais setting (did you mean "RELAIS_URL"?): correct or unset it`},
	} {
		t.Run(c.args, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(withoutRelaisVariables(os.Environ()), "RELAIS_TEST_AS_RELAIS=1", "RELAIS_TEST_ARGS="+c.args,
				"RELAIS_DATA_DIR="+dir, "RELAIS_TOKEN=rls_x", c.variable)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("relais %s with %s: %v\n%s\nwant it refused: %s", c.args, c.variable, err, out, c.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the refused command created %d entries in its data folder", len(entries))
			}
		})
	}
}

// withoutRelaisVariables is environ less its RELAIS_ variables, so that
// the test's own (RELAIS_DATABASE_URL, say) cannot change what it checks.
func withoutRelaisVariables(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "RELAIS_") {
			out = append(out, kv)
		}
	}
	return out
}
