package jsontree

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
)

// Append appends n to b as compact JSON and returns the extended buffer.
// Number literals are written as read. With sortKeys false, object members
// keep their order and duplicates, so that a sub-document handed to another
// strict parser is judged exactly as written; with sortKeys true they are
// sorted by key (duplicates keeping their relative order), which gives the
// canonical form of a literal value.
func Append(b []byte, n *Node, sortKeys bool) []byte {
	switch n.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		return strconv.AppendBool(b, n.Bool)
	case Number:
		return append(b, n.Num...)
	case String:
		return AppendString(b, n.Str)
	case Array:
		b = append(b, '[')
		for i, item := range n.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = Append(b, item, sortKeys)
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
			b = Append(b, n.Vals[k], sortKeys)
		}
		return append(b, '}')
	}
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
