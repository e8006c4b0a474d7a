package process

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// errorDoc routes crm's failures by code: CRM_DOWN to notify, which reads
// crm's error, PAYMENT_DECLINED to hold, any other code to failed.
const errorDoc = `{
  "inputs": {"fields": [{"name": "name", "type": "text", "required": true}]},
  "start": "crm",
  "nodes": {
    "crm": {"kind": "pull", "definition": "add_company_to_crm", "revision": 2,
      "inputs": {"company_name": {"from": "input.name"}, "country": {"value": "FR"}, "source": {"value": "web"}},
      "routes": {"created": "done", "existing": "done"},
      "on_error": {"CRM_DOWN": "notify", "PAYMENT_DECLINED": "hold", "*": "failed"}},
    "notify": {"kind": "pull", "definition": "notify", "revision": 1,
      "inputs": {"reference": {"from": "nodes.crm.error.code"}, "label": {"from": "nodes.crm.error.message"}},
      "next": "failed"},
    "done": {"kind": "end"},
    "failed": {"kind": "end", "status": "failed"}}}`

func TestParseOnError(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(errorDoc))
	want := OnError{Codes: map[string]string{"CRM_DOWN": "notify", "PAYMENT_DECLINED": "hold"}, Default: "failed"}
	if got := p.Nodes["crm"].OnError; got.Default != want.Default || len(got.Codes) != 2 ||
		got.Codes["CRM_DOWN"] != "notify" || got.Codes["PAYMENT_DECLINED"] != "hold" {
		t.Errorf("on_error map: got %+v, want %+v", got, want)
	}
	if got := p.Nodes["notify"].OnError; !got.IsZero() {
		t.Errorf("no on_error: got %+v, want the zero value", got)
	}
	p = mustParse(t, []byte(validDoc))
	if got := p.Nodes["crm"].OnError; got.Codes != nil || got.Default != "failed" {
		t.Errorf("on_error string: got %+v, want Default failed and no Codes", got)
	}
	// A map naming no code is still a map (for pointers), with a default.
	p = mustParse(t, edit(t, validDoc, func(m map[string]any) { node(m, "crm")["on_error"] = map[string]any{"*": "hold"} }))
	if got := p.Nodes["crm"].OnError; got.Codes == nil || len(got.Codes) != 0 || got.Default != Hold {
		t.Errorf(`on_error {"*": "hold"}: got %+v, want an empty Codes map and Default hold`, got)
	}
}

