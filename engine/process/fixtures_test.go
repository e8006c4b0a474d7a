package process

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/contracts"
)

// Revisions the fake resolver knows, as the engine would store them.
var workingDocs = map[string]string{
	// Routing output, a sensitive nested object and an optional list.
	"add_company_to_crm@2": `{
	  "name": "Add company to CRM",
	  "inputs": {"fields": [
	    {"name": "company_name", "type": "text", "required": true, "max_length": 200},
	    {"name": "country", "type": "text", "required": true, "pattern": "^[A-Z]{2}$"},
	    {"name": "vat_number", "type": "text", "max_length": 20},
	    {"name": "contact", "type": "object", "classification": "sensitive", "fields": [
	      {"name": "email", "type": "text", "required": true, "format": "email"},
	      {"name": "phone", "type": "text"}]},
	    {"name": "source", "type": "choice", "required": true, "values": ["web", "partner", "sales"]}]},
	  "outputs": {"fields": [
	    {"name": "result", "type": "choice", "required": true, "values": ["created", "existing"]},
	    {"name": "crm_id", "type": "text", "required": true, "max_length": 64},
	    {"name": "account", "type": "object", "fields": [
	      {"name": "owner", "type": "text", "required": true},
	      {"name": "segment", "type": "text"}]},
	    {"name": "matched_on", "type": "list", "items": {"type": "choice", "values": ["name", "vat_number", "domain"]}}]},
	  "routing_output": "result"}`,
	// The same key at an older revision, without routing.
	"add_company_to_crm@1": `{
	  "name": "Add company to CRM",
	  "inputs": {"fields": [{"name": "company_name", "type": "text", "required": true}]},
	  "outputs": {"fields": [{"name": "crm_id", "type": "text", "required": true}]}}`,
	"score_company@1": `{
	  "name": "Score company",
	  "inputs": {"fields": [
	    {"name": "crm_id", "type": "text", "required": true, "max_length": 64},
	    {"name": "country", "type": "text", "required": true}]},
	  "outputs": {"fields": [
	    {"name": "score", "type": "integer", "required": true, "minimum": 0, "maximum": 100},
	    {"name": "band", "type": "choice", "required": true, "values": ["low", "medium", "high"]}]}}`,
	// Secret and sensitive inputs, routing output.
	"charge_card@1": `{
	  "name": "Charge a card",
	  "inputs": {"fields": [
	    {"name": "amount_cents", "type": "integer", "required": true, "minimum": 1},
	    {"name": "currency", "type": "choice", "required": true, "values": ["EUR", "USD", "GBP"]},
	    {"name": "card_token", "type": "text", "required": true, "classification": "secret", "min_length": 8},
	    {"name": "cardholder", "type": "object", "required": true, "classification": "sensitive", "fields": [
	      {"name": "name", "type": "text", "required": true},
	      {"name": "email", "type": "text", "format": "email"}]},
	    {"name": "reference", "type": "text", "required": true, "max_length": 64}]},
	  "outputs": {"fields": [
	    {"name": "outcome", "type": "choice", "required": true, "values": ["approved", "declined"]},
	    {"name": "authorization_code", "type": "text"}]},
	  "routing_output": "outcome"}`,
	// Every input optional but one, to judge one binding at a time;
	// profile and emails are normal but hold protected fields.
	"notify@1": `{
	  "name": "Notify",
	  "inputs": {"fields": [
	    {"name": "reference", "type": "text", "required": true},
	    {"name": "amount", "type": "number"},
	    {"name": "count", "type": "integer"},
	    {"name": "label", "type": "text"},
	    {"name": "tier", "type": "choice", "values": ["gold", "silver", "bronze"]},
	    {"name": "address", "type": "object", "fields": [
	      {"name": "street", "type": "text", "required": true},
	      {"name": "city", "type": "text", "required": true},
	      {"name": "postcode", "type": "text"}]},
	    {"name": "scores", "type": "list", "items": {"type": "number"}},
	    {"name": "card_token", "type": "text", "classification": "secret"},
	    {"name": "note", "type": "text", "classification": "sensitive"},
	    {"name": "holder", "type": "object", "classification": "sensitive", "fields": [
	      {"name": "name", "type": "text", "required": true},
	      {"name": "token", "type": "text", "classification": "secret"}]},
	    {"name": "profile", "type": "object", "fields": [
	      {"name": "nickname", "type": "text"},
	      {"name": "login", "type": "object", "fields": [
	        {"name": "user", "type": "text"},
	        {"name": "pin", "type": "text", "classification": "secret"}]}]},
	    {"name": "emails", "type": "list", "items": {"type": "text", "classification": "sensitive"}}]},
	  "outputs": {"fields": [{"name": "delivered", "type": "boolean", "required": true}]}}`,
	"noop@1": `{"name": "No-op", "inputs": {"fields": []}, "outputs": {"fields": []}}`,
	// A secret output, for bindings from a node's outputs.
	"vault_read@1": `{"name": "Read the vault", "inputs": {"fields": []},
	  "outputs": {"fields": [{"name": "key", "type": "text", "required": true, "classification": "secret"}]}}`,
}

