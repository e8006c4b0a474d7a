package jsontree

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// toAny converts a tree back to encoding/json's generic form.
func toAny(n *Node) any {
	switch n.Kind {
	case Null:
		return nil
	case Bool:
		return n.Bool
	case Number:
		return n.Num
	case String:
		return n.Str
	case Array:
		out := make([]any, 0, len(n.Items))
		for _, it := range n.Items {
			out = append(out, toAny(it))
		}
		return out
	}
	out := map[string]any{}
	for i, k := range n.Keys {
		out[k] = toAny(n.Vals[i]) // last duplicate wins, as in encoding/json
	}
	return out
}

// decode reads data with encoding/json, numbers as literals.
func decode(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json cannot decode %q: %v", data, err)
	}
	return v
}

func TestReadMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	inputs := []string{
		`{}`, `[]`, ` {"a" : [1, -0, 0.5, 1e5, -1.25E-3, true, false, null]} `,
		`"\u00e9\ud83d\ude00\n\t\"\\\/"`, `"\ud800"`, `"\udc00x"`, "\"\xff\xfe\"", "\"caf\xc3\xa9\"",
		`{"a":1,"a":2}`, `[1,]`, `{"a":1,}`, `{,}`, `[01]`, `[1.]`, `[.5]`, `[-]`, `[1e]`, `[+1]`,
		`[1 2]`, `{"a" 1}`, `{"a":}`, `{1:2}`, `tru`, `nul`, `[true false]`, `"abc`, `"a\x"`, `"\u12"`,
		"\"a\x01b\"", "\ufeff{}", `[1]x`, `[1]]`, `{"a":1}}`, "", " ", `[[[]]]`, `[1e1000]`, `[-0.0e-0]`,
		`["\u0001"]`, `{"":""}`, `{"a/b~c":"d"}`, `1`, `-`, `0x1`, `1e+`, `1E-07`, `[1-2]`, `[1.5.5]`,
		`"a\`, `{"a":1 "b":2}`, `[1,,2]`, `{"a":1,,"b":2}`, "[\v]", "\t\r\n null \n",
	}
	for _, in := range inputs {
		n, err := Read([]byte(in), 128)
		if valid := json.Valid([]byte(in)); (err == nil) != valid {
			t.Errorf("Read(%q): error %v, json.Valid = %v; want them to agree", in, err, valid)
			continue
		}
		if err != nil {
			continue
		}
		if got, want := toAny(n), decode(t, []byte(in)); !reflect.DeepEqual(got, want) {
			t.Errorf("Read(%q) = %#v, encoding/json reads %#v", in, got, want)
		}
	}
}

// TestReadRefusesNUL: the NUL character, which encoding/json accepts but
// PostgreSQL cannot store, is refused wherever it is, with a pointer to
// every string holding it and every object with a key holding it; no
// pointer holds the character itself.
func TestReadRefusesNUL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`"\u0000"`, []string{""}},
		{`{"a":"x\u0000y","b":["ok","\u0000"],"c":{"d":"\u0000"}}`, []string{"/a", "/b/1", "/c/d"}},
		{`{"a\u0000":"v","b":{"k\u0000":1,"e":"\u0000"}}`, []string{"", "/b", "/b/e"}},
		{`{"a/b":"\u0000\u00e9"}`, []string{"/a~1b"}},
	} {
		n, err := Read([]byte(tc.in), 128)
		var ne *NULError
		if !errors.Is(err, ErrNUL) || !errors.As(err, &ne) || n != nil {
			t.Errorf("Read(%s) = %v, %v; want a *NULError", tc.in, n, err)
			continue
		}
		if !reflect.DeepEqual(ne.Pointers, tc.want) {
			t.Errorf("Read(%s) points at %q, want %q", tc.in, ne.Pointers, tc.want)
		}
		if !strings.Contains(err.Error(), `the NUL character (\u0000) is not allowed`) || strings.IndexByte(err.Error(), 0) >= 0 {
			t.Errorf("Read(%s) error %q; want it to name the character, without holding it", tc.in, err)
		}
	}
	for _, in := range []string{`"\\u0000"`, `{"\\u0000":"\\u0000"}`, `"\u0001"`} {
		if _, err := Read([]byte(in), 128); err != nil {
			t.Errorf("Read(%s): %v; an escaped backslash before u0000 is no NUL", in, err)
		}
	}
}

func TestReadKeepsOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	n, err := Read([]byte(`{"b":1,"a":2,"b":3}`), 128)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Keys, []string{"b", "a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys: got %v, want %v", got, want)
	}
	if got, want := n.Dups, []int{2}; !reflect.DeepEqual(got, want) {
		t.Errorf("dups: got %v, want %v", got, want)
	}
	if v, ok := n.Get("b"); !ok || v.Num != "1" {
		t.Errorf("Get(b): got %v, %v; want the first member, 1", v, ok)
	}
	if v, ok := n.Get("c"); ok || v != nil {
		t.Errorf("Get(c): got %v, %v; want nil, false", v, ok)
	}
}

// TestReadWideObjectDuplicates covers objects wide enough for the reader to
// switch from scanning keys to a set.
func TestReadWideObjectDuplicates(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	var want []int
	for i := 0; i < 40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		key := string(rune('a' + i%26))
		if i >= 26 {
			want = append(want, i)
		}
		b.WriteString(`"` + key + `":` + "0")
	}
	b.WriteString("}")
	n, err := Read([]byte(b.String()), 128)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n.Dups, want) {
		t.Errorf("dups: got %v, want %v", n.Dups, want)
	}
}

func TestReadKeepsNumberLiterals(t *testing.T) {
	t.Parallel()
	for _, lit := range []string{"0", "-0", "1.50", "1E+3", "-1.25e-3", "100.00000000000000001", "1e99999999"} {
		n, err := Read([]byte(lit), 1)
		if err != nil {
			t.Fatalf("Read(%s): %v", lit, err)
		}
		if n.Kind != Number || string(n.Num) != lit {
			t.Errorf("Read(%s): got %v %q, want the number literal unchanged", lit, n.Kind, n.Num)
		}
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{``, "empty document"},
		{" \n\t", "empty document"},
		{`{} {}`, "unexpected data after the top-level value at offset 3"},
		{`{"fields":`, "unexpected EOF"},
		{`[1,`, "unexpected EOF"},
		{`"abc`, "unexpected EOF"},
		{`tru`, "unexpected EOF"},
		{`trux`, `invalid character 'x' at offset 3`},
		{`{"a" 1}`, `invalid character '1' at offset 5`},
		{`[01]`, `invalid number literal "01" at offset 1`},
		{`[1e]`, `invalid number literal "1e" at offset 1`},
		{"\"a\x01b\"", "invalid control character in string at offset 2"},
		{`["a\x"]`, "invalid escape in string at offset 1"},
	} {
		_, err := Read([]byte(tt.in), 128)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Read(%q): got error %v, want %q", tt.in, err, tt.want)
		}
	}
	if _, err := Read([]byte(`[`), 128); err != io.ErrUnexpectedEOF {
		t.Errorf("Read([): got %v, want io.ErrUnexpectedEOF itself", err)
	}
}

