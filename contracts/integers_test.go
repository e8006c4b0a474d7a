package contracts

import (
	"encoding/json"
	"testing"
)

// Integral numbers are valid integers and are stored written as integers,
// at any depth; other fields and values stay byte for byte as written.
func TestIntegersAreWrittenAsIntegers(t *testing.T) {
	c := Contract{Fields: []Field{
		{Name: "n", Type: TypeInteger},
		{Name: "x", Type: TypeNumber},
		{Name: "label", Type: TypeText},
		{Name: "box", Type: TypeObject, Fields: []Field{{Name: "count", Type: TypeInteger}}},
		{Name: "ids", Type: TypeList, Items: &Field{Type: TypeInteger}},
	}}
	v, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		`{"n":3}`:                      `{"n":3}`,
		`{"n":3.0}`:                    `{"n":3}`,
		`{"n":-3.000,"x":2.50}`:        `{"n":-3,"x":2.50}`,
		`{"n":1e3,"label":"e.e"}`:      `{"n":1000,"label":"e.e"}`,
		`{"n":0.3E1}`:                  `{"n":3}`,
		`{"n":-0.0}`:                   `{"n":0}`,
		`{"n":12345678901234567890.0}`: `{"n":12345678901234567890}`,
		`{"box":{"count":2.0},"ids":[1,2e0,3.00]}`: `{"box":{"count":2},"ids":[1,2,3]}`,
		`{"x":1.0, "label":"e"}`:                   `{"x":1.0, "label":"e"}`, // unchanged: returned as it is
	} {
		if vs := v.Validate(json.RawMessage(in)); len(vs) > 0 {
			t.Fatalf("%s: %v", in, vs)
		}
		if got := string(v.Integers(json.RawMessage(in))); got != want {
			t.Errorf("Integers(%s) = %s, want %s", in, got, want)
		}
	}
	text, _ := Compile(Contract{Fields: []Field{{Name: "label", Type: TypeText}}})
	if in := `{"label": "1.0e3"}`; string(text.Integers(json.RawMessage(in))) != in {
		t.Error("a contract without integers changed a value")
	}
}
