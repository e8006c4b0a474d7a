package process

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/contracts"
)

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(`{
	  "inputs": {"fields": []},
	  "start": "a",
	  "nodes": {
	    "a": {"kind": "pull", "definition": "noop", "revision": 1, "next": "b"},
	    "b": {"kind": "push", "definition": "noop", "revision": 1, "destination": "payments", "next": "c"},
	    "c": {"kind": "end"}}}`))
	if got, want := p.Nodes["a"].Policy, (Policy{MaxAttempts: 3, RetryDelay: 10 * time.Second, Priority: 5}); got != want {
		t.Errorf("pull policy: got %+v, want %+v", got, want)
	}
	if got, want := p.Nodes["b"].Policy, (Policy{MaxAttempts: 1, Priority: 5}); got != want {
		t.Errorf("push policy: got %+v, want %+v", got, want)
	}
	if got := p.Nodes["b"].Timeout; got != 0 {
		t.Errorf("push timeout: got %v, want 0 (operator default)", got)
	}
	if got, want := p.Nodes["b"].PushTimeout(testLimits), 5*time.Second; got != want {
		t.Errorf("PushTimeout: got %v, want %v", got, want)
	}
	if got, want := p.Nodes["b"].PushTimeout(Limits{}), FallbackPushTimeout; got != want {
		t.Errorf("PushTimeout without limits: got %v, want %v", got, want)
	}
	if got, want := p.Nodes["c"].Status, StatusCompleted; got != want {
		t.Errorf("end status: got %q, want %q", got, want)
	}
	if got := p.Nodes["a"].Inputs; got == nil || len(got) != 0 {
		t.Errorf("inputs: got %v, want an empty map", got)
	}
	if got := p.Nodes["a"].Routes; got != nil {
		t.Errorf("routes: got %v, want nil", got)
	}
	if p.Nodes["a"].Name != "a" {
		t.Errorf("name: got %q, want %q", p.Nodes["a"].Name, "a")
	}
}

func TestParseValues(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(validDoc))
	crm := p.Nodes["crm"]
	if got, want := crm.Policy, (Policy{MaxAttempts: 3, RetryDelay: 10 * time.Second, Deadline: 24 * time.Hour, Priority: 5}); got != want {
		t.Errorf("policy: got %+v, want %+v", got, want)
	}
	if got, want := crm.Inputs["company_name"].From, "input.company.name"; got != want {
		t.Errorf("from: got %q, want %q", got, want)
	}
	if got, want := string(crm.Inputs["source"].Value), `"web"`; got != want {
		t.Errorf("value: got %s, want %s", got, want)
	}
	if crm.Inputs["company_name"].Value != nil {
		t.Errorf("value of a from binding: got %s, want nil", crm.Inputs["company_name"].Value)
	}
	if got, want := crm.Routes["created"], "score"; got != want {
		t.Errorf("route: got %q, want %q", got, want)
	}
	if got, want := p.Nodes["score"].Timeout, 3*time.Second; got != want {
		t.Errorf("timeout: got %v, want %v", got, want)
	}
	if got, want := p.Nodes["charge"].Policy, (Policy{MaxAttempts: 1, Priority: 8}); got != want {
		t.Errorf("push policy: got %+v, want %+v", got, want)
	}
	if got, want := p.Nodes["failed"].Status, StatusFailed; got != want {
		t.Errorf("status: got %q, want %q", got, want)
	}
	if got, want := len(p.Inputs.Fields), 5; got != want {
		t.Errorf("input fields: got %d, want %d", got, want)
	}
	// Literal values are kept in canonical form.
	p = mustParse(t, edit(t, validDoc, func(m map[string]any) {
		sub(node(m, "charge"), "inputs")["cardholder"] = map[string]any{"value": json.RawMessage(`{"name": "A", "email": "a@b.example"}`)}
	}))
	if got, want := string(p.Nodes["charge"].Inputs["cardholder"].Value), `{"email":"a@b.example","name":"A"}`; got != want {
		t.Errorf("literal: got %s, want %s", got, want)
	}
}