var destinations = map[string]time.Duration{
	"scoring-api": 5 * time.Second,
	"payments":    10 * time.Second,
	"slow-api":    2 * time.Second,
}

var testLimits = Limits{MaxRetryDelay: 24 * time.Hour, DefaultPushTimeout: 5 * time.Second, MaxPushTimeout: 10 * time.Second}

type fakeResolver struct {
	revs map[string]contracts.Working
}

func (f fakeResolver) Revision(definition string, revision int) (contracts.Working, bool) {
	w, ok := f.revs[fmt.Sprintf("%s@%d", definition, revision)]
	return w, ok
}

func (f fakeResolver) Destination(name string) (time.Duration, bool) {
	d, ok := destinations[name]
	return d, ok
}

// resolver is built once: the fixtures are constants and ParseWorking is
// deterministic.
var resolver = func() fakeResolver {
	f := fakeResolver{revs: map[string]contracts.Working{}}
	for key, doc := range workingDocs {
		w, vs := contracts.ParseWorking([]byte(doc))
		if vs != nil {
			panic(fmt.Sprintf("fixture %s: %v", key, vs))
		}
		f.revs[key] = w
	}
	return f
}()

// validDoc is a realistic onboarding process that checks clean.
const validDoc = `{
  "name": "Onboard company",
  "description": "Create the company, score it and charge the setup fee",
  "inputs": {"fields": [
    {"name": "company", "type": "object", "required": true, "fields": [
      {"name": "name", "type": "text", "required": true},
      {"name": "country", "type": "text", "required": true},
      {"name": "vat", "type": "text"},
      {"name": "contact", "type": "object", "classification": "sensitive", "fields": [
        {"name": "email", "type": "text", "required": true},
        {"name": "phone", "type": "text"}]}]},
    {"name": "amount", "type": "integer", "required": true, "minimum": 1},
    {"name": "card_token", "type": "text", "required": true, "classification": "secret"},
    {"name": "holder", "type": "object", "required": true, "classification": "sensitive", "fields": [
      {"name": "name", "type": "text", "required": true},
      {"name": "email", "type": "text"}]},
    {"name": "tags", "type": "list", "items": {"type": "text"}}]},
  "start": "crm",
  "nodes": {
    "crm": {"kind": "pull", "definition": "add_company_to_crm", "revision": 2,
      "inputs": {
        "company_name": {"from": "input.company.name"},
        "country": {"from": "input.company.country"},
        "vat_number": {"from": "input.company.vat"},
        "contact": {"from": "input.company.contact"},
        "source": {"value": "web"}},
      "policy": {"max_attempts": 3, "retry_delay": "PT10S", "deadline": "P1D", "priority": 5},
      "routes": {"created": "score", "existing": "done"}, "on_error": "failed"},
    "score": {"kind": "push", "definition": "score_company", "revision": 1,
      "destination": "scoring-api", "timeout": "PT3S",
      "inputs": {"crm_id": {"from": "nodes.crm.output.crm_id"}, "country": {"from": "input.company.country"}},
      "next": "charge", "on_error": "failed"},
    "charge": {"kind": "push", "definition": "charge_card", "revision": 1, "destination": "payments",
      "policy": {"priority": 8},
      "inputs": {
        "amount_cents": {"from": "input.amount"},
        "currency": {"value": "EUR"},
        "card_token": {"from": "input.card_token"},
        "cardholder": {"from": "input.holder"},
        "reference": {"from": "instance.id"}},
      "routes": {"approved": "done", "declined": "failed"}, "on_error": "failed"},
    "done": {"kind": "end"},
    "failed": {"kind": "end", "status": "failed"}}}`

