package process

import (
	"encoding/json"
	"strings"
	"testing"
)

const scopeInput = `{
  "company": {"name": "Acme SAS", "country": "FR", "contact": {"email": "jane@acme.example", "phone": "+33 1 23 45 67 89"}},
  "amount": 1200,
  "card_token": "tok_9f8e7d6c5b4a",
  "holder": {"name": "ACME SAS"}}`

const instanceID = "3f2b8c1e-6a4d-4e7b-9c0a-1d2e3f4a5b6c"

func TestEvaluateInputs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(validDoc))
	s := Scope{
		InstanceID: instanceID,
		Input:      json.RawMessage(scopeInput),
		Outputs: map[string]json.RawMessage{
			"crm":   json.RawMessage(`{"result": "created", "crm_id": "CRM-42", "account": {"owner": "bob"}}`),
			"score": json.RawMessage(`{"score": 71, "band": "medium"}`),
		},
	}
	cases := []struct {
		node string
		want string
	}{
		// vat is absent from the input, so vat_number is left out; nested
		// objects and literals come through compacted.
		{"crm", `{"company_name":"Acme SAS","contact":{"email":"jane@acme.example","phone":"+33 1 23 45 67 89"},"country":"FR","source":"web"}`},
		{"score", `{"country":"FR","crm_id":"CRM-42"}`},
		{"charge", `{"amount_cents":1200,"card_token":"tok_9f8e7d6c5b4a","cardholder":{"name":"ACME SAS"},"currency":"EUR","reference":"` + instanceID + `"}`},
	}
	for _, tc := range cases {
		got, err := p.EvaluateInputs(tc.node, s)
		if err != nil {
			t.Errorf("EvaluateInputs(%s): got error %v, want none", tc.node, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("EvaluateInputs(%s):\n got %s\nwant %s", tc.node, got, tc.want)
		}
	}
}

func TestEvaluateInstanceAndNestedOutputs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(`{
	  "inputs": {"fields": [{"name": "meta", "type": "object", "fields": [{"name": "note", "type": "text", "classification": "sensitive"}]}]},
	  "start": "crm",
	  "nodes": {
	    "crm": {"kind": "pull", "definition": "add_company_to_crm", "revision": 2,
	      "inputs": {"company_name": {"value": "Acme"}, "country": {"value": "FR"}, "source": {"value": "partner"}},
	      "routes": {"created": "notify", "existing": "notify"}},
	    "notify": {"kind": "pull", "definition": "notify", "revision": 1,
	      "inputs": {
	        "reference": {"from": "instance.id"},
	        "note": {"from": "input.meta.note"},
	        "label": {"from": "nodes.crm.output.account.owner"},
	        "address": {"value": {"street": "1 rue X", "city": "Paris"}}},
	      "next": "done"},
	    "done": {"kind": "end"}}}`))
	if vs := Check(p, resolver, testLimits); vs != nil {
		t.Fatalf("Check: got %s, want none", dump(vs))
	}
	crmOut := map[string]json.RawMessage{"crm": json.RawMessage(`{"result":"existing","crm_id":"C1","account":{"owner":"bob"}}`)}
	key := "order-7"
	got, err := p.EvaluateInputs("notify", Scope{InstanceID: instanceID, BusinessKey: &key, Input: json.RawMessage(`{"meta": {"note": "hi"}}`), Outputs: crmOut})
	if err != nil {
		t.Fatalf("EvaluateInputs: got error %v, want none", err)
	}
	want := `{"address":{"city":"Paris","street":"1 rue X"},"label":"bob","note":"hi","reference":"` + instanceID + `"}`
	if string(got) != want {
		t.Errorf("EvaluateInputs:\n got %s\nwant %s", got, want)
	}

	// No business key, no meta, no account: every optional source is
	// absent and its target left out.
	got, err = p.EvaluateInputs("notify", Scope{InstanceID: instanceID, Input: json.RawMessage(`{}`),
		Outputs: map[string]json.RawMessage{"crm": json.RawMessage(`{"result":"created","crm_id":"C2"}`)}})
	if err != nil {
		t.Fatalf("EvaluateInputs: got error %v, want none", err)
	}
	want = `{"address":{"city":"Paris","street":"1 rue X"},"reference":"` + instanceID + `"}`
	if string(got) != want {
		t.Errorf("EvaluateInputs with absent sources:\n got %s\nwant %s", got, want)
	}

	// A JSON null counts as absent too; an instance without inputs has none.
	got, err = p.EvaluateInputs("notify", Scope{InstanceID: instanceID, Input: nil,
		Outputs: map[string]json.RawMessage{"crm": json.RawMessage(`{"account":null}`)}})
	if err != nil || string(got) != want {
		t.Errorf("EvaluateInputs with null and empty sources: got %s, %v; want %s, nil", got, err, want)
	}
}