func TestParseViolations(t *testing.T) {
	t.Parallel()
	raw := func(s string) func(*testing.T) []byte { return func(*testing.T) []byte { return []byte(s) } }
	ed := func(fn func(m map[string]any)) func(*testing.T) []byte {
		return func(t *testing.T) []byte { return edit(t, validDoc, fn) }
	}
	cases := []struct {
		name  string
		doc   func(*testing.T) []byte
		wants []want
	}{
		{"empty", raw(""), []want{{"", "malformed json"}}},
		{"truncated", raw(`{"start": "a"`), []want{{"", "malformed json"}}},
		{"trailing data", raw(`{} {}`), []want{{"", "malformed json"}}},
		{"not an object", raw(`[]`), []want{{"", "document must be an object, not array"}}},
		{"missing start nodes and inputs", raw(`{}`), []want{
			{"/inputs", "inputs is required"}, {"/nodes", "nodes is required"}, {"/start", "start is required"}}},
		{"wrong top-level types", raw(`{"name": 1, "inputs": [], "start": 5, "nodes": []}`), []want{
			{"/inputs", "contract must be an object, not array"},
			{"/name", "name must be a string, not number"},
			{"/nodes", "nodes must be an object, not array"},
			{"/start", "start must be a string, not number"}}},
		{"empty nodes", raw(`{"inputs": {"fields": []}, "start": "a", "nodes": {}}`), []want{{"/nodes", "nodes must not be empty"}}},
		{"unknown top-level key", ed(func(m map[string]any) { m["version"] = 2 }), []want{{"/version", `unknown key "version"`}}},
		{"inputs contract problems are re-based", ed(func(m map[string]any) {
			m["inputs"] = map[string]any{"fields": []any{map[string]any{"name": "Bad", "type": "text"}, map[string]any{"name": "x", "type": "colour"}}}
		}), []want{{"/inputs/fields/0/name", "field name"}, {"/inputs/fields/1/type", `unknown type "colour"`}}},
		{"inputs without fields", ed(func(m map[string]any) { m["inputs"] = map[string]any{} }),
			[]want{{"/inputs/fields", "fields is required"}}},
		{"duplicate keys", raw(`{"inputs": {"fields": []}, "start": "a", "start": "b",
			"nodes": {"a": {"kind": "end"}, "a": {"kind": "end"}}}`), []want{
			{"/nodes/a", `duplicate node "a"`}, {"/start", `duplicate key "start"`}}},
		{"bad node name", ed(func(m map[string]any) {
			m["nodes"].(map[string]any)["Bad-Name"] = map[string]any{"kind": "end"}
		}), []want{{"/nodes/Bad-Name", `node name "Bad-Name" must match`}}},
		{"node name with a slash is escaped", ed(func(m map[string]any) {
			m["nodes"].(map[string]any)["a/b"] = map[string]any{"kind": "end"}
		}), []want{{"/nodes/a~1b", `node name "a/b" must match`}}},
		{"node not an object", ed(func(m map[string]any) { m["nodes"].(map[string]any)["done"] = "end" }),
			[]want{{"/nodes/done", "node must be an object, not string"}}},
		{"unknown node key", ed(func(m map[string]any) { node(m, "crm")["colour"] = "red" }),
			[]want{{"/nodes/crm/colour", `unknown key "colour"`}}},
		{"missing kind", ed(func(m map[string]any) { delete(node(m, "crm"), "kind") }),
			[]want{{"/nodes/crm/kind", "kind is required"}}},
		{"unknown kind", ed(func(m map[string]any) { node(m, "crm")["kind"] = "timer" }),
			[]want{{"/nodes/crm/kind", `unknown kind "timer", want pull, push or end`}}},
		{"misspelt kind", ed(func(m map[string]any) { node(m, "crm")["kind"] = "pul" }),
			[]want{{"/nodes/crm/kind", `unknown kind "pul", want pull, push or end (did you mean "pull"?)`}}},
		{"missing definition and revision", ed(func(m map[string]any) {
			delete(node(m, "crm"), "definition")
			delete(node(m, "score"), "revision")
		}), []want{
			{"/nodes/crm/definition", "definition is required on pull nodes"},
			{"/nodes/score/revision", "revision is required on push nodes"}}},
		{"revision zero", ed(func(m map[string]any) { node(m, "crm")["revision"] = 0 }),
			[]want{{"/nodes/crm/revision", "revision must be an integer from 1 to 2147483647"}}},
		{"revision fraction", ed(func(m map[string]any) { node(m, "crm")["revision"] = 1.5 }),
			[]want{{"/nodes/crm/revision", "revision must be an integer, not 1.5"}}},
		{"revision huge", ed(func(m map[string]any) { node(m, "crm")["revision"] = json.Number("99999999999999999999") }),
			[]want{{"/nodes/crm/revision", "revision must be an integer from 1 to 2147483647"}}},
		{"revision negative huge", ed(func(m map[string]any) { node(m, "crm")["revision"] = json.Number("-99999999999999999999") }),
			[]want{{"/nodes/crm/revision", "revision must be an integer from 1 to 2147483647"}}},
		{"revision string", ed(func(m map[string]any) { node(m, "crm")["revision"] = "2" }),
			[]want{{"/nodes/crm/revision", "revision must be an integer, not string"}}},
		{"definition empty", ed(func(m map[string]any) { node(m, "crm")["definition"] = "" }),
			[]want{{"/nodes/crm/definition", "definition must not be empty"}}},
		{"bad retry_delay", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["retry_delay"] = "10s" }),
			[]want{{"/nodes/crm/policy/retry_delay", "not an ISO-8601 duration"}}},
		{"duration of the wrong type", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["deadline"] = 60 }),
			[]want{{"/nodes/crm/policy/deadline", "deadline must be an ISO-8601 duration string"}}},
		{"deadline in months", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["deadline"] = "P1M" }),
			[]want{{"/nodes/crm/policy/deadline", "years and months have no fixed length"}}},
		{"zero deadline", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["deadline"] = "PT0S" }),
			[]want{{"/nodes/crm/policy/deadline", "deadline must be positive"}}},
		{"max_attempts zero", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["max_attempts"] = 0 }),
			[]want{{"/nodes/crm/policy/max_attempts", "max_attempts must be between 1 and 100"}}},
		{"max_attempts too many", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["max_attempts"] = 101 }),
			[]want{{"/nodes/crm/policy/max_attempts", "max_attempts must be between 1 and 100"}}},
		{"priority too high", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["priority"] = 10 }),
			[]want{{"/nodes/crm/policy/priority", "priority must be between 0 and 9"}}},
		{"priority negative", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["priority"] = -1 }),
			[]want{{"/nodes/crm/policy/priority", "priority must be between 0 and 9"}}},
		{"unknown policy key", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["backoff"] = "exponential" }),
			[]want{{"/nodes/crm/policy/backoff", `unknown key "backoff" (did you mean "retry_backoff"?)`}}},
		{"Temporal's backoff coefficient", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["backoffCoefficient"] = 2 }),
			[]want{{"/nodes/crm/policy/backoffCoefficient", `unknown key "backoffCoefficient" (did you mean "retry_backoff"?)`}}},
		{"Temporal's maximum interval", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["maximumInterval"] = "PT1M" }),
			[]want{{"/nodes/crm/policy/maximumInterval", `unknown key "maximumInterval" (did you mean "max_retry_delay"?)`}}},
		{"retry_backoff a string", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["retry_backoff"] = "2" }),
			[]want{{"/nodes/crm/policy/retry_backoff", "retry_backoff must be a number, not string"}}},
		{"retry_backoff below 1", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["retry_backoff"] = 0.5 }),
			[]want{{"/nodes/crm/policy/retry_backoff", "retry_backoff must be a number between 1 (a fixed delay) and 10"}}},
		{"retry_backoff above 10", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["retry_backoff"] = 11 }),
			[]want{{"/nodes/crm/policy/retry_backoff", "retry_backoff must be a number between 1 (a fixed delay) and 10"}}},
		{"zero max_retry_delay", ed(func(m map[string]any) {
			sub(node(m, "crm"), "policy")["retry_backoff"] = 2
			sub(node(m, "crm"), "policy")["max_retry_delay"] = "PT0S"
		}), []want{{"/nodes/crm/policy/max_retry_delay", "max_retry_delay must be positive"}}},
		{"another platform's policy key", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["retries"] = 3 }),
			[]want{{"/nodes/crm/policy/retries", `unknown key "retries" (did you mean "max_attempts"?)`}}},
		{"an apply file's header", ed(func(m map[string]any) { m["kind"], m["key"] = "Process", "onboard" }),
			[]want{{"/key", `unknown key "key"` + contracts.ApplyKeysHint}, {"/kind", `unknown key "kind"` + contracts.ApplyKeysHint}}},
		{"misspelt policy key", ed(func(m map[string]any) { sub(node(m, "crm"), "policy")["max_attempt"] = 2 }),
			[]want{{"/nodes/crm/policy/max_attempt", `unknown key "max_attempt" (did you mean "max_attempts"?)`}}},
		{"policy not an object", ed(func(m map[string]any) { node(m, "crm")["policy"] = "fast" }),
			[]want{{"/nodes/crm/policy", "policy must be an object, not string"}}},
		{"destination on a pull node", ed(func(m map[string]any) { node(m, "crm")["destination"] = "payments" }),
			[]want{{"/nodes/crm/destination", "destination is not allowed on pull nodes"}}},
		{"timeout on a pull node", ed(func(m map[string]any) { node(m, "crm")["timeout"] = "PT1S" }),
			[]want{{"/nodes/crm/timeout", "timeout is not allowed on pull nodes"}}},
		{"status on a pull node", ed(func(m map[string]any) { node(m, "crm")["status"] = "failed" }),
			[]want{{"/nodes/crm/status", "status is not allowed on pull nodes"}}},
		{"routes on an end node", ed(func(m map[string]any) { node(m, "done")["routes"] = map[string]any{"a": "failed"} }),
			[]want{{"/nodes/done/routes", "routes is not allowed on end nodes"}}},
		{"next and on_error on an end node", ed(func(m map[string]any) {
			node(m, "done")["next"] = "failed"
			node(m, "done")["on_error"] = "failed"
		}), []want{
			{"/nodes/done/next", "next is not allowed on end nodes"},
			{"/nodes/done/on_error", "on_error is not allowed on end nodes"}}},
		{"push nodes are never retried", ed(func(m map[string]any) {
			sub(node(m, "score"), "policy")["max_attempts"] = 2
			sub(node(m, "score"), "policy")["retry_delay"] = "PT1S"
			sub(node(m, "score"), "policy")["retry_backoff"] = 2
		}), []want{
			{"/nodes/score/policy/max_attempts", "push nodes are never retried"},
			{"/nodes/score/policy/retry_backoff", "push nodes are never retried: retry_backoff is not allowed"},
			{"/nodes/score/policy/retry_delay", "push nodes are never retried"}}},
		{"zero push timeout", ed(func(m map[string]any) { node(m, "score")["timeout"] = "PT0S" }),
			[]want{{"/nodes/score/timeout", "timeout must be positive"}}},
		{"binding with both from and value", ed(func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["source"] = map[string]any{"from": "input.company.name", "value": "web"}
		}), []want{{"/nodes/crm/inputs/source", "binding must have either from or value, not both"}}},
		{"binding with neither", ed(func(m map[string]any) { sub(node(m, "crm"), "inputs")["source"] = map[string]any{} }),
			[]want{{"/nodes/crm/inputs/source", "binding must have either from or value"}}},
		{"binding with a null value", ed(func(m map[string]any) { sub(node(m, "crm"), "inputs")["source"] = map[string]any{"value": nil} }),
			[]want{{"/nodes/crm/inputs/source/value", "value must not be null: leave the input unbound to give it none"}}},
		{"binding with an unknown key", ed(func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["source"] = map[string]any{"value": "web", "default": "web"}
		}), []want{{"/nodes/crm/inputs/source/default", `unknown key "default"`}}},
		{"binding not an object", ed(func(m map[string]any) { sub(node(m, "crm"), "inputs")["source"] = "web" }),
			[]want{{"/nodes/crm/inputs/source", "binding must be an object with from or value, not string"}}},
		{"from not a string", ed(func(m map[string]any) { sub(node(m, "crm"), "inputs")["source"] = map[string]any{"from": 3} }),
			[]want{{"/nodes/crm/inputs/source/from", "from must be a string, not number"}}},
		{"duplicate key inside a literal", raw(`{"inputs": {"fields": []}, "start": "a", "nodes": {
			"a": {"kind": "pull", "definition": "noop", "revision": 1, "next": "b",
			      "inputs": {"x": {"value": {"k": 1, "k": 2}}}},
			"b": {"kind": "end"}}}`), []want{{"/nodes/a/inputs/x/value/k", `duplicate key "k"`}}},
		{"routes not an object", ed(func(m map[string]any) { node(m, "crm")["routes"] = []any{"score"} }),
			[]want{{"/nodes/crm/routes", "routes must be an object, not array"}}},
		{"route target not a string", ed(func(m map[string]any) { sub(node(m, "crm"), "routes")["created"] = 1 }),
			[]want{{"/nodes/crm/routes/created", "route target must be a node name string, not number"}}},
		{"next not a string", ed(func(m map[string]any) { node(m, "score")["next"] = true }),
			[]want{{"/nodes/score/next", "next must be a string, not boolean"}}},
		{"unknown end status", ed(func(m map[string]any) { node(m, "failed")["status"] = "aborted" }),
			[]want{{"/nodes/failed/status", `unknown status "aborted", want completed or failed`}}},
		{"misspelt end status", ed(func(m map[string]any) { node(m, "failed")["status"] = "failled" }),
			[]want{{"/nodes/failed/status", `unknown status "failled", want completed or failed (did you mean "failed"?)`}}},
		{"every problem at once", ed(func(m map[string]any) {
			m["extra"] = true
			node(m, "crm")["kind"] = "timer"
			sub(node(m, "score"), "policy")["priority"] = 12
			node(m, "charge")["timeout"] = "soon"
			node(m, "failed")["status"] = "broken"
		}), []want{
			{"/extra", `unknown key "extra"`},
			{"/nodes/charge/timeout", "not an ISO-8601 duration"},
			{"/nodes/crm/kind", `unknown kind "timer"`},
			{"/nodes/failed/status", `unknown status "broken"`},
			{"/nodes/score/policy/priority", "priority must be between 0 and 9"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, vs := Parse(tc.doc(t))
			if p != nil {
				t.Errorf("Parse: got a process with violations %v, want nil", vs)
			}
			expectExactly(t, vs, tc.wants)
		})
	}
}

