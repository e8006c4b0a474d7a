package jsontree

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Append appends n to b as compact JSON and returns the extended buffer.
// Number literals are written as read. With sortKeys false, object members
// keep their order and duplicates, so that a sub-document handed to another
// strict parser is judged exactly as written; with sortKeys true they are
// sorted by key (duplicates keeping their relative order), which gives the
// canonical form of a literal value.
func Append(b []byte, n *Node, sortKeys bool) []byte {
	return appendNode(b, n, sortKeys, false)
}

// AppendCanonical appends n with its keys sorted and its numbers in
// CanonicalNumber's form: two documents that hold the same values, however
// formatted, append alike.
func AppendCanonical(b []byte, n *Node) []byte {
	return appendNode(b, n, true, true)
}

func appendNode(b []byte, n *Node, sortKeys, canonicalNumbers bool) []byte {
	switch n.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		return strconv.AppendBool(b, n.Bool)
	case Number:
		if canonicalNumbers {
			return append(b, CanonicalNumber(string(n.Num))...)
		}
		return append(b, n.Num...)
	case String:
		return AppendString(b, n.Str)
	case Array:
		b = append(b, '[')
		for i, item := range n.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendNode(b, item, sortKeys, canonicalNumbers)
		}
		return append(b, ']')
	default:
		order := make([]int, len(n.Keys))
		for i := range order {
			order[i] = i
		}
		if sortKeys {
			sort.SliceStable(order, func(i, j int) bool { return n.Keys[order[i]] < n.Keys[order[j]] })
		}
		b = append(b, '{')
		for i, k := range order {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, n.Keys[k])
			b = append(b, ':')
			b = appendNode(b, n.Vals[k], sortKeys, canonicalNumbers)
		}
		return append(b, '}')
	}
}

// CanonicalNumber writes the JSON number literal lit in one form per
// decimal value, exactly (never through a float64, so that two integers a
// float64 would confuse stay apart): its significant digits without
// leading or trailing zeros, then e and the exponent when it is not 0,
// with a leading - when negative. 120.50, 120.5 and 1.205e2 are all
// 1205e-1; 100, 1e2 and 100.0 are 1e2; -0 and 0.0 are 0. A literal it
// cannot read (not JSON's grammar, an exponent beyond int64) is returned
// as it is.
func CanonicalNumber(lit string) string {
	s := lit
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
		if err != nil {
			return lit
		}
		mant, exp = s[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !digits(intPart) || !digits(frac) {
		return lit
	}
	if exp < math.MinInt64+int64(len(frac)) {
		return lit
	}
	exp -= int64(len(frac))
	d := strings.TrimLeft(intPart+frac, "0")
	if d == "" {
		return "0"
	}
	trimmed := strings.TrimRight(d, "0")
	if exp > math.MaxInt64-int64(len(d)-len(trimmed)) {
		return lit
	}
	exp += int64(len(d) - len(trimmed))
	out := trimmed
	if exp != 0 {
		out += "e" + strconv.FormatInt(exp, 10)
	}
	if neg {
		out = "-" + out
	}
	return out
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// AppendString appends s to b as a JSON string, escaped exactly as
// encoding/json escapes it except that <, > and & are left alone: canonical
// documents are compared and hashed, never embedded in HTML.
func AppendString(b []byte, s string) []byte {
	if plainASCII(s) {
		// Most keys and values (names, ids, codes): nothing to escape,
		// so no encoder and no buffer for them.
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		// Encoding a Go string cannot fail; keep the output valid anyway.
		return append(b, `""`...)
	}
	return append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
}

// plainASCII reports whether s is printable ASCII without a quote or a
// backslash: written as is between quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
