package process

import "testing"

// TestCheckAssignability feeds one notify input per case; the notify
// revision's inputs are optional except reference, so each case judges
// exactly one binding.
func TestCheckAssignability(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		target string
		from   string
		wants  []want
	}{
		{"same type", "count", "input.n_int", nil},
		{"integer feeds number", "amount", "input.n_int", nil},
		{"number cannot feed integer", "count", "input.n_num",
			[]want{{"/nodes/notify/inputs/count", "type number cannot feed integer"}}},
		{"text cannot feed integer", "count", "input.txt",
			[]want{{"/nodes/notify/inputs/count", "type text cannot feed integer"}}},
		{"choice feeds text", "label", "input.tier", nil},
		{"text cannot feed choice", "tier", "input.txt",
			[]want{{"/nodes/notify/inputs/tier", "type text cannot feed choice"}}},
		{"choice subset feeds choice", "tier", "input.tier", nil},
		{"choice superset cannot feed choice", "tier", "input.tier_wide",
			[]want{{"/nodes/notify/inputs/tier", `choice value "platinum" of the source is not a value of field tier`}}},
		{"object with the same fields", "address", "input.addr", nil},
		{"object lacking a required target field", "address", "input.addr_loose",
			[]want{{"/nodes/notify/inputs/address", "field address.city is required but the source may lack it"}}},
		{"object with a field the target lacks", "address", "input.addr_extra",
			[]want{{"/nodes/notify/inputs/address", "source field address.country is not a field of the target: an object is bound whole, its fields the target's; bind it from an object of the target's fields, or add country to the target in a new revision of its definition"}}},
		{"list items integer feed number", "scores", "input.ints", nil},
		{"list items text cannot feed number", "scores", "input.tags",
			[]want{{"/nodes/notify/inputs/scores", "field scores[]: type text cannot feed number"}}},
		{"optional feeds optional", "label", "input.opt_txt", nil},
		{"optional cannot feed required", "reference", "input.opt_txt",
			[]want{{"/nodes/notify/inputs/reference", "source may be absent but input reference is required"}}},
		{"optional parent cannot feed required", "reference", "input.maybe.x",
			[]want{{"/nodes/notify/inputs/reference", "source may be absent but input reference is required"}}},
		{"optional parent feeds optional", "label", "input.maybe.x", nil},
		{"business key cannot feed required", "reference", "instance.business_key",
			[]want{{"/nodes/notify/inputs/reference", "source may be absent but input reference is required"}}},
		{"business key feeds optional", "label", "instance.business_key", nil},
		{"business key cannot feed secret", "card_token", "instance.business_key",
			[]want{{"/nodes/notify/inputs/card_token", "the business key, stored and shown in clear, cannot feed secret field card_token"}}},
		{"instance id feeds required text", "reference", "instance.id", nil},
		{"secret cannot feed normal", "label", "input.secret_txt",
			[]want{{"/nodes/notify/inputs/label", "secret source cannot feed normal field label"}}},
		{"secret cannot feed sensitive", "note", "input.secret_txt",
			[]want{{"/nodes/notify/inputs/note", "secret source cannot feed sensitive field note"}}},
		{"sensitive cannot feed normal", "label", "input.sens_txt",
			[]want{{"/nodes/notify/inputs/label", "sensitive source cannot feed normal field label"}}},
		{"secret feeds secret", "card_token", "input.secret_txt", nil},
		{"sensitive input cannot feed secret", "card_token", "input.sens_txt",
			[]want{{"/nodes/notify/inputs/card_token", "sensitive process input cannot feed secret field card_token: the instance would store and show the value as its input, less protected; classify the process input secret"}}},
		{"normal input cannot feed secret", "card_token", "input.txt",
			[]want{{"/nodes/notify/inputs/card_token", "normal process input cannot feed secret field card_token"}}},
		{"normal input cannot feed sensitive", "note", "input.txt",
			[]want{{"/nodes/notify/inputs/note", "normal process input cannot feed sensitive field note"}}},
		{"nested field inherits the parent's class", "label", "input.holder.name",
			[]want{{"/nodes/notify/inputs/label", "sensitive source cannot feed normal field label"}}},
		{"sensitive object input cannot feed a secret member", "holder", "input.holder",
			[]want{{"/nodes/notify/inputs/holder", "sensitive process input cannot feed secret field holder.token"}}},
		{"nested secret cannot feed nested sensitive", "holder", "input.holder_secret_name",
			[]want{{"/nodes/notify/inputs/holder", "secret source cannot feed sensitive field holder.name"}}},
		{"every problem of an object at once", "address", "input.holder", []want{
			{"/nodes/notify/inputs/address", "sensitive source cannot feed normal field address"},
			{"/nodes/notify/inputs/address", "field address.street is required but the source may lack it"},
			{"/nodes/notify/inputs/address", "field address.city is required but the source may lack it"},
			{"/nodes/notify/inputs/address", "source field address.name is not a field of the target"},
			{"/nodes/notify/inputs/address", "source field address.token is not a field of the target"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, edit(t, assignDoc, func(m map[string]any) {
				sub(node(m, "notify"), "inputs")[tc.target] = map[string]any{"from": tc.from}
			}))
			expectExactly(t, Check(p, resolver, testLimits), tc.wants)
		})
	}
}

