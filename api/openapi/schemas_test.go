package openapi_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/relais/relais/contracts"
)

// The contract schemas a revision serves (GET …/schemas/inputs) carry
// keywords of Relais's own, which a strict validator (Ajv's default)
// refuses unless it is told of them: docs/contracts.md names each, with the call
// that declares it, where it says the schemas serve workers in any
// language.
func TestDocsNameTheSchemasOwnKeywords(t *testing.T) {
	t.Parallel()
	w, vs := contracts.ParseWorking([]byte(`{"name": "every option", "outputs": {"fields": []}, "inputs": {"fields": [
		{"name": "a", "type": "text", "required": true, "classification": "sensitive", "description": "a", "min_length": 1, "max_length": 9, "pattern": "^.+$", "format": "email"},
		{"name": "b", "type": "integer", "minimum": 0, "maximum": 9}, {"name": "c", "type": "number"}, {"name": "d", "type": "boolean"},
		{"name": "e", "type": "date"}, {"name": "f", "type": "datetime", "classification": "secret"}, {"name": "g", "type": "choice", "values": ["x"]},
		{"name": "h", "type": "object", "fields": [{"name": "i", "type": "text", "format": "uri"}]},
		{"name": "j", "type": "list", "items": {"type": "text", "format": "uuid"}, "min_items": 1, "max_items": 2}]}}`))
	if vs != nil {
		t.Fatal(vs)
	}
	var schema any
	if err := json.Unmarshal(w.Inputs.JSONSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	var own []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if strings.HasPrefix(k, "x-") && !slices.Contains(own, k) {
					own = append(own, k)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(schema)
	if len(own) == 0 {
		t.Fatal("the schema carries no keyword of its own: this test proves nothing")
	}
	readme, err := os.ReadFile("../../docs/contracts.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	at := strings.Index(text, "usable by workers in any language")
	if at < 0 {
		t.Fatal(`docs/contracts.md no longer says the schemas are "usable by workers in any language"`)
	}
	paragraph, _, _ := strings.Cut(text[at:], "\n\n")
	for _, k := range own {
		if !strings.Contains(paragraph, `addKeyword("`+k+`")`) {
			t.Errorf("the served schemas carry %s, which docs/contracts.md's paragraph on them does not declare (ajv.addKeyword(%q))", k, k)
		}
	}
}
