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
		`node charge's input card_token is fed from input.card_token, which lacks the field's min_length 8: a value outside it holds the instance at charge (invalid_inputs) after it started; give the source the same constraint for the start to refuse it`,
		`node charge's input cardholder is fed from input.holder, which lacks the field's format email (at email): a value outside it holds the instance at charge (invalid_inputs) after it started; give the source the same constraint for the start to refuse it`,
		`node crm's input company_name is fed from input.company.name, which lacks the field's max_length 200: a value outside it holds the instance at crm (invalid_inputs) after it started; give the source the same constraint for the start to refuse it`,
		`node crm's input contact is fed from input.company.contact, which lacks the field's format email (at email): a value outside it holds the instance at crm (invalid_inputs) after it started; give the source the same constraint for the start to refuse it`,
		`node crm's input country is fed from input.company.country, which lacks the field's pattern "^[A-Z]{2}$": a value outside it holds the instance at crm (invalid_inputs) after it started; give the source the same constraint for the start to refuse it`,
		`node crm's input vat_number is fed from input.company.vat, which lacks the field's max_length 20: a value outside it holds the instance at crm (invalid_inputs) after it started; give the source the same constraint for the start to refuse it`,
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
}
