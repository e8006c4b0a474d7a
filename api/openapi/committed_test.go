package openapi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/relais/relais/api/openapi"
)

// openapi.json, the copy tools read from the repository, is the served
// document: the YAML's merge keys (<<:, YAML 1.1) expanded, which a
// YAML 1.2 parser reads as a key of that name (QA: a generator lost the
// operator actions' bodies and responses and the contract fields' types).
func TestCommittedJSONIsTheDocument(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, openapi.Indented()) {
		t.Fatal("api/openapi/openapi.json is not openapi.yaml's document: run go generate ./api/openapi")
	}
	var doc any
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	var merged func(v any) bool
	merged = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "<<" || merged(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if merged(e) {
					return true
				}
			}
		}
		return false
	}
	if merged(doc) {
		t.Error("the document holds a << key: a merge the conversion did not expand")
	}
}