func TestEvaluateInputsErrors(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(validDoc))
	good := Scope{InstanceID: instanceID, Input: json.RawMessage(scopeInput)}
	cases := []struct {
		name string
		node string
		s    Scope
		want string
	}{
		{"unknown node", "nope", good, `process: evaluate nope: unknown node "nope"`},
		{"end node", "done", good, `process: evaluate done: node "done" has kind end, not pull or push`},
		{"outputs missing from scope", "score", good, "outputs of node crm are not in scope"},
		{"no instance id", "charge", Scope{Input: json.RawMessage(scopeInput)}, "the scope has no instance id"},
		{"input not an object", "crm", Scope{InstanceID: instanceID, Input: json.RawMessage(`{"company": "Acme"}`)}, "source input.company.name: company is not an object"},
	}
	for _, tc := range cases {
		_, err := p.EvaluateInputs(tc.node, tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestNavigation(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(validDoc))
	for _, tc := range []struct {
		node, route, want string
	}{
		{"crm", "created", "score"},
		{"crm", "existing", "done"},
		{"score", "", "charge"},
		{"charge", "declined", "failed"},
	} {
		got, err := p.NextOnSuccess(tc.node, tc.route)
		if err != nil || got != tc.want {
			t.Errorf("NextOnSuccess(%s, %q): got %q, %v; want %q, nil", tc.node, tc.route, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ node, route string }{
		{"crm", "unknown"}, {"crm", ""}, {"score", "low"}, {"done", ""}, {"nope", ""},
	} {
		if got, err := p.NextOnSuccess(tc.node, tc.route); err == nil {
			t.Errorf("NextOnSuccess(%s, %q): got %q, nil; want an error", tc.node, tc.route, got)
		}
	}

	if got, ok := p.NextOnFailure("crm", "CRM_DOWN"); !ok || got != (Target{Node: "failed"}) {
		t.Errorf("NextOnFailure(crm): got %+v, %v; want failed, true", got, ok)
	}
	noErr := mustParse(t, edit(t, validDoc, func(m map[string]any) { delete(node(m, "score"), "on_error") }))
	for _, n := range []string{"score", "done", "nope"} {
		if got, ok := noErr.NextOnFailure(n, "CRM_DOWN"); ok {
			t.Errorf("NextOnFailure(%s): got %+v, true; want false", n, got)
		}
	}

	for _, tc := range []struct {
		node, want string
		ok         bool
	}{{"done", "completed", true}, {"failed", "failed", true}, {"crm", "", false}, {"nope", "", false}} {
		if got, ok := p.EndStatus(tc.node); got != tc.want || ok != tc.ok {
			t.Errorf("EndStatus(%s): got %q, %v; want %q, %v", tc.node, got, ok, tc.want, tc.ok)
		}
	}
}

// TestEvaluateBusinessKey: instance.business_key feeds a normal field as
// the instance's business key, and leaves it out when there is none.
func TestEvaluateBusinessKey(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(`{
	  "inputs": {"fields": []},
	  "start": "notify",
	  "nodes": {
	    "notify": {"kind": "pull", "definition": "notify", "revision": 1,
	      "inputs": {"reference": {"from": "instance.id"}, "label": {"from": "instance.business_key"}}, "next": "done"},
	    "done": {"kind": "end"}}}`))
	if vs := Check(p, resolver, testLimits); vs != nil {
		t.Fatalf("Check: got %s, want none", dump(vs))
	}
	key := "order-7"
	for bk, want := range map[*string]string{
		&key: `{"label":"order-7","reference":"` + instanceID + `"}`,
		nil:  `{"reference":"` + instanceID + `"}`,
	} {
		got, err := p.EvaluateInputs("notify", Scope{InstanceID: instanceID, BusinessKey: bk})
		if err != nil || string(got) != want {
			t.Errorf("EvaluateInputs with business key %v: %s, %v; want %s", bk, got, err, want)
		}
	}
}
