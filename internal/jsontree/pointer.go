package jsontree

import (
	"fmt"
	"strconv"
	"strings"
)

// EscapeToken escapes one RFC 6901 reference token: ~ becomes ~0 and /
// becomes ~1.
func EscapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}

// UnescapeToken reverses EscapeToken.
func UnescapeToken(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	s = strings.ReplaceAll(s, "~1", "/")
	return strings.ReplaceAll(s, "~0", "~")
}

// Pointer appends reference tokens, escaped, to the JSON pointer base; ""
// is the pointer to the whole document.
func Pointer(base string, tokens ...string) string {
	for _, t := range tokens {
		base = base + "/" + EscapeToken(t)
	}
	return base
}

// PointerIndex appends an array index to the JSON pointer base.
func PointerIndex(base string, i int) string {
	return base + "/" + strconv.Itoa(i)
}

// SplitPointer splits a JSON pointer into unescaped reference tokens; ""
// yields none.
func SplitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("json pointer %q does not start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = UnescapeToken(s)
	}
	return parts, nil
}

// ComparePointers orders pointers token by token, numeric tokens by
// value, as a reader expects: /items/2 before /items/10.
func ComparePointers(a, b string) int {
	for a != "" && b != "" {
		var ta, tb string
		ta, a = nextToken(a)
		tb, b = nextToken(b)
		if ta == tb {
			continue
		}
		na, ea := strconv.Atoi(ta)
		nb, eb := strconv.Atoi(tb)
		if ea == nil && eb == nil && na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		return strings.Compare(ta, tb)
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

// nextToken splits "/a/b" into "a" and "/b".
func nextToken(p string) (string, string) {
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}