// nested returns n levels of arrays (or of objects with one member).
func nested(n int, objects bool) []byte {
	open, empty, close := "[", "[]", "]"
	if objects {
		open, empty, close = `{"a":`, "{}", "}"
	}
	return []byte(strings.Repeat(open, n-1) + empty + strings.Repeat(close, n-1))
}

func TestReadDepthLimit(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 2, 128, 160} {
		for _, objects := range []bool{false, true} {
			if _, err := Read(nested(limit, objects), limit); err != nil {
				t.Errorf("limit %d, %d levels (objects %v): %v", limit, limit, objects, err)
			}
			_, err := Read(nested(limit+1, objects), limit)
			if !errors.Is(err, ErrTooDeep) {
				t.Errorf("limit %d, %d levels (objects %v): got %v, want ErrTooDeep", limit, limit+1, objects, err)
				continue
			}
			if got, want := err.Error(), "document nested deeper than "+strconv.Itoa(limit)+" levels"; got != want {
				t.Errorf("limit %d: got message %q, want %q", limit, got, want)
			}
		}
	}
	// Scalars do not count as a level.
	if _, err := Read([]byte(`[1]`), 1); err != nil {
		t.Errorf("[1] at limit 1: %v", err)
	}
	if _, err := Read([]byte(`1`), 0); err != nil {
		t.Errorf("1 at limit 0: %v", err)
	}
	// The limit is checked on the way down, before the rest is read.
	deep := append(nested(200, false), "garbage"...)
	if _, err := Read(deep, 128); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep and malformed: got %v, want ErrTooDeep", err)
	}
}

func TestKindString(t *testing.T) {
	t.Parallel()
	for k, want := range map[Kind]string{Null: "null", Bool: "boolean", Number: "number", String: "string", Array: "array", Object: "object"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
}
