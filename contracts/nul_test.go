package contracts

import (
	"reflect"
	"testing"
)

const nulMessage = `the NUL character (\u0000) is not allowed`

// TestNULIsRefused: PostgreSQL cannot store the NUL character, which JSON
// can carry (\u0000). A Working holding it is malformed, with a pointer to
// each place; a value holding it violates its contract, on the fast path
// and the library path alike, so it is never stored.
func TestNULIsRefused(t *testing.T) {
	t.Parallel()
	_, vs := ParseWorking([]byte(`{"name":"N","description":"a\u0000",
	  "inputs":{"fields":[{"name":"a","type":"choice","values":["x","\u0000"]}]},"outputs":{"fields":[]}}`))
	want := []Violation{{"/description", nulMessage, Malformed}, {"/inputs/fields/0/values/1", nulMessage, Malformed}}
	if !reflect.DeepEqual(vs, want) {
		t.Errorf("ParseWorking: %v, want %v", vs, want)
	}

	v := mustCompile(t, mustParseContract(t, `{"fields":[{"name":"name","type":"text","required":true},
	  {"name":"tags","type":"list","items":{"type":"text"}},{"name":"c","type":"object","fields":[{"name":"d","type":"text"}]}]}`))
	if v.fast == nil {
		t.Fatal("the contract has no fast path")
	}
	for _, tc := range []struct {
		value string
		want  []Violation
	}{
		{`{"name":"a\u0000b"}`, []Violation{{"/name", nulMessage, Invalid}}},
		{`{"name":"a","tags":["x","\u0000"],"c":{"d":"\u0000"}}`, []Violation{{"/c/d", nulMessage, Invalid}, {"/tags/1", nulMessage, Invalid}}},
		{`{"name":"a","x\u0000":1}`, []Violation{{"", nulMessage, Invalid}, {"/x\x00", "is not a field of the contract", Invalid}}},
		{`{"name":"\\u0000"}`, nil},
	} {
		if got := v.Validate([]byte(tc.value)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Validate(%s) = %v, want %v", tc.value, got, tc.want)
		}
	}
}
