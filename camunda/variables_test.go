package camunda

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relais/relais/contracts"
)

// Inputs become Camunda typed values by the contract's types, and values
// the contract would accept but Go cannot read as times stay text.
func TestVariablesOf(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{
		{Name: "small", Type: contracts.TypeInteger}, {Name: "huge", Type: contracts.TypeInteger},
		{Name: "exp", Type: contracts.TypeInteger}, {Name: "when", Type: contracts.TypeDatetime},
		{Name: "odd", Type: contracts.TypeDatetime}, {Name: "day", Type: contracts.TypeDate},
		{Name: "nothing", Type: contracts.TypeText},
	}}
	got, err := variablesOf(json.RawMessage(`{"small":2147483647,"huge":2147483648,"exp":1e3,"when":"2026-12-01T23:30:00-02:00",
		"odd":"2026-12-01t10:00:00z","day":"2026-02-28","nothing":null,"extra":{"a":[1]}}`), c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"small": {"Integer", "2147483647"}, "huge": {"Long", "2147483648"}, "exp": {"Integer", "1000"},
		"when": {"Date", `"2026-12-02T01:30:00.000+0000"`}, "odd": {"String", `"2026-12-01t10:00:00z"`},
		"day": {"Date", `"2026-02-28T00:00:00.000+0000"`}, "nothing": {"Null", "null"}, "extra": {"Json", `"{\"a\":[1]}"`},
	}
	for name, w := range want {
		if v := got[name]; v.Type != w[0] || string(v.Value) != w[1] || v.ValueInfo == nil {
			t.Errorf("%s = %s %s, want %s %s", name, v.Type, v.Value, w[0], w[1])
		}
	}
}

// Typed values become outputs by the contract's types.
func TestOutputsOf(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{
		{Name: "day", Type: contracts.TypeDate}, {Name: "at", Type: contracts.TypeDatetime},
		{Name: "obj", Type: contracts.TypeObject}, {Name: "raw", Type: contracts.TypeList}, {Name: "text", Type: contracts.TypeText},
	}}
	vars := map[string]variableIn{
		"day":  {Type: "date", Value: json.RawMessage(`"2026-12-24T00:00:00.000+0200"`)},
		"at":   {Type: "DATE", Value: json.RawMessage(`"2026-12-24T10:11:12.345+0000"`)},
		"obj":  {Type: "Json", Value: json.RawMessage(`"{\"k\": 1}"`)},
		"raw":  {Value: json.RawMessage(`[1, 2]`)},
		"text": {Type: "Date", Value: json.RawMessage(`"2026-12-24T00:00:00.000+0000"`)},
		"none": {Type: "Null"},
	}
	got, err := outputsOf(vars, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"at":"2026-12-24T10:11:12.345Z","day":"2026-12-24","obj":{"k":1},"raw":[1,2],"text":"2026-12-24T00:00:00.000+0000"}`
	if string(got) != want {
		t.Errorf("outputs %s, want %s", got, want)
	}
}

// TestOutputsOfRefusesATypeNameTheValueBelies: a value that fits its field
// under a type name that says something else (5 as a Date in an integer
// field) is refused, as Camunda's own conversion would fail, naming the
// names the field takes; one that fits neither is left to the contract,
// which reports it with every other problem.
func TestOutputsOfRefusesATypeNameTheValueBelies(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{
		{Name: "i", Type: contracts.TypeInteger}, {Name: "n", Type: contracts.TypeNumber}, {Name: "b", Type: contracts.TypeBoolean},
		{Name: "o", Type: contracts.TypeObject}, {Name: "l", Type: contracts.TypeList},
	}}
	for _, tt := range []struct {
		name string
		v    variableIn
		want string
	}{
		{"i", variableIn{Type: "Date", Value: json.RawMessage(`5`)}, "/variables/i/value: a Date does not fit an integer field: give it as an Integer, Long, Short or Double"},
		{"n", variableIn{Type: "Boolean", Value: json.RawMessage(`1.5`)}, "/variables/n/value: a Boolean does not fit a number field"},
		{"b", variableIn{Type: "Integer", Value: json.RawMessage(`true`)}, "/variables/b/value: an Integer does not fit a boolean field: give it as a Boolean"},
		{"o", variableIn{Type: "String", Value: json.RawMessage(`{"a":"b"}`)}, "/variables/o/value: a String does not fit an object field"},
		{"l", variableIn{Type: "String", Value: json.RawMessage(`[1,2]`)}, "/variables/l/value: a String does not fit a list field"},
	} {
		_, err := outputsOf(map[string]variableIn{tt.name: tt.v}, nil, c)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s %s: %v; want %q", tt.name, tt.v.Type, tt.v.Value, err, tt.want)
		}
	}
	// Untyped, or under a name the field takes, the same values pass.
	if got, err := outputsOf(map[string]variableIn{"i": {Value: json.RawMessage(`5`)}, "n": {Type: "Integer", Value: json.RawMessage(`2`)},
		"b": {Type: "Boolean", Value: json.RawMessage(`true`)}, "o": {Type: "Json", Value: json.RawMessage(`{"a":"b"}`)}}, nil, c); err != nil ||
		string(got) != `{"b":true,"i":5,"n":2,"o":{"a":"b"}}` {
		t.Errorf("fitting names: %s, %v", got, err)
	}
}

// A Date that does not parse is told how Camunda writes one, not that it
// must be RFC 3339 (Camunda QA): Relais writes Camunda's format itself. A
// yyyy-MM-dd Date for a date field is still the contract's to judge.
func TestAnUnreadableDateSaysCamundasFormat(t *testing.T) {
	t.Parallel()
	c := contracts.Contract{Fields: []contracts.Field{{Name: "at", Type: contracts.TypeDatetime}, {Name: "day", Type: contracts.TypeDate}}}
	_, err := outputsOf(map[string]variableIn{"at": {Type: "Date", Value: json.RawMessage(`"01.03.2026 10:20"`)}}, nil, c)
	if err == nil || !strings.Contains(err.Error(), "yyyy-MM-dd'T'HH:mm:ss.SSSZ") || strings.Contains(err.Error(), "must be a valid RFC 3339") {
		t.Errorf("an unreadable Date: %v; want Camunda's format named", err)
	}
	if got, err := outputsOf(map[string]variableIn{"day": {Type: "Date", Value: json.RawMessage(`"2026-03-01"`)}}, nil, c); err != nil || string(got) != `{"day":"2026-03-01"}` {
		t.Errorf("a yyyy-MM-dd Date for a date field: %s, %v", got, err)
	}
}