func TestParseOnErrorViolations(t *testing.T) {
	t.Parallel()
	onError := func(v any) func(m map[string]any) {
		return func(m map[string]any) { node(m, "crm")["on_error"] = v }
	}
	long := strings.Repeat("E", 65)
	cases := []struct {
		name  string
		fn    func(m map[string]any)
		raw   string
		wants []want
	}{
		{"empty map", onError(map[string]any{}), "",
			[]want{{"/nodes/crm/on_error", "on_error must not be an empty object"}}},
		{"invalid code", onError(map[string]any{"PAYMENT DECLINED": "failed"}), "",
			[]want{{"/nodes/crm/on_error/PAYMENT DECLINED", `error code "PAYMENT DECLINED" must match`}}},
		{"empty code", onError(map[string]any{"": "failed"}), "",
			[]want{{"/nodes/crm/on_error/", `error code "" must match`}}},
		{"code with a slash is escaped", onError(map[string]any{"a/b": "failed"}), "",
			[]want{{"/nodes/crm/on_error/a~1b", `error code "a/b" must match`}}},
		{"code starting with a separator", onError(map[string]any{"_X": "failed"}), "",
			[]want{{"/nodes/crm/on_error/_X", `error code "_X" must match`}}},
		{"code too long", onError(map[string]any{long: "failed"}), "",
			[]want{{"/nodes/crm/on_error/" + long, "must match"}}},
		{"two stars are not any code", onError(map[string]any{"**": "failed"}), "",
			[]want{{"/nodes/crm/on_error/**", `error code "**" must match`}}},
		{"target not a string", onError(map[string]any{"CRM_DOWN": 1}), "",
			[]want{{"/nodes/crm/on_error/CRM_DOWN", "on_error target must be a node name or hold, not number"}}},
		{"target null", onError(map[string]any{"CRM_DOWN": nil}), "",
			[]want{{"/nodes/crm/on_error/CRM_DOWN", "on_error target must be a node name or hold, not null"}}},
		{"target empty", onError(map[string]any{"*": " "}), "",
			[]want{{"/nodes/crm/on_error/*", "on_error target must not be empty"}}},
		{"on_error of the wrong type", onError([]any{"failed"}), "",
			[]want{{"/nodes/crm/on_error", "on_error must be a node name, hold, or an object mapping error codes to targets, not array"}}},
		{"on_error empty string", onError(""), "",
			[]want{{"/nodes/crm/on_error", "on_error must not be empty"}}},
		{"on_error map on an end node", func(m map[string]any) { node(m, "done")["on_error"] = map[string]any{"*": "failed"} }, "",
			[]want{{"/nodes/done/on_error", "on_error is not allowed on end nodes"}}},
		{"a node named hold", func(m map[string]any) {
			m["nodes"].(map[string]any)["hold"] = map[string]any{"kind": "end"}
		}, "", []want{{"/nodes/hold", `node name "hold" is reserved`}}},
		{"duplicate code", nil, `{"inputs": {"fields": []}, "start": "a", "nodes": {
			"a": {"kind": "pull", "definition": "noop", "revision": 1, "next": "b", "on_error": {"E": "b", "E": "hold"}},
			"b": {"kind": "end"}}}`, []want{{"/nodes/a/on_error/E", `duplicate key "E"`}}},
		{"every problem of a map at once", onError(map[string]any{"bad code": 3, "OK": "", "*": false}), "", []want{
			{"/nodes/crm/on_error/*", "on_error target must be a node name or hold, not boolean"},
			{"/nodes/crm/on_error/OK", "on_error target must not be empty"},
			{"/nodes/crm/on_error/bad code", `error code "bad code" must match`},
			{"/nodes/crm/on_error/bad code", "on_error target must be a node name or hold, not number"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := []byte(tc.raw)
			if tc.fn != nil {
				doc = edit(t, validDoc, tc.fn)
			}
			p, vs := Parse(doc)
			if p != nil {
				t.Errorf("Parse: got a process, want nil")
			}
			expectExactly(t, vs, tc.wants)
		})
	}
}

func TestCheckOnError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		doc   string
		fn    func(m map[string]any)
		wants []want
	}{
		{"codes routed to nodes and hold", errorDoc, func(map[string]any) {}, nil},
		{"hold as the only target", validDoc, func(m map[string]any) { node(m, "crm")["on_error"] = "hold" }, nil},
		{"a map without a default", errorDoc, func(m map[string]any) { delete(node(m, "crm")["on_error"].(map[string]any), "*") }, nil},
		{"a map with only a default", validDoc, func(m map[string]any) { node(m, "crm")["on_error"] = map[string]any{"*": "failed"} }, nil},
		{"code naming an unknown node", errorDoc, func(m map[string]any) {
			node(m, "crm")["on_error"].(map[string]any)["PAYMENT_DECLINED"] = "nowhere"
		}, []want{{"/nodes/crm/on_error/PAYMENT_DECLINED", `on_error names unknown node "nowhere"`}}},
		{"default naming an unknown node", errorDoc, func(m map[string]any) {
			node(m, "crm")["on_error"].(map[string]any)["*"] = "nowhere"
		}, []want{{"/nodes/crm/on_error/*", `on_error names unknown node "nowhere"`}}},
		// A Camunda habit: no built-in end to fail to (designer QA).
		{"default naming a built-in that is none", errorDoc, func(m map[string]any) {
			node(m, "crm")["on_error"].(map[string]any)["*"] = "error"
		}, []want{{"/nodes/crm/on_error/*", `on_error names unknown node "error" (there is no built-in "error": declare the end node, error: {kind: end, status: failed}, or hold the instance for an operator with hold)`}}},
		{"a built-in that is none, in capitals", errorDoc, func(m map[string]any) {
			node(m, "crm")["on_error"].(map[string]any)["*"] = "Error"
		}, []want{{"/nodes/crm/on_error/*", `on_error names unknown node "Error" (there is no built-in "Error": declare the end node, Error: {kind: end, status: failed}, or hold the instance for an operator with hold)`}}},
		{"code naming the node itself", errorDoc, func(m map[string]any) {
			node(m, "crm")["on_error"].(map[string]any)["CRM_DOWN"] = "crm"
		}, []want{
			{"/nodes/crm/on_error/CRM_DOWN", "on_error must not point at the node itself"},
			// notify is no longer reached.
			{"/nodes/notify", `node "notify" is not reachable from start`}}},
		{"a node reached only through a code is reachable", validDoc, func(m map[string]any) {
			node(m, "crm")["on_error"] = map[string]any{"CRM_DOWN": "retry", "*": "failed"}
			m["nodes"].(map[string]any)["retry"] = map[string]any{"kind": "pull", "definition": "noop", "revision": 1, "next": "done"}
		}, nil},
		{"hold is no edge: a node reached only from hold is not reachable", validDoc, func(m map[string]any) {
			node(m, "crm")["on_error"] = "hold"
			m["nodes"].(map[string]any)["orphan"] = map[string]any{"kind": "end"}
		}, []want{{"/nodes/orphan", `node "orphan" is not reachable from start`}}},
		{"cycle closed by a code", validDoc, func(m map[string]any) {
			node(m, "score")["on_error"] = map[string]any{"destination_http_503": "crm", "*": "failed"}
		}, []want{{"/nodes/score/on_error/destination_http_503", "closes a cycle: crm → score → crm"}}},
		{"cycle closed by the default", validDoc, func(m map[string]any) {
			node(m, "score")["on_error"] = map[string]any{"destination_http_503": "failed", "*": "crm"}
		}, []want{{"/nodes/score/on_error/*", "closes a cycle: crm → score → crm"}}},
		{"hold is no node for next", validDoc, func(m map[string]any) { node(m, "score")["next"] = "hold" }, []want{
			{"/nodes/score/next", `next names unknown node "hold" (hold is an on_error target only)`},
			{"/nodes/charge", `node "charge" is not reachable from start`}}},
		{"hold is no node for routes", validDoc, func(m map[string]any) { sub(node(m, "charge"), "routes")["declined"] = "hold" }, []want{
			{"/nodes/charge/routes/declined", `route "declined" names unknown node "hold" (hold is an on_error target only)`}}},
		{"hold is no node for start", validDoc, func(m map[string]any) { m["start"] = "hold" }, []want{
			{"/start", `start names unknown node "hold"`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, edit(t, tc.doc, tc.fn))
			expectExactly(t, Check(p, resolver, testLimits), tc.wants)
		})
	}
}

