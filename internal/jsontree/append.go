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

// CanonicalNumber writes the JSON number literal lit (as Read reads it) in
// one form per decimal value, exactly (never through a float64, so that two
// integers a float64 would confuse stay apart), and in the form most
// literals already have, so that a digest of a document whose numbers are
// written plainly is the same whether or not it went through here: an
// integer as its digits (100 for 1e2 or 100.0), a fraction with a point and
// no trailing zero (120.5 for 120.50 or 1.205e2), 0 for any zero; only a
// value more than 100 places from the point keeps an exponent, after its
// significant digits (1e101, 15e-102). A literal it cannot read (an
// exponent beyond int64) is returned as it is.
func CanonicalNumber(lit string) string {
	s := lit
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	mant, expLit, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expLit, hasExp = s[:i], strings.TrimPrefix(s[i+1:], "+"), true
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !digits(intPart) || !digits(frac) {
		return lit
	}
	d := strings.TrimLeft(intPart+frac, "0")
	if d == "" {
		// Zero, whatever its sign and exponent.
		return "0"
	}
	exp := int64(0)
	if hasExp {
		e, err := strconv.ParseInt(expLit, 10, 64)
		if err != nil {
			return lit
		}
		exp = e
	}
	if exp < math.MinInt64+int64(len(frac)) {
		return lit
	}
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(d, "0")
	if exp > math.MaxInt64-int64(len(d)-len(trimmed)) {
		return lit
	}
	exp += int64(len(d) - len(trimmed))
	// The value is trimmed × 10^exp.
	const plain = 100
	var out string
	switch {
	case exp >= 0 && exp <= plain:
		out = trimmed + strings.Repeat("0", int(exp))
	case exp < 0 && -exp <= plain:
		if point := len(trimmed) + int(exp); point > 0 {
			out = trimmed[:point] + "." + trimmed[point:]
		} else {
			out = "0." + strings.Repeat("0", -point) + trimmed
		}
	default:
		out = trimmed + "e" + strconv.FormatInt(exp, 10)
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