// TestCheckCompletionDominance: a node may read another's outputs only if
// every path to it passes through a successful exit of that node.
func TestCheckCompletionDominance(t *testing.T) {
	t.Parallel()
	const readAt = "/nodes/score/inputs/crm_id/from"
	cases := []struct {
		name  string
		fn    func(m map[string]any)
		wants []want
	}{
		{"reached only through a route", func(map[string]any) {}, nil},
		{"reached through two routes", func(m map[string]any) {
			sub(node(m, "crm"), "routes")["existing"] = "score"
		}, nil},
		{"reached through a route and through the on_error path", func(m map[string]any) {
			node(m, "crm")["on_error"] = "fallback"
			m["nodes"].(map[string]any)["fallback"] = map[string]any{
				"kind": "pull", "definition": "noop", "revision": 1, "next": "score"}
		}, []want{{readAt, `node "crm" does not always complete before "score"`}}},
		{"reached directly from on_error", func(m map[string]any) {
			node(m, "crm")["on_error"] = "score"
		}, []want{{readAt, `node "crm" does not always complete before "score"`}}},
		{"reached through a node that bypasses the source", func(m map[string]any) {
			m["start"] = "gate"
			m["nodes"].(map[string]any)["gate"] = map[string]any{
				"kind": "pull", "definition": "noop", "revision": 1, "next": "crm", "on_error": "score"}
		}, []want{{readAt, `node "crm" does not always complete before "score"`}}},
		{"reached after the source through another node", func(m map[string]any) {
			sub(node(m, "crm"), "routes")["created"] = "relay"
			m["nodes"].(map[string]any)["relay"] = map[string]any{
				"kind": "pull", "definition": "noop", "revision": 1, "next": "score", "on_error": "failed"}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, edit(t, validDoc, tc.fn))
			expectExactly(t, Check(p, resolver, testLimits), tc.wants)
		})
	}
}

// A node's protected output feeding a less protected field is refused with
// the fix, which is the target's: the designer read no way out (designer
// QA).
func TestProtectedNodeOutputSaysTheFix(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(`{"inputs": {"fields": []}, "start": "vault", "nodes": {
	  "vault": {"kind": "pull", "definition": "vault_read", "revision": 1, "next": "notify"},
	  "notify": {"kind": "pull", "definition": "notify", "revision": 1,
	    "inputs": {"reference": {"value": "R-1"}, "label": {"from": "nodes.vault.output.key"}}, "next": "done"},
	  "done": {"kind": "end"}}}`))
	expectExactly(t, Check(p, resolver, testLimits), []want{{"/nodes/notify/inputs/label",
		"secret source cannot feed normal field label: protection may only grow; classify label secret in a new revision of the node's definition"}})
}
