package jsontree

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppend(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, asRead, sorted string }{
		{`null`, `null`, `null`},
		{` [ true , false ] `, `[true,false]`, `[true,false]`},
		{`[1.50, -0, 1E+3]`, `[1.50,-0,1E+3]`, `[1.50,-0,1E+3]`},
		{`{"b": 1, "a": {"d": [], "c": {}}, "b": 2}`, `{"b":1,"a":{"d":[],"c":{}},"b":2}`, `{"a":{"c":{},"d":[]},"b":1,"b":2}`},
		{`"<a href=\"x\">&amp;</a>"`, `"<a href=\"x\">&amp;</a>"`, `"<a href=\"x\">&amp;</a>"`},
		{`{}`, `{}`, `{}`},
	} {
		n, err := Read([]byte(tt.in), 128)
		if err != nil {
			t.Fatalf("Read(%s): %v", tt.in, err)
		}
		if got := string(Append(nil, n, false)); got != tt.asRead {
			t.Errorf("Append(%s, false) = %s, want %s", tt.in, got, tt.asRead)
		}
		if got := string(Append([]byte("x"), n, true)); got != "x"+tt.sorted {
			t.Errorf("Append(x, %s, true) = %s, want x%s", tt.in, got, tt.sorted)
		}
	}
}

// TestAppendString pins the escaping: encoding/json's, without HTML
// escaping. Canonical process documents are hashed, so it must not drift.
func TestAppendString(t *testing.T) {
	t.Parallel()
	cases := []string{"", "plain", "<>&", "\"\\/", "\b\f\n\r\t\x00\x1f", "\u2028\u2029", "caf\xc3\xa9", "\xff", "\U0001F600"}
	// Every byte between plain letters: the plain ASCII shortcut must
	// end exactly where encoding/json starts escaping.
	for c := range 256 {
		cases = append(cases, "a"+string([]byte{byte(c)})+"b")
	}
	for _, s := range cases {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, want x%s", s, got, want)
		}
	}
	if got, want := string(AppendString(nil, "a<b\u2028")), `"a<b\u2028"`; got != want {
		t.Errorf("AppendString: got %s, want %s", got, want)
	}
}
