package process

import (
	"testing"
	"time"
)

func TestCheckValidProcess(t *testing.T) {
	t.Parallel()
	p := mustParse(t, []byte(validDoc))
	if got := Check(p, resolver, testLimits); got != nil {
		t.Fatalf("Check: got %s, want no violations", dump(got))
	}
}

func TestCheckDocument(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		doc   string
		fn    func(m map[string]any)
		lim   *Limits
		wants []want
	}{
		{"start names no node", validDoc, func(m map[string]any) { m["start"] = "nope" },
			nil, []want{{"/start", `start names unknown node "nope"`}}},
		{"next names unknown node", validDoc, func(m map[string]any) { node(m, "score")["next"] = "nowhere" },
			nil, []want{
				{"/nodes/score/next", `next names unknown node "nowhere"`},
				{"/nodes/charge", `node "charge" is not reachable from start`}}},
		{"route names unknown node", validDoc, func(m map[string]any) { sub(node(m, "crm"), "routes")["existing"] = "nowhere" },
			nil, []want{{"/nodes/crm/routes/existing", `route "existing" names unknown node "nowhere"`}}},
		// A misspelt name gets the closest one as a suggestion.
		{"route names a misspelt node", validDoc, func(m map[string]any) { sub(node(m, "crm"), "routes")["existing"] = "socre" },
			nil, []want{{"/nodes/crm/routes/existing", `route "existing" names unknown node "socre" (did you mean "score"?)`}}},
		{"binding to a misspelt input", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["contry"] = map[string]any{"value": "FR"}
		}, nil, []want{{"/nodes/crm/inputs/contry", `"contry" is not an input of add_company_to_crm@2 (did you mean "country"?)`}}},
		{"source with a misspelt field", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["company_name"] = map[string]any{"from": "input.company.nmae"}
		}, nil, []want{{"/nodes/crm/inputs/company_name/from", `unknown source "input.company.nmae": no field "nmae" (did you mean "name"?)`}}},
		{"on_error misspells hold", validDoc, func(m map[string]any) { node(m, "crm")["on_error"] = map[string]any{"CRM_DOWN": "hodl"} },
			nil, []want{{"/nodes/crm/on_error/CRM_DOWN", `on_error names unknown node "hodl" (did you mean "hold"?)`}}},
		{"source misspelling output", validDoc, func(m map[string]any) {
			sub(node(m, "score"), "inputs")["crm_id"] = map[string]any{"from": "nodes.crm.outputs.crm_id"}
		}, nil, []want{{"/nodes/score/inputs/crm_id/from", `source "nodes.crm.outputs.crm_id" must look like nodes.<node>.output.<field> or nodes.<node>.error.code (did you mean "nodes.crm.output.crm_id"?)`}}},
		{"source misspelling input", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["company_name"] = map[string]any{"from": "inputs.company.name"}
		}, nil, []want{{"/nodes/crm/inputs/company_name/from", `unknown source "inputs.company.name": want ` + sourceForms + ` (did you mean "input.company.name"?)`}}},
		{"on_error names unknown node", validDoc, func(m map[string]any) { node(m, "crm")["on_error"] = "nowhere" },
			nil, []want{{"/nodes/crm/on_error", `on_error names unknown node "nowhere"`}}},
		{"on_error points at itself", validDoc, func(m map[string]any) { node(m, "crm")["on_error"] = "crm" },
			nil, []want{{"/nodes/crm/on_error", "on_error must not point at the node itself"}}},
		{"both next and routes", validDoc, func(m map[string]any) { node(m, "crm")["next"] = "done" },
			nil, []want{{"/nodes/crm", "pull node has both next and routes"}}},
		{"neither next nor routes", validDoc, func(m map[string]any) { delete(node(m, "score"), "next") },
			nil, []want{
				{"/nodes/score", "push node needs next or routes"},
				{"/nodes/charge", `node "charge" is not reachable from start`}}},
		{"cycle through next", validDoc, func(m map[string]any) { node(m, "score")["next"] = "crm" },
			nil, []want{
				{"/nodes/score/next", "closes a cycle: crm → score → crm"},
				{"/nodes/charge", `node "charge" is not reachable from start`}}},
		{"cycle through on_error", validDoc, func(m map[string]any) { node(m, "charge")["on_error"] = "crm" },
			nil, []want{{"/nodes/score/next", "closes a cycle: charge → crm → score → charge"}}},
		{"self loop through a route", validDoc, func(m map[string]any) { sub(node(m, "charge"), "routes")["declined"] = "charge" },
			nil, []want{{"/nodes/charge/routes/declined", "closes a cycle: charge → charge"}}},
		{"unreachable node", validDoc, func(m map[string]any) {
			m["nodes"].(map[string]any)["orphan"] = map[string]any{"kind": "end"}
		}, nil, []want{{"/nodes/orphan", `node "orphan" is not reachable from start`}}},
		{"unknown definition revision", validDoc, func(m map[string]any) { node(m, "crm")["revision"] = 7 },
			nil, []want{{"/nodes/crm/definition", "unknown definition revision add_company_to_crm@7"}}},
		{"unknown definition", validDoc, func(m map[string]any) { node(m, "score")["definition"] = "score_person" },
			nil, []want{{"/nodes/score/definition", "unknown definition revision score_person@1"}}},
		{"route value not mapped", validDoc, func(m map[string]any) { delete(sub(node(m, "crm"), "routes"), "existing") },
			nil, []want{{"/nodes/crm/routes", `route "existing" is not mapped`}}},
		{"route key not a routing value", validDoc, func(m map[string]any) { sub(node(m, "crm"), "routes")["maybe"] = "done" },
			nil, []want{{"/nodes/crm/routes/maybe", `"maybe" is not a value of routing output result`}}},
		{"route key misspelt", validDoc, func(m map[string]any) {
			r := sub(node(m, "crm"), "routes")
			r["existng"] = r["existing"]
			delete(r, "existing")
		}, nil, []want{{"/nodes/crm/routes", `route "existing" is not mapped`},
			{"/nodes/crm/routes/existng", `"existng" is not a value of routing output result (did you mean "existing"?)`}}},
		{"routes on a revision without routing output", validDoc, func(m map[string]any) {
			n := node(m, "score")
			delete(n, "next")
			n["routes"] = map[string]any{"low": "charge"}
		}, nil, []want{{"/nodes/score/routes", "revision score_company@1 has no routing output: use next"}}},
		{"next on a revision with routing output", validDoc, func(m map[string]any) {
			n := node(m, "crm")
			delete(n, "routes")
			n["next"] = "score"
		}, nil, []want{{"/nodes/crm/next", "revision has routing output result: use routes"}}},
		{"pinned to the older non-routing revision", validDoc, func(m map[string]any) {
			n := node(m, "crm")
			n["revision"] = 1
			n["inputs"] = map[string]any{"company_name": map[string]any{"from": "input.company.name"}}
		}, nil, []want{{"/nodes/crm/routes", "revision add_company_to_crm@1 has no routing output: use next"}}},
		{"push without destination", validDoc, func(m map[string]any) { delete(node(m, "charge"), "destination") },
			nil, []want{{"/nodes/charge/destination", "destination is required on push nodes"}}},
		{"push to unknown destination", validDoc, func(m map[string]any) { node(m, "charge")["destination"] = "bank" },
			nil, []want{{"/nodes/charge/destination", `unknown destination "bank"`}}},
		{"timeout over the hard ceiling", validDoc, func(m map[string]any) { node(m, "charge")["timeout"] = "PT11S" },
			nil, []want{{"/nodes/charge/timeout", "timeout PT11S exceeds the hard ceiling PT10S"}}},
		{"timeout under the floor", validDoc, func(m map[string]any) { node(m, "charge")["timeout"] = "PT0.001S" },
			nil, []want{{"/nodes/charge/timeout", "timeout PT0.001S is below the floor PT0.1S"}}},
		{"timeout over the operator ceiling", validDoc, func(m map[string]any) { node(m, "charge")["timeout"] = "PT9S" },
			&Limits{MaxRetryDelay: 24 * time.Hour, DefaultPushTimeout: 5 * time.Second, MaxPushTimeout: 8 * time.Second},
			[]want{{"/nodes/charge/timeout", "timeout PT9S exceeds the ceiling PT8S"}}},
		{"timeout over the destination cap", validDoc, func(m map[string]any) { node(m, "score")["timeout"] = "PT6S" },
			nil, []want{{"/nodes/score/timeout", "timeout PT6S exceeds destination scoring-api's max_timeout PT5S"}}},
		{"default timeout over the destination cap", validDoc, func(m map[string]any) { node(m, "charge")["destination"] = "slow-api" },
			nil, []want{{"/nodes/charge/timeout", "default timeout PT5S (RELAIS_PUSH_DEFAULT_TIMEOUT) exceeds destination slow-api's max_timeout PT2S: set the node's timeout to at most PT2S"}}},
		{"retry_delay over the ceiling", validDoc, func(m map[string]any) { sub(node(m, "crm"), "policy")["retry_delay"] = "P2D" },
			nil, []want{{"/nodes/crm/policy/retry_delay", "retry_delay P2D exceeds the ceiling P1D"}}},
		{"max_retry_delay without a backoff", validDoc, func(m map[string]any) { sub(node(m, "crm"), "policy")["max_retry_delay"] = "PT1M" },
			nil, []want{{"/nodes/crm/policy/max_retry_delay", "max_retry_delay caps a delay that grows after each failure: give retry_backoff above 1"}}},
		{"max_retry_delay below retry_delay", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "policy")["retry_backoff"] = 2
			sub(node(m, "crm"), "policy")["max_retry_delay"] = "PT5S"
		}, nil, []want{{"/nodes/crm/policy/max_retry_delay", "max_retry_delay PT5S is below retry_delay PT10S, the first delay"}}},
		{"max_retry_delay over the ceiling", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "policy")["retry_backoff"] = 1.5
			sub(node(m, "crm"), "policy")["max_retry_delay"] = "P2D"
		}, nil, []want{{"/nodes/crm/policy/max_retry_delay", "max_retry_delay P2D exceeds the ceiling P1D"}}},
		{"required input not bound", validDoc, func(m map[string]any) { delete(sub(node(m, "crm"), "inputs"), "country") },
			nil, []want{{"/nodes/crm/inputs", `required input "country" is not bound`}}},
		{"binding to an unknown input", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["nickname"] = map[string]any{"value": "Acme"}
		}, nil, []want{{"/nodes/crm/inputs/nickname", `"nickname" is not an input of add_company_to_crm@2`}}},
		// A part of an object input: the message says how to bind it
		// (designer QA).
		{"binding to a part of an object input", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["contact.email"] = map[string]any{"from": "input.company.contact.email"}
		}, nil, []want{{"/nodes/crm/inputs/contact.email", `"contact.email" is not an input of add_company_to_crm@2: an object input is bound whole; bind "contact" from an object with its fields, or from a value`}}},
		{"literal not a choice value", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["source"] = map[string]any{"value": "fax"}
		}, nil, []want{{"/nodes/crm/inputs/source/value", ""}}},
		{"literal of the wrong type", validDoc, func(m map[string]any) {
			sub(node(m, "charge"), "inputs")["amount_cents"] = map[string]any{"value": "12"}
		}, nil, []want{{"/nodes/charge/inputs/amount_cents/value", ""}}},
		{"nested literal violations", assignDoc, func(m map[string]any) {
			sub(node(m, "notify"), "inputs")["address"] = map[string]any{"value": map[string]any{"street": 5, "city": "Paris", "postcode": 75001}}
		}, nil, []want{
			{"/nodes/notify/inputs/address/value/postcode", ""},
			{"/nodes/notify/inputs/address/value/street", ""}}},
		{"valid nested literal", assignDoc, func(m map[string]any) {
			sub(node(m, "notify"), "inputs")["address"] = map[string]any{"value": map[string]any{"street": "1 rue X", "city": "Paris"}}
		}, nil, nil},
		{"literal into a secret field", validDoc, func(m map[string]any) {
			sub(node(m, "charge"), "inputs")["card_token"] = map[string]any{"value": "tok_4242424242"}
		}, nil, []want{{"/nodes/charge/inputs/card_token",
			`secret input card_token cannot take a literal value: the process version would hold it in clear; bind it from a process input declared secret, as in {"from": "input.<path>"}`}}},
		{"literal into a sensitive object, even a valid one", validDoc, func(m map[string]any) {
			sub(node(m, "charge"), "inputs")["cardholder"] = map[string]any{"value": map[string]any{"name": "ACME SAS"}}
		}, nil, []want{{"/nodes/charge/inputs/cardholder", "sensitive input cardholder cannot take a literal value"}}},
		{"literal into a nested field of a sensitive object, not judged by type", validDoc, func(m map[string]any) {
			sub(node(m, "charge"), "inputs")["cardholder"] = map[string]any{"value": map[string]any{"name": 5}}
		}, nil, []want{{"/nodes/charge/inputs/cardholder", "sensitive input cardholder cannot take a literal value"}}},
		{"literal into a sensitive field of a routing definition", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["contact"] = map[string]any{"value": map[string]any{"email": "ceo@acme.example"}}
		}, nil, []want{{"/nodes/crm/inputs/contact", "sensitive input contact cannot take a literal value"}}},
		{"literal into a normal object holding a secret field", assignDoc, func(m map[string]any) {
			sub(node(m, "notify"), "inputs")["profile"] = map[string]any{"value": map[string]any{"nickname": "bob", "login": map[string]any{"user": "bob", "pin": "1234"}}}
		}, nil, []want{{"/nodes/notify/inputs/profile",
			"input profile cannot take a literal value: its field profile.login.pin is secret and the process version would hold it in clear; bind profile from a process input whose fields are declared with the same classifications"}}},
		{"literal into a normal object holding a secret field, the secret left out", assignDoc, func(m map[string]any) {
			sub(node(m, "notify"), "inputs")["profile"] = map[string]any{"value": map[string]any{"nickname": "bob"}}
		}, nil, []want{{"/nodes/notify/inputs/profile", "its field profile.login.pin is secret"}}},
		{"literal into a list of sensitive items", assignDoc, func(m map[string]any) {
			sub(node(m, "notify"), "inputs")["emails"] = map[string]any{"value": []any{"a@b.example"}}
		}, nil, []want{{"/nodes/notify/inputs/emails", "its field emails[] is sensitive"}}},
		{"literal into a normal field beside protected ones", assignDoc, func(m map[string]any) {
			sub(node(m, "notify"), "inputs")["label"] = map[string]any{"value": "hello"}
		}, nil, nil},
		{"unknown process input", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["company_name"] = map[string]any{"from": "input.company.nick"}
		}, nil, []want{{"/nodes/crm/inputs/company_name/from", `unknown source "input.company.nick": no field "nick"`}}},
		{"path through a text field", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["company_name"] = map[string]any{"from": "input.company.name.first"}
		}, nil, []want{{"/nodes/crm/inputs/company_name/from", "name is a text, not an object"}}},
		{"path into a list", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["vat_number"] = map[string]any{"from": "input.tags.0"}
		}, nil, []want{{"/nodes/crm/inputs/vat_number/from", "tags is a list and its items cannot be addressed"}}},
		{"source root unknown", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["vat_number"] = map[string]any{"from": "env.VAT"}
		}, nil, []want{{"/nodes/crm/inputs/vat_number/from", `unknown source "env.VAT"`}}},
		{"empty path segment", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["vat_number"] = map[string]any{"from": "input..vat"}
		}, nil, []want{{"/nodes/crm/inputs/vat_number/from", "empty path segment"}}},
		{"unknown instance source", validDoc, func(m map[string]any) {
			sub(node(m, "charge"), "inputs")["reference"] = map[string]any{"from": "instance.key"}
		}, nil, []want{{"/nodes/charge/inputs/reference/from", "want instance.id or instance.business_key"}}},
		{"node source without output segment", validDoc, func(m map[string]any) {
			sub(node(m, "score"), "inputs")["crm_id"] = map[string]any{"from": "nodes.crm.crm_id"}
		}, nil, []want{{"/nodes/score/inputs/crm_id/from", "must look like nodes.<node>.output.<field>"}}},
		{"node source names unknown node", validDoc, func(m map[string]any) {
			sub(node(m, "score"), "inputs")["crm_id"] = map[string]any{"from": "nodes.erp.output.id"}
		}, nil, []want{{"/nodes/score/inputs/crm_id/from", `names unknown node "erp"`}}},
		{"node source is an end node", validDoc, func(m map[string]any) {
			sub(node(m, "score"), "inputs")["crm_id"] = map[string]any{"from": "nodes.done.output.id"}
		}, nil, []want{{"/nodes/score/inputs/crm_id/from", `node "done" is an end node and has no outputs`}}},
		{"node source unknown output", validDoc, func(m map[string]any) {
			sub(node(m, "score"), "inputs")["crm_id"] = map[string]any{"from": "nodes.crm.output.crm_ref"}
		}, nil, []want{{"/nodes/score/inputs/crm_id/from", `no field "crm_ref"`}}},
		{"node source nested output", validDoc, func(m map[string]any) {
			sub(node(m, "score"), "inputs")["crm_id"] = map[string]any{"from": "nodes.crm.output.account.segment"}
		}, nil, []want{{"/nodes/score/inputs/crm_id", "source may be absent but input crm_id is required"}}},
		{"node reads its own outputs", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["vat_number"] = map[string]any{"from": "nodes.crm.output.crm_id"}
		}, nil, []want{{"/nodes/crm/inputs/vat_number/from", "a node cannot read its own outputs"}}},
		{"upstream node reads a downstream one", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["vat_number"] = map[string]any{"from": "nodes.score.output.band"}
		}, nil, []want{
			{"/nodes/crm/inputs/vat_number/from", `node "score" does not always complete before "crm"`}}},
		{"type mismatch from a node output", validDoc, func(m map[string]any) {
			sub(node(m, "charge"), "inputs")["reference"] = map[string]any{"from": "nodes.score.output.score"}
		}, nil, []want{{"/nodes/charge/inputs/reference", "type integer cannot feed text"}}},
		{"classification decreases from a process input", validDoc, func(m map[string]any) {
			sub(node(m, "crm"), "inputs")["company_name"] = map[string]any{"from": "input.card_token"}
		}, nil, []want{{"/nodes/crm/inputs/company_name", "secret source cannot feed normal field company_name: protection may only grow; classify company_name secret in a new revision of the node's definition, or feed it from a process input classified normal (an input feeding fields of two classes fits neither: give each field an input of its own)"}}},
		{"absent business key feeds a required input", validDoc, func(m map[string]any) {
			sub(node(m, "charge"), "inputs")["reference"] = map[string]any{"from": "instance.business_key"}
		}, nil, []want{{"/nodes/charge/inputs/reference", "source may be absent but input reference is required"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, edit(t, tc.doc, tc.fn))
			lim := testLimits
			if tc.lim != nil {
				lim = *tc.lim
			}
			expectExactly(t, Check(p, resolver, lim), tc.wants)
		})
	}
}