func TestParseNullMeansAbsent(t *testing.T) {
	t.Parallel()
	p := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		m["description"] = nil
		node(m, "crm")["policy"] = nil
		node(m, "done")["status"] = nil
	}))
	if p.Description != "" || p.Nodes["crm"].Policy.Deadline != 0 || p.Nodes["done"].Status != StatusCompleted {
		t.Errorf("null members: got description %q, deadline %v, status %q; want defaults",
			p.Description, p.Nodes["crm"].Policy.Deadline, p.Nodes["done"].Status)
	}
}

// TestParseLenient: a document whose only problems are leaf values comes
// back parsed for the static checks; any other problem keeps it back.
func TestParseLenient(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		fn        func(m map[string]any)
		checkable bool
	}{
		"a retry delay":     {func(m map[string]any) { sub(node(m, "crm"), "policy")["retry_delay"] = "10s" }, true},
		"a push timeout":    {func(m map[string]any) { node(m, "score")["timeout"] = "30 seconds" }, true},
		"a name too long":   {func(m map[string]any) { m["name"] = strings.Repeat("x", 5000) }, true},
		"a next not a name": {func(m map[string]any) { node(m, "score")["next"] = 3 }, false},
		"an unknown key":    {func(m map[string]any) { sub(node(m, "crm"), "policy")["backoff"] = "PT1S" }, false},
	} {
		p, vs := ParseLenient(edit(t, validDoc, c.fn))
		if len(vs) == 0 || (p != nil) != c.checkable {
			t.Errorf("%s: process %v, %d problem(s); want checkable %v", name, p != nil, len(vs), c.checkable)
		}
	}
}
