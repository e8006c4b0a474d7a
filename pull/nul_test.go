package pull_test

import (
	"reflect"
	"testing"
)

// errorPaths returns the pointers of a problem's errors.
func errorPaths(p map[string]any) []string {
	var out []string
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		e := e.(map[string]any)
		if e["message"] == `the NUL character (\u0000) is not allowed` {
			out = append(out, e["path"].(string))
		}
	}
	return out
}

// TestNULCharacterInResultsIsRefused: PostgreSQL cannot store the NUL
// character (\u0000), which made a completion or a failure holding it a
// 500. Outputs holding it violate the contract (422 invalid_outputs with
// the pointer: the SDK fails such a task at once), a failure message
// holding it is 400 at /message; neither settles the occurrence, so the
// worker may still complete it.
func TestNULCharacterInResultsIsRefused(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, occ := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), occ)

	p := wantProblem(t, "outputs with NUL", act(env, consumer, occ, "complete", completeBody("w1", map[string]any{"result": "created", "crm_id": "C-\x001"})), 422, "invalid_outputs")
	if got := errorPaths(p); !reflect.DeepEqual(got, []string{"/outputs/crm_id"}) {
		t.Errorf("outputs with NUL: NUL errors at %q, want /outputs/crm_id; problem %v", got, p)
	}
	p = wantProblem(t, "failure message with NUL", act(env, consumer, occ, "fail", failBody("w1", "message", "CRM said \x00")), 400, "invalid_json")
	if got := errorPaths(p); !reflect.DeepEqual(got, []string{"/message"}) {
		t.Errorf("failure message with NUL: NUL errors at %q, want /message; problem %v", got, p)
	}
	if got := observe(t, env, occ); got["status"] != "reserved" || len(attemptsOf(t, got)) != 1 {
		t.Fatalf("after the refusals the occurrence is %v with %d attempts; want still reserved, one attempt", got["status"], len(attemptsOf(t, got)))
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/complete", consumer, completeBody("w1", created))
}
