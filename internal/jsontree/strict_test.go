package jsontree

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		doc  string
		want []TextProblem
	}{
		{"clean", `{"a": "é ✓ 😀 \u00e9 \ud83d\ude00", "b": [1, -2.5e3, true, null, {"c": "d"}]}`, nil},
		{"duplicate key", `{"a": 1, "b": {"x": 1, "x": 2}, "a": 3}`, []TextProblem{{"/b/x", `duplicate key "x"`}, {"/a", `duplicate key "a"`}}},
		{"duplicate key in a wide object", wide(20) + `, "k3a": 0}`, []TextProblem{{"/k3a", `duplicate key "k3a"`}}},
		{"duplicate by escape", `{"é": 1, "\u00e9": 2}`, []TextProblem{{"/é", `duplicate key "é"`}}},
		{"invalid UTF-8", "{\"a\": [\"ok\", \"bad \xff here\"]}", []TextProblem{{"/a/1", MsgInvalidUTF8}}},
		{"lone high surrogate", `{"a": "x\ud800y"}`, []TextProblem{{"/a", MsgLoneSurrogate}}},
		{"high surrogate at the end", `["\ud800"]`, []TextProblem{{"/0", MsgLoneSurrogate}}},
		{"lone low surrogate", `"\udc00"`, []TextProblem{{"", MsgLoneSurrogate}}},
		{"two highs", `"\ud800\ud800"`, []TextProblem{{"", MsgLoneSurrogate}}},
		{"broken key", "{\"k\xff\": 1, \"j\": 2}", []TextProblem{{"", MsgKeyInvalidUTF8}}},
		{"surrogate key", `{"a": {"\udfff": 1}}`, []TextProblem{{"/a", MsgKeySurrogate}}},
		{"pointer escapes", `{"a/b": 1, "a/b": 2}`, []TextProblem{{"/a~1b", `duplicate key "a/b"`}}},
		{"malformed: left to the decoder", `{"a": 1, "a": `, nil},
		{"control character: malformed", "\"a\tb\"", nil},
		{"trailing data", `{} {}`, nil},
	} {
		got := CheckText([]byte(c.doc), 100)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: CheckText(%q) = %v; want %v", c.name, c.doc, got, c.want)
		}
	}
	if got := CheckText([]byte(`[[[[1]]]]`), 3); got != nil {
		t.Errorf("too deep: %v; want nil", got)
	}
}

func wide(n int) string {
	s := "{"
	for i := range n {
		if i > 0 {
			s += ", "
		}
		b, _ := json.Marshal("k" + string(rune('0'+i%10)) + string(rune('a'+i/10)))
		s += string(b) + ": 0"
	}
	return s
}

// FuzzCheckText: CheckText never panics and finds problems only in
// well-formed JSON (the decoder explains malformed documents).
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `"\ud800"`, "\"\xff\"", `{"a":1,"a":2}`, `[1,[2,{"b":"c"}]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if problems := CheckText(data, 50); problems != nil && !json.Valid(data) {
			t.Fatalf("problems %v in malformed JSON %q", problems, data)
		}
	})
}

// A document without problems, the usual case, is checked without
// allocating: pointers are built only to place problems found.
func TestCheckTextAllocatesNothingForAStrictDocument(t *testing.T) {
	doc := []byte(`{"name":"Acme","tags":["a","b"],"owner":{"id":17,"name":"caf\u00e9 \"x\""},"rows":[{"v":1},{"v":2}],"ok":true,"n":null}`)
	if p := CheckText(doc, 100); p != nil {
		t.Fatalf("CheckText: %v, want none", p)
	}
	if n := testing.AllocsPerRun(100, func() { CheckText(doc, 100) }); n != 0 {
		t.Errorf("CheckText allocated %.0f times for a strict document, want 0", n)
	}
}
