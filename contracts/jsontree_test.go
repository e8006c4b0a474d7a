package contracts

import (
	"encoding/json"
	"reflect"
	"testing"
)

// toAny converts a tree back to encoding/json's generic form.
func toAny(n *jnode) any {
	switch n.kind {
	case jNull:
		return nil
	case jBool:
		return n.b
	case jNumber:
		return n.num
	case jString:
		return n.str
	case jArray:
		out := make([]any, 0, len(n.items))
		for _, it := range n.items {
			out = append(out, toAny(it))
		}
		return out
	}
	out := map[string]any{}
	for i, k := range n.keys {
		out[k] = toAny(n.vals[i]) // last duplicate wins, as in encoding/json
	}
	return out
}

func TestReadTreeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	inputs := []string{
		`{}`, `[]`, ` {"a" : [1, -0, 0.5, 1e5, -1.25E-3, true, false, null]} `,
		`"\u00e9\ud83d\ude00\n\t\"\\\/"`, `"\ud800"`, `"\udc00x"`, "\"\xff\xfe\"", "\"caf\xc3\xa9\"",
		`{"a":1,"a":2}`, `[1,]`, `{"a":1,}`, `{,}`, `[01]`, `[1.]`, `[.5]`, `[-]`, `[1e]`, `[+1]`,
		`[1 2]`, `{"a" 1}`, `{"a":}`, `{1:2}`, `tru`, `nul`, `[true false]`, `"abc`, `"a\x"`, `"\u12"`,
		"\"a\x01b\"", "\ufeff{}", `[1]x`, `[1]]`, `{"a":1}}`, "", " ", `[[[]]]`, `[1e1000]`, `[-0.0e-0]`,
		`["\u0000"]`, `{"":""}`, `{"a/b~c":"d"}`,
	}
	for _, in := range inputs {
		n, err := readTree([]byte(in))
		if valid := json.Valid([]byte(in)); (err == nil) != valid {
			t.Errorf("readTree(%q): error %v, json.Valid = %v; want them to agree", in, err, valid)
			continue
		}
		if err != nil {
			continue
		}
		want, err := decodeValue([]byte(in))
		if err != nil {
			t.Fatalf("decodeValue(%q): %v", in, err)
		}
		if got := toAny(n); !reflect.DeepEqual(got, want) {
			t.Errorf("readTree(%q) = %#v, encoding/json reads %#v", in, got, want)
		}
	}
}

func TestReadTreeKeepsOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	n, err := readTree([]byte(`{"b":1,"a":2,"b":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.keys, []string{"b", "a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys: got %v, want %v", got, want)
	}
	if got, want := n.dups, []int{2}; !reflect.DeepEqual(got, want) {
		t.Errorf("dups: got %v, want %v", got, want)
	}
}