// assignDoc feeds one notify input per case from typed process inputs.
const assignDoc = `{
  "inputs": {"fields": [
    {"name": "n_int", "type": "integer", "required": true},
    {"name": "n_num", "type": "number", "required": true},
    {"name": "txt", "type": "text", "required": true},
    {"name": "opt_txt", "type": "text"},
    {"name": "tier", "type": "choice", "required": true, "values": ["gold", "silver"]},
    {"name": "tier_wide", "type": "choice", "required": true, "values": ["gold", "silver", "platinum"]},
    {"name": "addr", "type": "object", "required": true, "fields": [
      {"name": "street", "type": "text", "required": true},
      {"name": "city", "type": "text", "required": true}]},
    {"name": "addr_loose", "type": "object", "required": true, "fields": [
      {"name": "street", "type": "text", "required": true},
      {"name": "city", "type": "text"}]},
    {"name": "addr_extra", "type": "object", "required": true, "fields": [
      {"name": "street", "type": "text", "required": true},
      {"name": "city", "type": "text", "required": true},
      {"name": "country", "type": "text", "required": true}]},
    {"name": "tags", "type": "list", "required": true, "items": {"type": "text"}},
    {"name": "ints", "type": "list", "required": true, "items": {"type": "integer"}},
    {"name": "secret_txt", "type": "text", "required": true, "classification": "secret"},
    {"name": "sens_txt", "type": "text", "required": true, "classification": "sensitive"},
    {"name": "holder", "type": "object", "required": true, "classification": "sensitive", "fields": [
      {"name": "name", "type": "text", "required": true},
      {"name": "token", "type": "text", "required": true}]},
    {"name": "holder_secret_name", "type": "object", "required": true, "classification": "sensitive", "fields": [
      {"name": "name", "type": "text", "required": true, "classification": "secret"}]},
    {"name": "maybe", "type": "object", "fields": [
      {"name": "x", "type": "text", "required": true}]}]},
  "start": "notify",
  "nodes": {
    "notify": {"kind": "pull", "definition": "notify", "revision": 1,
      "inputs": {"reference": {"value": "ref-1"}}, "next": "done"},
    "done": {"kind": "end"}}}`

// edit decodes doc, lets fn change it and re-encodes it, so that each
// case states only what differs from a known-good document.
func edit(t *testing.T, doc string, fn func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	fn(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

// node returns the node object named name inside a decoded document.
func node(m map[string]any, name string) map[string]any {
	return m["nodes"].(map[string]any)[name].(map[string]any)
}

// sub returns (creating if needed) the object member key of m.
func sub(m map[string]any, key string) map[string]any {
	v, ok := m[key].(map[string]any)
	if !ok {
		v = map[string]any{}
		m[key] = v
	}
	return v
}

func mustParse(t *testing.T, doc []byte) *Process {
	t.Helper()
	p, vs := Parse(doc)
	if vs != nil {
		t.Fatalf("Parse: got violations %v, want none", vs)
	}
	return p
}

// want is one expected violation: its exact pointer and a part of its
// message.
type want struct {
	path string
	msg  string
}

// expectExactly checks that got and wants match one to one: every wanted
// violation is reported and nothing else is.
func expectExactly(t *testing.T, got []contracts.Violation, wants []want) {
	t.Helper()
	used := make([]bool, len(got))
	for _, w := range wants {
		found := false
		for i, g := range got {
			if !used[i] && g.Path == w.path && strings.Contains(g.Message, w.msg) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing violation at %q containing %q\n got: %s", w.path, w.msg, dump(got))
		}
	}
	for i, g := range got {
		if !used[i] {
			t.Errorf("unexpected violation %q: %s\nwant: %v", g.Path, g.Message, wants)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b contracts.Violation) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	}) {
		t.Errorf("violations are not sorted by pointer then message: %s", dump(got))
	}
}

func dump(vs []contracts.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "\n  %q: %s", v.Path, v.Message)
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}
