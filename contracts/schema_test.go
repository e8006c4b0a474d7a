package contracts

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestJSONSchemaDocument(t *testing.T) {
	t.Parallel()
	c := mustParseWorking(t, richWorking).Inputs
	doc := c.JSONSchema()
	if again := c.JSONSchema(); !bytes.Equal(doc, again) {
		t.Fatalf("JSONSchema not deterministic:\n%s\n%s", doc, again)
	}
	var s map[string]any
	if err := json.Unmarshal(doc, &s); err != nil {
		t.Fatalf("JSONSchema is not JSON: %v", err)
	}
	if got := s["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema: got %v, want the 2020-12 dialect", got)
	}
	if got, want := s["required"], []any{"company_name", "contact_email", "tier"}; !reflect.DeepEqual(got, want) {
		t.Errorf("required: got %v, want %v", got, want)
	}

	// Every object level must forbid additional properties.
	var walk func(path string, node map[string]any)
	objects := 0
	walk = func(path string, node map[string]any) {
		if node["type"] == "object" {
			objects++
			if node["additionalProperties"] != false {
				t.Errorf("%s: additionalProperties = %v, want false", path, node["additionalProperties"])
			}
			props, _ := node["properties"].(map[string]any)
			for name, p := range props {
				walk(path+"/"+name, p.(map[string]any))
			}
		}
		if items, ok := node["items"].(map[string]any); ok {
			walk(path+"/[]", items)
		}
	}
	walk("", s)
	if objects != 5 { // root, address, contacts items, card, owner
		t.Errorf("found %d object levels, want 5", objects)
	}

	props := s["properties"].(map[string]any)
	checks := []struct {
		field string
		want  map[string]any
	}{
		{"company_name", map[string]any{"type": "string", "minLength": 1.0, "maxLength": 200.0, "description": "Legal name", "x-classification": "normal"}},
		{"website", map[string]any{"type": "string", "format": "uri", "x-classification": "normal"}},
		{"crm_id", map[string]any{"type": "string", "pattern": "^[A-Z]{3}-[0-9]{6}$", "x-classification": "normal"}},
		{"employees", map[string]any{"type": "integer", "minimum": 1.0, "maximum": 1000000.0, "x-classification": "normal"}},
		{"annual_revenue", map[string]any{"type": "number", "minimum": 0.0, "x-classification": "sensitive"}},
		{"is_customer", map[string]any{"type": "boolean", "x-classification": "normal"}},
		{"founded", map[string]any{"type": "string", "format": "date", "x-classification": "normal"}},
		{"last_contact", map[string]any{"type": "string", "format": "date-time", "pattern": dateTimePattern, "x-classification": "normal"}},
		{"tier", map[string]any{"type": "string", "enum": []any{"gold", "silver", "bronze"}, "x-classification": "normal"}},
		{"tags", map[string]any{"type": "array", "maxItems": 10.0, "x-classification": "normal",
			"items": map[string]any{"type": "string", "maxLength": 30.0, "x-classification": "normal"}}},
		{"api_key", map[string]any{"type": "string", "x-classification": "secret"}},
	}
	for _, ck := range checks {
		if got := props[ck.field]; !reflect.DeepEqual(got, ck.want) {
			t.Errorf("properties.%s:\n got %v\nwant %v", ck.field, got, ck.want)
		}
	}
	card := props["card"].(map[string]any)["properties"].(map[string]any)
	if got := card["holder"].(map[string]any)["x-classification"]; got != "sensitive" {
		t.Errorf("card.holder x-classification: got %v, want inherited sensitive", got)
	}
}

func TestJSONSchemaMatchesValidate(t *testing.T) {
	t.Parallel()
	w := mustParseWorking(t, richWorking)
	for _, c := range []Contract{w.Inputs, w.Outputs} {
		v := mustCompile(t, c)
		indep := independentSchema(t, c)
		payloads := []string{
			richPayload,
			`{}`,
			`{"decision":"approved"}`,
			`{"decision":"maybe"}`,
			`{"decision":"review","crm_ref":"X1","reviewed_at":"2024-01-01T00:00:00Z"}`,
			`{"decision":"review","reviewed_at":"yesterday"}`,
			`{"company_name":"A","contact_email":"a@b.co","tier":"gold","scores":[-1]}`,
			`{"company_name":"A","contact_email":"a@b.co","tier":"gold","contacts":[{"name":"x","extra":1}]}`,
			`{"company_name":"A","contact_email":"a@b.co","tier":"gold","card":{"token":5}}`,
			`{"company_name":"A","contact_email":"a@b.co","tier":"gold","founded":"2024-02-30"}`,
		}
		for _, p := range payloads {
			checkAgreement(t, v, indep, p)
		}
	}
}
