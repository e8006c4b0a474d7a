package contracts

import (
	"bytes"
	"encoding/json"

	"github.com/relais/relais/internal/jsontree"
)

// Integers returns value with the number of every integer field written as
// an integer: 3 for 3.0, 3e0 or 0.3e1. Such numbers are valid integers
// (JSON Schema judges the value, not the literal), but values are stored
// and delivered as written, and typed decoders refuse them (Go's int64,
// Java's Integer): a worker would fail to read a value Relais accepted.
// value must have passed Validate. It returns value itself when every
// integer is written as one already. A contract without an integer field
// costs nothing, and a value without a number written with a fraction or
// an exponent costs one pass over its bytes, allocating nothing (a '.' or
// an 'e' in text does not count: most text has some); only a value with
// such a number is read once more, as a tree, to find its integer fields.
func (v *Validator) Integers(value json.RawMessage) json.RawMessage {
	if !v.integers || !decimalLiteral(value) {
		return value
	}
	n, err := jsontree.Read(value, maxJSONDepth)
	if err != nil || n.Kind != jsontree.Object || !integersIn(n, v.contract.Fields) {
		return value
	}
	return jsontree.Append(nil, n, false)
}

// decimalLiteral reports whether JSON document doc writes some number
// with a fraction or an exponent. Strings are skipped whole (escapes
// included), and so are true, false and null, whose letters are not
// numbers.
func decimalLiteral(doc []byte) bool {
	if !bytes.ContainsAny(doc, ".eE") {
		return false
	}
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case c == '"':
			for i++; i < len(doc) && doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			for i++; i < len(doc); i++ {
				c := doc[i]
				if c == '.' || c == 'e' || c == 'E' {
					return true
				}
				if c != '+' && c != '-' && (c < '0' || c > '9') {
					break
				}
			}
			i-- // the byte that ended the number is read again
		}
	}
	return false
}

// hasInteger reports whether some field, at any depth, is an integer.
func hasInteger(fields []Field) bool {
	for _, f := range fields {
		if fieldHasInteger(f) {
			return true
		}
	}
	return false
}

func fieldHasInteger(f Field) bool {
	switch f.Type {
	case TypeInteger:
		return true
	case TypeObject:
		return hasInteger(f.Fields)
	case TypeList:
		return f.Items != nil && fieldHasInteger(*f.Items)
	}
	return false
}

// integersIn rewrites the integer numbers of object n that fields type,
// and reports whether it changed any.
func integersIn(n *jsontree.Node, fields []Field) bool {
	changed := false
	for i, k := range n.Keys {
		for _, f := range fields {
			if f.Name == k {
				changed = integerIn(n.Vals[i], f) || changed
				break
			}
		}
	}
	return changed
}

func integerIn(n *jsontree.Node, f Field) bool {
	switch {
	case f.Type == TypeInteger && n.Kind == jsontree.Number:
		lit, ok := integerLiteral(n.Num)
		if ok && lit != string(n.Num) {
			n.Num = json.Number(lit)
			return true
		}
	case f.Type == TypeObject && n.Kind == jsontree.Object:
		return integersIn(n, f.Fields)
	case f.Type == TypeList && n.Kind == jsontree.Array && f.Items != nil:
		changed := false
		for _, item := range n.Items {
			changed = integerIn(item, *f.Items) || changed
		}
		return changed
	}
	return false
}

// integerLiteral writes an integral number literal as an integer: digits
// only, no leading zero, no sign on zero.
func integerLiteral(num json.Number) (string, bool) {
	d, ok := parseDecimal(string(num))
	if !ok || !d.integral() {
		return "", false
	}
	lead, _, point, zero := d.norm()
	if zero {
		return "0", true
	}
	b := make([]byte, 0, point+1)
	if d.neg {
		b = append(b, '-')
	}
	for i := lead; i < lead+point; i++ {
		b = append(b, d.digit(i))
	}
	return string(b), true
}
