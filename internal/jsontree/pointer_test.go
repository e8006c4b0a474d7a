package jsontree

import (
	"reflect"
	"testing"
)

func TestPointer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		base   string
		tokens []string
		want   string
	}{
		{"", nil, ""},
		{"", []string{"a"}, "/a"},
		{"/nodes", []string{"a~b/c", "inputs", ""}, "/nodes/a~0b~1c/inputs/"},
		{"/x", []string{"~1"}, "/x/~01"},
	} {
		if got := Pointer(tt.base, tt.tokens...); got != tt.want {
			t.Errorf("Pointer(%q, %q) = %q, want %q", tt.base, tt.tokens, got, tt.want)
		}
	}
	if got, want := PointerIndex("/fields", 12), "/fields/12"; got != want {
		t.Errorf("PointerIndex: got %q, want %q", got, want)
	}
}

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "~", "/", "~0", "~1", "a/b~c", "~/~/", "é"} {
		e := EscapeToken(s)
		if got := UnescapeToken(e); got != s {
			t.Errorf("UnescapeToken(EscapeToken(%q)) = %q via %q", s, got, e)
		}
	}
}

func TestSplitPointer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"/", []string{""}},
		{"/a/0", []string{"a", "0"}},
		{"/a~1b/c~0d/~01", []string{"a/b", "c~d", "~1"}},
	} {
		got, err := SplitPointer(tt.in)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SplitPointer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if p := Pointer("", got...); p != tt.in {
			t.Errorf("Pointer of SplitPointer(%q) = %q", tt.in, p)
		}
	}
	if _, err := SplitPointer("a/b"); err == nil || err.Error() != `json pointer "a/b" does not start with /` {
		t.Errorf("SplitPointer(a/b): got %v, want an error", err)
	}
}
