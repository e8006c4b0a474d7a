package process

import (
	"slices"
	"strings"
	"testing"
)

// Changes names each aspect of the graph a new version changes, and
// nothing for a document that only reads differently.
func TestChangesNameWhatAVersionChanges(t *testing.T) {
	old := mustParse(t, []byte(validDoc))
	// The same version with its on_error written as a map: nothing
	// changes.
	same := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		node(m, "crm")["on_error"] = map[string]any{"*": "failed"}
	}))
	if got := Changes(old, same); len(got) != 0 {
		t.Errorf("a document that means the same: %q, want no change", got)
	}
	next := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		m["description"] = "changed"
		sub(node(m, "crm"), "policy")["max_attempts"] = 5
		sub(node(m, "crm"), "policy")["retry_delay"] = "PT0S"
		delete(sub(node(m, "crm"), "policy"), "deadline")
		sub(node(m, "crm"), "inputs")["source"] = map[string]any{"value": "partner"}
		node(m, "score")["timeout"] = "PT4S"
		node(m, "score")["next"] = "audit"
		node(m, "charge")["on_error"] = map[string]any{"*": "failed", "card_expired": "done"}
		m["nodes"].(map[string]any)["audit"] = map[string]any{"kind": "pull", "definition": "noop", "revision": 1, "next": "charge"}
		node(m, "failed")["status"] = "completed"
	}))
	got := Changes(old, next)
	want := []string{
		"description",
		"node audit added (pull noop@1)",
		"node charge: on_error",
		"node crm: inputs, max_attempts 3 → 5, retry_delay PT10S → PT0S, deadline P1D → (none)",
		"node failed: status failed → completed",
		"node score: next charge → audit, timeout PT3S → PT4S",
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A node removed.
	back := Changes(next, old)
	for _, w := range []string{"node audit removed", "node score: next audit → charge, timeout PT4S → PT3S"} {
		if !slices.Contains(back, w) {
			t.Errorf("changes back %q lack %q", back, w)
		}
	}
	// A revision changed, and a new start.
	moved := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		node(m, "crm")["revision"] = 1
		delete(node(m, "crm"), "routes")
		node(m, "crm")["next"] = "score"
		node(m, "crm")["inputs"] = map[string]any{"company_name": map[string]any{"from": "input.company.name"}}
		m["start"] = "score"
	}))
	got = Changes(old, moved)
	for _, w := range []string{"start crm → score", "node crm: revision 2 → 1, inputs, routes, next (none) → score"} {
		if !slices.Contains(got, w) {
			t.Errorf("changes %q lack %q", got, w)
		}
	}
}
