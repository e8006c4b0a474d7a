package process

import (
	"slices"
	"strings"
	"testing"
)

// Looser names each binding whose source admits what its field refuses,
// with the field's constraints the source lacks, nested ones included,
// and nothing for a source as strict (an output of the same bound) or
// one that has no constraints to compare (an instance's id).
func TestLooserNamesTheConstraintsASourceLacks(t *testing.T) {
	p := mustParse(t, []byte(validDoc))
	got := Looser(p, resolver)
	want := []string{
		`node charge's input card_token is fed from input.card_token, which lacks or loosens the field's min_length 8: a value outside it fails node charge (invalid_inputs) after the instance started, held or failed as its on_error says; give the source the same constraint for the start to refuse such a value`,
		`node charge's input cardholder is fed from input.holder, which lacks or loosens the field's format email (at email): a value outside it fails node charge (invalid_inputs) after the instance started, held or failed as its on_error says; give the source the same constraint for the start to refuse such a value`,
		`node crm's input company_name is fed from input.company.name, which lacks or loosens the field's max_length 200: a value outside it fails node crm (invalid_inputs) after the instance started, held or failed as its on_error says; give the source the same constraint for the start to refuse such a value`,
		`node crm's input contact is fed from input.company.contact, which lacks or loosens the field's format email (at email): a value outside it fails node crm (invalid_inputs) after the instance started, held or failed as its on_error says; give the source the same constraint for the start to refuse such a value`,
		`node crm's input country is fed from input.company.country, which lacks or loosens the field's pattern "^[A-Z]{2}$": a value outside it fails node crm (invalid_inputs) after the instance started, held or failed as its on_error says; give the source the same constraint for the start to refuse such a value`,
		`node crm's input vat_number is fed from input.company.vat, which lacks or loosens the field's max_length 20: a value outside it fails node crm (invalid_inputs) after the instance started, held or failed as its on_error says; give the source the same constraint for the start to refuse such a value`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Looser:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The process inputs given the fields' constraints: nothing to say.
	strict := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		fields := m["inputs"].(map[string]any)["fields"].([]any)
		company := fields[0].(map[string]any)["fields"].([]any)
		company[0].(map[string]any)["max_length"] = 100
		company[1].(map[string]any)["pattern"] = "^[A-Z]{2}$"
		company[2].(map[string]any)["max_length"] = 20
		company[3].(map[string]any)["fields"].([]any)[0].(map[string]any)["format"] = "email"
		fields[2].(map[string]any)["min_length"] = 12
		fields[3].(map[string]any)["fields"].([]any)[1].(map[string]any)["format"] = "email"
	}))
	if got := Looser(strict, resolver); len(got) != 0 {
		t.Errorf("Looser of sources as strict as their fields: %q, want nothing", got)
	}
	// A choice's values are judged against the text they feed; an
	// earlier node's output is told to constrain the output.
	choice := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		fields := m["inputs"].(map[string]any)["fields"].([]any)
		company := fields[0].(map[string]any)["fields"].([]any)
		company[1] = map[string]any{"name": "country", "type": "choice", "required": true, "values": []any{"FR", "Deutschland"}}
	}))
	got = Looser(choice, resolver)
	if !slices.ContainsFunc(got, func(s string) bool {
		return strings.HasPrefix(s, `node crm's input country is fed from input.company.country, which lacks or loosens the field's pattern "^[A-Z]{2}$" (the choice "Deutschland" does not match it)`)
	}) || slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, `"FR"`) }) {
		t.Errorf("Looser of a choice feeding a patterned text: %q", got)
	}
	fromOutput := mustParse(t, edit(t, validDoc, func(m map[string]any) {
		sub(node(m, "score"), "inputs")["crm_id"] = map[string]any{"from": "nodes.crm.output.account.owner"}
	}))
	want0 := `node score's input crm_id is fed from nodes.crm.output.account.owner, which lacks or loosens the field's max_length 64: a value outside it fails node score (invalid_inputs) after the instance started, held or failed as its on_error says; give that output the same constraint, in a new revision of its definition, for the completion to be refused (invalid_outputs) instead`
	if got := Looser(fromOutput, resolver); !slices.Contains(got, want0) {
		t.Errorf("Looser of an output feeding a stricter input: %q, want %q among them", got, want0)
	}
}