// TestCheckOnErrorHandBuilt: Check re-verifies what Parse refuses.
func TestCheckOnErrorHandBuilt(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(validDoc))
	p.Nodes["crm"].OnError = OnError{Codes: map[string]string{"*": "failed", "bad code": "failed", "E": ""}}
	p.Nodes["hold"] = &Node{Name: "hold", Kind: KindEnd}
	p.Nodes["score"].OnError = OnError{Default: "hold"}
	expectExactly(t, Check(p, resolver, testLimits), []want{
		{"/nodes/crm/on_error/*", `the "*" target belongs in OnError.Default`},
		{"/nodes/crm/on_error/E", "on_error target must not be empty"},
		{"/nodes/crm/on_error/bad code", `error code "bad code" must match`},
		{"/nodes/hold", `node name "hold" is reserved`},
		{"/nodes/hold", `node "hold" is not reachable from start`}})
}

// TestCheckErrorBindings: nodes.X.error.code and .message are text,
// normal and always present, readable only where X's failure dominates:
// every path from start passes through an on_error edge of X.
func TestCheckErrorBindings(t *testing.T) {
	t.Parallel()
	const codeAt, msgAt = "/nodes/notify/inputs/reference/from", "/nodes/notify/inputs/label/from"
	bind := func(target, from string) func(m map[string]any) {
		return func(m map[string]any) { sub(node(m, "notify"), "inputs")[target] = map[string]any{"from": from} }
	}
	notDominated := `node "crm" does not always fail before "notify"`
	cases := []struct {
		name  string
		fn    func(m map[string]any)
		wants []want
	}{
		{"reached through one code", func(map[string]any) {}, nil},
		{"reached through a code and the default", func(m map[string]any) {
			node(m, "crm")["on_error"].(map[string]any)["*"] = "notify"
		}, nil},
		{"reached through the only target", func(m map[string]any) { node(m, "crm")["on_error"] = "notify" }, nil},
		{"reached after the error edge through another node", func(m map[string]any) {
			node(m, "crm")["on_error"].(map[string]any)["CRM_DOWN"] = "relay"
			m["nodes"].(map[string]any)["relay"] = map[string]any{
				"kind": "pull", "definition": "noop", "revision": 1, "next": "notify", "on_error": "notify"}
		}, nil},
		{"reached through a success route too", func(m map[string]any) {
			sub(node(m, "crm"), "routes")["existing"] = "notify"
		}, []want{{codeAt, notDominated + `: a path from start reaches "notify" without an on_error edge of "crm" (crm → notify)`}, {msgAt, notDominated}}},
		{"reached through a node that bypasses the source", func(m map[string]any) {
			m["start"] = "gate"
			m["nodes"].(map[string]any)["gate"] = map[string]any{
				"kind": "pull", "definition": "noop", "revision": 1, "next": "crm", "on_error": "notify"}
		}, []want{{codeAt, notDominated + `: a path from start reaches "notify" without an on_error edge of "crm" (gate → notify)`}, {msgAt, notDominated}}},
		{"the source holds instead of leading there", func(m map[string]any) {
			node(m, "crm")["on_error"] = "hold"
			sub(node(m, "crm"), "routes")["existing"] = "notify"
		}, []want{{codeAt, notDominated}, {msgAt, notDominated}}},
		{"the error of a node that does not run before", func(m map[string]any) {
			bind("reference", "nodes.done.error.code")(m)
			bind("label", "nodes.failed.error.code")(m)
		}, []want{
			{codeAt, `node "done" is an end node and has no error`},
			{msgAt, `node "failed" is an end node and has no error`}}},
		{"a node's own error", bind("label", "nodes.notify.error.message"),
			[]want{{msgAt, "a node cannot read its own error"}}},
		{"an unknown node's error", bind("label", "nodes.erp.error.code"),
			[]want{{msgAt, `names unknown node "erp"`}}},
		{"an unknown part of an error", bind("label", "nodes.crm.error.detail"),
			[]want{{msgAt, "a node's error has only code and message"}}},
		{"the whole error", bind("label", "nodes.crm.error"),
			[]want{{msgAt, "a node's error has only code and message"}}},
		{"below the code", bind("label", "nodes.crm.error.code.first"),
			[]want{{msgAt, "a node's error has only code and message"}}},
		{"neither output nor error", bind("label", "nodes.crm.failure.code"),
			[]want{{msgAt, "must look like nodes.<node>.output.<field> or nodes.<node>.error.code"}}},
		{"text cannot feed a choice", bind("tier", "nodes.crm.error.code"),
			[]want{{"/nodes/notify/inputs/tier", "type text cannot feed choice"}}},
		{"text cannot feed an integer", bind("count", "nodes.crm.error.message"),
			[]want{{"/nodes/notify/inputs/count", "type text cannot feed integer"}}},
		{"normal may feed sensitive", bind("note", "nodes.crm.error.message"), nil},
		{"normal may feed secret", bind("card_token", "nodes.crm.error.code"), nil},
		{"the type is judged even when not dominated", func(m map[string]any) {
			sub(node(m, "crm"), "routes")["existing"] = "notify"
			bind("tier", "nodes.crm.error.code")(m)
		}, []want{
			{"/nodes/notify/inputs/tier", "type text cannot feed choice"},
			{"/nodes/notify/inputs/tier/from", notDominated},
			{codeAt, notDominated}, {msgAt, notDominated}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, edit(t, errorDoc, tc.fn))
			expectExactly(t, Check(p, resolver, testLimits), tc.wants)
		})
	}
}

