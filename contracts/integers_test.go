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

// A value whose only '.', 'e' or 'E' are in text or in true and false (as
// most values are) is returned as it is without being read again: it
// allocates nothing.
func TestIntegersSkipValuesWithoutDecimalNumbers(t *testing.T) {
	v, err := Compile(Contract{Fields: []Field{{Name: "n", Type: TypeInteger}, {Name: "label", Type: TypeText},
		{Name: "ok", Type: TypeBoolean}, {Name: "note", Type: TypeText}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		`{"n":3,"label":"Acme S.A., 12 rue de l'Église","ok":true}`,
		`{"n":-30,"label":"1.5e3 \"quoted 2.0\" \\","ok":false,"note":null}`,
		`{"label":"é.E","n":10}`,
	} {
		value := json.RawMessage(in)
		if got := v.Integers(value); &got[0] != &value[0] {
			t.Errorf("Integers(%s) made a copy", in)
		}
		if allocs := testing.AllocsPerRun(20, func() { v.Integers(value) }); allocs != 0 {
			t.Errorf("Integers(%s) allocates %v times, want 0", in, allocs)
		}
	}
	for in, want := range map[string]bool{
		`{"n":3.0}`: true, `{"label":"x","n":1e2}`: true, `[1,2,-0.5]`: true, `{"n":3,"s":"\"2.0"}`: false,
		`{"a":true,"b":false,"c":null,"n":12}`: false, `{"s":"a\\"}`: false, `{"s":"a\\","n":2E1}`: true,
	} {
		if got := decimalLiteral([]byte(in)); got != want {
			t.Errorf("decimalLiteral(%s) = %v, want %v", in, got, want)
		}
	}
}
