package openapi_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/relais/relais/api/openapi"
)

// Every example the document gives (a request's body, an answer's) is
// valid against the schema beside it: a documentation viewer or a mock
// server shows it as what the API takes and sends. They were taken from
// a real server's answers; this keeps them true as the schemas change.
func TestExamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	var doc any
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	if err := c.AddResource("relais.json", bytes.NewReader(openapi.JSON())); err != nil {
		t.Fatal(err)
	}
	escape := strings.NewReplacer("~", "~0", "/", "~1")
	found := 0
	var walk func(v any, pointer string)
	walk = func(v any, pointer string) {
		switch x := v.(type) {
		case map[string]any:
			if example, ok := x["example"]; ok {
				if _, ok := x["schema"]; ok {
					found++
					schema, err := c.Compile("relais.json#" + pointer + "/schema")
					if err != nil {
						t.Errorf("%s: %v", pointer, err)
						return
					}
					if err := schema.Validate(example); err != nil {
						t.Errorf("the example at %s breaks its schema: %v", pointer, err)
					}
				}
			}
			for k, e := range x {
				walk(e, pointer+"/"+escape.Replace(k))
			}
		case []any:
			for i, e := range x {
				walk(e, pointer+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "")
	if found < 8 {
		t.Errorf("%d examples beside a schema, want the 8 written at least", found)
	}
}