// validDocDigest is validDoc's digest as published before on_error could
// be a map: versions stored then must keep their digests, so a string
// on_error keeps its exact canonical bytes.
const validDocDigest = "sha256:0b05ed9e2b5ab8e2cf8eea3bba167259fa604b4e23919c1f5713411c2dc51f89"

func TestCanonicalOnError(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(validDoc))
	if got := p.Digest(); got != validDocDigest {
		t.Errorf("digest of a version with string on_error: got %s, want %s as before error maps", got, validDocDigest)
	}
	if c := string(p.Canonical()); !strings.Contains(c, `"routes":{"approved":"done","declined":"failed"},"on_error":"failed","destination":"payments"}`) {
		t.Errorf("Canonical: got %s, want on_error as a string where it was", c)
	}

	// Keys sorted, "*" first; a reordered document digests the same.
	c := mustParse(t, []byte(errorDoc)).Canonical()
	if want := `"on_error":{"*":"failed","CRM_DOWN":"notify","PAYMENT_DECLINED":"hold"}`; !bytes.Contains(c, []byte(want)) {
		t.Errorf("Canonical: got %s, want it to contain %s", c, want)
	}
	reordered := strings.Replace(errorDoc, `{"CRM_DOWN": "notify", "PAYMENT_DECLINED": "hold", "*": "failed"}`,
		`{"*": "failed", "PAYMENT_DECLINED": "hold", "CRM_DOWN": "notify"}`, 1)
	if reordered == errorDoc {
		t.Fatal("fixture: the on_error map was not reordered")
	}
	if a, b := mustParse(t, []byte(errorDoc)).Digest(), mustParse(t, []byte(reordered)).Digest(); a != b {
		t.Errorf("Digest: got %s for the reordered map, want %s", b, a)
	}
	p2 := mustParse(t, c)
	if c2 := p2.Canonical(); !bytes.Equal(c, c2) {
		t.Errorf("Parse(Canonical()).Canonical():\n got %s\nwant %s", c2, c)
	}
	if vs := Check(p2, resolver, testLimits); vs != nil {
		t.Errorf("Check of the canonical form: got %s, want none", dump(vs))
	}

	// {"*": x} means x: same bytes, same digest.
	star := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		for _, n := range []string{"crm", "score", "charge"} {
			node(m, n)["on_error"] = map[string]any{"*": "failed"}
		}
	}))
	if got := star.Digest(); got != validDocDigest {
		t.Errorf(`digest with on_error {"*": "failed"}: got %s, want the string form's %s`, got, validDocDigest)
	}

	// Every target counts.
	for name, fn := range map[string]func(m map[string]any){
		"a code's target": func(m map[string]any) { node(m, "crm")["on_error"].(map[string]any)["CRM_DOWN"] = "failed" },
		"a code":          func(m map[string]any) { delete(node(m, "crm")["on_error"].(map[string]any), "PAYMENT_DECLINED") },
		"the default":     func(m map[string]any) { delete(node(m, "crm")["on_error"].(map[string]any), "*") },
	} {
		if mustParse(t, edit(t, errorDoc, fn)).Digest() == mustParse(t, []byte(errorDoc)).Digest() {
			t.Errorf("Digest: unchanged after changing %s", name)
		}
	}
}

