package suggest

import "testing"

func TestHint(t *testing.T) {
	t.Parallel()
	types := []string{"text", "integer", "number", "boolean", "date", "datetime", "choice", "object", "list"}
	for _, c := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"interger", types, ` (did you mean "integer"?)`},
		{"txt", types, ` (did you mean "text"?)`},
		{"reveiw", []string{"review", "risk", "done"}, ` (did you mean "review"?)`},
		{"emial", []string{"email", "customer_id"}, ` (did you mean "email"?)`},
		{"decison", []string{"decision", "score"}, ` (did you mean "decision"?)`},
		{"text", types, ""},            // not misspelt
		{"colour", types, ""},          // nothing close
		{"ab", []string{"ac"}, ""},     // too short to guess
		{"wxyz", []string{"abcd"}, ""}, // four edits
		{"dat", []string{"date", "data"}, ` (did you mean "date"?)`}, // the earlier of a tie
		// One in another letter case, however long.
		{"QA_PUSH_SLOW", []string{"qa_push_fast", "qa_push_slow"}, ` (did you mean "qa_push_slow"?)`},
		// A key without its namespace means the one key it ends.
		{"approve", []string{"suppliers.approve", "suppliers.check_vat"}, ` (did you mean "suppliers.approve"?)`},
		{"approve", []string{"suppliers.approve", "buyers.approve"}, ""}, // which one?
		{"prove", []string{"suppliers.approve"}, ""},                     // a suffix, not a key
		{"check.vat", []string{"suppliers.check.vat"}, ""},               // only a name without dots
	} {
		if got := Hint(c.name, c.candidates); got != c.want {
			t.Errorf("Hint(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestSynonym(t *testing.T) {
	for _, c := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"retries", []string{"worker_id", "error_code", "message", "retryable", "retry_delay", "attempts_left"}, ` (did you mean "attempts_left"?)`},
		{"retries", []string{"max_attempts", "retry_delay", "deadline", "priority"}, ` (did you mean "max_attempts"?)`},
		{"retryBackOff", []string{"retry_delay"}, ` (did you mean "retry_delay"?)`},
		{"release", []string{"kind", "definition", "revision", "inputs"}, ` (did you mean "revision"?)`}, // a node pins a revision
		{"retries", []string{"name", "grants"}, ""},                                                      // the body has nothing it stands for
		{"colour", []string{"color"}, ""}, // no other platform's name
	} {
		if got := Synonym(c.name, c.candidates); got != c.want {
			t.Errorf("Synonym(%q, %v) = %q, want %q", c.name, c.candidates, got, c.want)
		}
	}
}

// A name one edit from a missing required one is its typo, however short.
func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing []string
		want    string
	}{
		{"ur", []string{"url"}, ` (did you mean "url"?)`},
		{"URL", []string{"url"}, ` (did you mean "url"?)`},
		{"kee", []string{"key"}, ` (did you mean "key"?)`},
		{"nam", []string{"url", "name"}, ` (did you mean "name"?)`},
		{"ab", []string{"url"}, ""},
		{"ur", nil, ""},
	} {
		if got := Missing(tc.name, tc.missing); got != tc.want {
			t.Errorf("Missing(%q, %q) = %q, want %q", tc.name, tc.missing, got, tc.want)
		}
	}
}
