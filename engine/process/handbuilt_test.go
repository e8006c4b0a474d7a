package process

import (
	"testing"
	"time"
)

// TestCheckHandBuilt covers invariants Parse already enforces, which
// Check re-verifies for a Process that did not come from Parse.
func TestCheckHandBuilt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fn    func(p *Process)
		wants []want
	}{
		{"end node with next, routes and on_error", func(p *Process) {
			n := p.Nodes["done"]
			n.Next, n.Routes, n.OnError = "failed", map[string]string{"x": "failed"}, OnError{Default: "failed"}
		}, []want{
			{"/nodes/done/next", "end nodes have no next"},
			{"/nodes/done/on_error", "end nodes have no on_error"},
			{"/nodes/done/routes", "end nodes have no routes"}}},
		{"end node with unknown status", func(p *Process) { p.Nodes["done"].Status = "aborted" },
			[]want{{"/nodes/done/status", `unknown status "aborted"`}}},
		{"retried push node", func(p *Process) {
			p.Nodes["score"].Policy.MaxAttempts = 2
			p.Nodes["score"].Policy.RetryDelay = time.Second
		}, []want{
			{"/nodes/score/policy/max_attempts", "push nodes are never retried"},
			{"/nodes/score/policy/retry_delay", "push nodes are never retried"}}},
		{"pull policy out of range", func(p *Process) {
			p.Nodes["crm"].Policy = Policy{MaxAttempts: 0, RetryDelay: -1, Deadline: -1, Priority: 10}
		}, []want{
			{"/nodes/crm/policy/deadline", "deadline must be positive"},
			{"/nodes/crm/policy/max_attempts", "max_attempts must be between 1 and 100"},
			{"/nodes/crm/policy/priority", "priority must be between 0 and 9"},
			{"/nodes/crm/policy/retry_delay", "retry_delay must not be negative"}}},
		{"push options on a pull node", func(p *Process) {
			p.Nodes["crm"].Destination, p.Nodes["crm"].Timeout, p.Nodes["crm"].Status = "payments", time.Second, "failed"
		}, []want{
			{"/nodes/crm/destination", "destination is not allowed on pull nodes"},
			{"/nodes/crm/status", "status is not allowed on pull nodes"},
			{"/nodes/crm/timeout", "timeout is not allowed on pull nodes"}}},
		{"unknown kind", func(p *Process) { p.Nodes["done"].Kind = "wait" },
			[]want{{"/nodes/done/kind", `unknown kind "wait"`}}},
		{"missing pin", func(p *Process) { p.Nodes["score"].Definition, p.Nodes["charge"].Revision = "", 0 },
			[]want{
				{"/nodes/charge/revision", "revision must be an integer from 1 to 2147483647"},
				{"/nodes/score/definition", "definition is required on push nodes"}}},
		{"binding with both from and value", func(p *Process) {
			p.Nodes["crm"].Inputs["source"] = Binding{From: "input.company.name", Value: []byte(`"web"`)}
		}, []want{{"/nodes/crm/inputs/source", "not both"}}},
		{"binding with neither from nor value", func(p *Process) {
			p.Nodes["crm"].Inputs["source"] = Binding{}
		}, []want{{"/nodes/crm/inputs/source", "binding must have either from or value"}}},
		{"nil node", func(p *Process) { p.Nodes["orphan"] = nil },
			[]want{{"/nodes/orphan", `node "orphan" is nil`}, {"/nodes/orphan", `node "orphan" is not reachable from start`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, []byte(validDoc))
			tc.fn(p)
			expectExactly(t, Check(p, resolver, testLimits), tc.wants)
		})
	}
}

func TestCheckWithoutResolverOrProcess(t *testing.T) {
	t.Parallel()
	expectExactly(t, Check(nil, resolver, testLimits), []want{{"", "no process to check"}})

	p := mustParse(t, []byte(validDoc))
	expectExactly(t, Check(p, nil, testLimits), []want{
		{"/nodes/charge/definition", "unknown definition revision charge_card@1"},
		{"/nodes/charge/destination", `unknown destination "payments"`},
		{"/nodes/crm/definition", "unknown definition revision add_company_to_crm@2"},
		{"/nodes/score/definition", "unknown definition revision score_company@1"},
		{"/nodes/score/destination", `unknown destination "scoring-api"`}})
}

// TestCheckReportsEverything: independent problems in one document are
// all reported, each at its own pointer.
func TestCheckReportsEverything(t *testing.T) {
	t.Parallel()
	p := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		delete(sub(node(m, "crm"), "inputs"), "country")
		sub(node(m, "crm"), "policy")["retry_delay"] = "P3D"
		node(m, "score")["timeout"] = "PT8S"
		delete(sub(node(m, "charge"), "routes"), "declined")
		sub(node(m, "charge"), "inputs")["reference"] = map[string]any{"from": "input.card_token"}
	}))
	expectExactly(t, Check(p, resolver, testLimits), []want{
		{"/nodes/charge/inputs/reference", "secret source cannot feed normal field reference"},
		{"/nodes/charge/routes", `route "declined" is not mapped`},
		{"/nodes/crm/inputs", `required input "country" is not bound`},
		{"/nodes/crm/policy/retry_delay", "retry_delay P3D exceeds the ceiling P1D"},
		{"/nodes/score/timeout", "timeout PT8S exceeds destination scoring-api's max_timeout PT5S"}})
}
