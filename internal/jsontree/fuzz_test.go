package jsontree

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzRead: Read accepts exactly what encoding/json accepts but the NUL
// character, reads the same values, and Append writes a document that
// reads back to the same tree.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		`{"b":1,"a":[true,false,null,-1.5e3],"b":"\u00e9\ud800"}`,
		`[[[[[[[[[[]]]]]]]]]]`, `"caf\xc3\xa9\xff"`, `{"a" 1}`, `[01]`, `1 2`, ``, `{"<&>":"\u2028"}`, `{"a\u0000":["\u0000"]}`,
	} {
		f.Add([]byte(seed))
	}
	const limit = 8
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := Read(data, limit)
		if valid := json.Valid(data); (err == nil) != valid && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrNUL) {
			t.Fatalf("Read error %v but json.Valid = %v", err, valid)
		}
		if errors.Is(err, ErrNUL) && !bytes.Contains(data, []byte(`\u0000`)) {
			t.Fatalf("Read refused %q for a NUL character it does not hold", data)
		}
		if err != nil {
			return
		}
		if got, want := toAny(n), decode(t, data); !reflect.DeepEqual(got, want) {
			t.Fatalf("Read = %#v, encoding/json reads %#v", got, want)
		}
		for _, sorted := range []bool{false, true} {
			out := Append(nil, n, sorted)
			n2, err := Read(out, limit)
			if err != nil {
				t.Fatalf("Append(sorted %v) wrote %s, which does not read: %v", sorted, out, err)
			}
			if again := Append(nil, n2, sorted); !bytes.Equal(out, again) {
				t.Fatalf("Append(sorted %v) unstable:\n%s\n%s", sorted, out, again)
			}
			if !sorted && !reflect.DeepEqual(n, n2) {
				t.Fatalf("Append(false) round trip changed the tree: %s", out)
			}
		}
	})
}
