package process

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// diamonds is a process of n diamonds after a0: each a_i goes on to b_i,
// or on error to c_i, both of which read a0's outputs and go on to
// a_(i+1). Only b0 is sure a0 completed: every other b_i and c_i is a
// refusal, with a path longer at each diamond.
func diamonds(t *testing.T, n int) []byte {
	t.Helper()
	nodes := map[string]any{"done": map[string]any{"kind": "end"}}
	for i := range n {
		next := "done"
		if i < n-1 {
			next = fmt.Sprintf("a%d", i+1)
		}
		a := map[string]any{"kind": "pull", "definition": "noop", "revision": 1}
		if i == 0 {
			a = map[string]any{"kind": "pull", "definition": "add_company_to_crm", "revision": 1,
				"inputs": map[string]any{"company_name": map[string]any{"value": "Acme"}}}
		}
		a["next"], a["on_error"] = fmt.Sprintf("b%d", i), fmt.Sprintf("c%d", i)
		nodes[fmt.Sprintf("a%d", i)] = a
		for _, side := range []string{"b", "c"} {
			nodes[fmt.Sprintf("%s%d", side, i)] = map[string]any{"kind": "pull", "definition": "notify", "revision": 1, "next": next,
				"inputs": map[string]any{"reference": map[string]any{"value": "r"}, "label": map[string]any{"from": "nodes.a0.output.crm_id"}}}
		}
	}
	b, err := json.Marshal(map[string]any{"inputs": map[string]any{"fields": []any{}}, "start": "a0", "nodes": nodes})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A process of MaxNodes nodes is checked, each refusal naming a path of a
// bounded length; one node more is refused whole, unchecked: checking
// took time and memory growing faster than the document, and a designer's
// 900 KB document held a core for half a minute with a 1.6 MB answer
// (security QA).
func TestCheckBoundsTheNodesAndThePathsNamed(t *testing.T) {
	t.Parallel()
	const n = (MaxNodes - 1) / 3 // 3n+1 nodes
	vs := Check(mustParse(t, diamonds(t, n)), resolver, testLimits)
	if len(vs) != 2*n-1 {
		t.Fatalf("%d violations, want %d (every b and c but b0); first: %v", len(vs), 2*n-1, vs[:min(3, len(vs))])
	}
	for _, v := range vs {
		if !strings.Contains(v.Message, `node "a0" does not always complete`) || len(v.Message) > 400 {
			t.Fatalf("%s: %q (%d bytes), want the dominance refusal with a bounded path", v.Path, v.Message, len(v.Message))
		}
	}
	if got := vs[len(vs)-1].Message; !strings.Contains(got, "a0 → c0 → a1") || !strings.Contains(got, " nodes) … → ") {
		t.Errorf("a long path: %q, want its ends named around the count of those left out", got)
	}
	over := Check(mustParse(t, diamonds(t, n+1)), resolver, testLimits)
	if len(over) != 1 || over[0].Path != "/nodes" || !strings.Contains(over[0].Message, fmt.Sprintf("at most %d nodes", MaxNodes)) {
		t.Errorf("%d nodes: %v, want one refusal at /nodes", 3*(n+1)+1, over)
	}
}
