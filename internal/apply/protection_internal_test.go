package apply

import (
	"strings"
	"testing"
)

// A classification lowered to normal is shown and stored in clear; one
// lowered from secret to sensitive stays masked and encrypted, only
// revealable by an administrator: each is said as what it is (designer QA:
// both read "shown and stored in clear").
func TestProtectionNote(t *testing.T) {
	got := protectionNote([]string{"/inputs/note (classification sensitive → normal)", "/inputs/ssn (classification secret → sensitive)"}, "fields", "revision")
	for _, want := range []string{
		"LOWERS PROTECTION of /inputs/note (classification sensitive → normal): values of these fields are shown and stored in clear from this revision on",
		"LOWERS PROTECTION of /inputs/ssn (classification secret → sensitive): values of these fields stay masked and encrypted, but an administrator may reveal them from this revision on",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("note %q, want it to hold %q", got, want)
		}
	}
	if strings.Contains(got, "/inputs/ssn (classification secret → sensitive): values of these fields are shown") {
		t.Errorf("note %q says a sensitive value is shown in clear", got)
	}
	if got := protectionNote(nil, "inputs", "version"); got != "" {
		t.Errorf("nothing lowered: %q", got)
	}
}