func TestNextOnFailure(t *testing.T) {
	t.Parallel()
	p := mustParse(t, edit(t, errorDoc, func(m map[string]any) { node(m, "notify")["on_error"] = "hold" }))
	noDefault := mustParse(t, edit(t, errorDoc, func(m map[string]any) { delete(node(m, "crm")["on_error"].(map[string]any), "*") }))
	cases := []struct {
		p      *Process
		node   string
		code   string
		want   Target
		wantOK bool
	}{
		{p, "crm", "CRM_DOWN", Target{Node: "notify"}, true},
		{p, "crm", "PAYMENT_DECLINED", Target{Hold: true}, true},
		{p, "crm", "destination_http_503", Target{Node: "failed"}, true},
		{p, "crm", "", Target{Node: "failed"}, true},
		{p, "crm", "crm_down", Target{Node: "failed"}, true}, // codes are case-sensitive
		{p, "notify", "ANY", Target{Hold: true}, true},
		{noDefault, "crm", "CRM_DOWN", Target{Node: "notify"}, true},
		{noDefault, "crm", "deadline_exceeded", Target{}, false},
		{p, "done", "CRM_DOWN", Target{}, false},
		{p, "nope", "CRM_DOWN", Target{}, false},
	}
	for _, tc := range cases {
		got, ok := tc.p.NextOnFailure(tc.node, tc.code)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("NextOnFailure(%s, %q): got %+v, %v; want %+v, %v", tc.node, tc.code, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestEvaluateErrorInputs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(errorDoc))
	s := Scope{InstanceID: instanceID, Input: json.RawMessage(`{"name": "Acme"}`), Outputs: map[string]json.RawMessage{},
		Errors: map[string]NodeError{"crm": {Code: "CRM_DOWN", Message: `the CRM said "no"`}}}
	got, err := p.EvaluateInputs("notify", s)
	if err != nil {
		t.Fatalf("EvaluateInputs: got error %v, want none", err)
	}
	if want := `{"label":"the CRM said \"no\"","reference":"CRM_DOWN"}`; string(got) != want {
		t.Errorf("EvaluateInputs:\n got %s\nwant %s", got, want)
	}
	// An empty message is a value, not an absence.
	s.Errors["crm"] = NodeError{Code: "CRM_DOWN"}
	if got, err := p.EvaluateInputs("notify", s); err != nil || string(got) != `{"label":"","reference":"CRM_DOWN"}` {
		t.Errorf("EvaluateInputs with an empty message: got %s, %v", got, err)
	}
	s.Errors = nil
	if _, err := p.EvaluateInputs("notify", s); err == nil || !strings.Contains(err.Error(), "the error of node crm is not in scope") {
		t.Errorf("EvaluateInputs without the error in scope: got %v, want an error saying so", err)
	}
}
