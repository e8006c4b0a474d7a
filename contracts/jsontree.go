package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of any contract document. Legitimate
// documents at the field nesting limit stay far below it; the bound exists
// so that hostile input cannot drive the recursive reader arbitrarily deep.
const maxJSONDepth = 128

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	switch k {
	case jNull:
		return "null"
	case jBool:
		return "boolean"
	case jNumber:
		return "number"
	case jString:
		return "string"
	case jArray:
		return "array"
	default:
		return "object"
	}
}

// jnode is an order-preserving JSON tree. encoding/json maps lose member
// order and silently keep the last duplicate key; a strict parser must see
// both, so contract documents are read into this instead.
type jnode struct {
	kind  jkind
	b     bool
	str   string
	num   json.Number
	keys  []string
	vals  []*jnode
	items []*jnode
	// dups lists indexes into keys of members whose key already appeared.
	dups []int
}

// get returns the first member named key.
func (n *jnode) get(key string) (*jnode, bool) {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i], true
		}
	}
	return nil, false
}

var errTooDeep = errors.New("document nested deeper than " + strconv.Itoa(maxJSONDepth) + " levels")

// readTree reads exactly one JSON value from data. It accepts exactly what
// encoding/json accepts (FuzzParseWorking checks this against json.Valid),
// decodes strings the same way, and is several times faster than the
// decoder's token API while keeping member order and duplicates.
func readTree(data []byte) (*jnode, error) {
	r := treeReader{b: data}
	r.ws()
	if r.i == len(r.b) {
		return nil, errors.New("empty document")
	}
	root, err := r.value(1)
	if err != nil {
		return nil, err
	}
	r.ws()
	if r.i != len(r.b) {
		return nil, fmt.Errorf("unexpected data after the top-level value at offset %d", r.i)
	}
	return root, nil
}

type treeReader struct {
	b []byte
	i int
}

func (r *treeReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *treeReader) unexpected() error {
	if r.i >= len(r.b) {
		return io.ErrUnexpectedEOF
	}
	return fmt.Errorf("invalid character %q at offset %d", r.b[r.i], r.i)
}

func (r *treeReader) value(depth int) (*jnode, error) {
	r.ws()
	if r.i >= len(r.b) {
		return nil, io.ErrUnexpectedEOF
	}
	switch c := r.b[r.i]; {
	case c == '{' || c == '[':
		if depth > maxJSONDepth {
			return nil, errTooDeep
		}
		if c == '{' {
			return r.object(depth)
		}
		return r.array(depth)
	case c == '"':
		str, err := r.str()
		if err != nil {
			return nil, err
		}
		return &jnode{kind: jString, str: str}, nil
	case c == 't':
		return r.literal("true", &jnode{kind: jBool, b: true})
	case c == 'f':
		return r.literal("false", &jnode{kind: jBool})
	case c == 'n':
		return r.literal("null", &jnode{kind: jNull})
	case c == '-' || (c >= '0' && c <= '9'):
		start := r.i
		for r.i < len(r.b) {
			c := r.b[r.i]
			if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				r.i++
				continue
			}
			break
		}
		// In valid JSON a number is followed by whitespace, a delimiter or
		// the end, so scanning the longest run of number characters and
		// then checking the grammar is exact.
		lit := r.b[start:r.i]
		if !validNumberLiteral(lit) {
			return nil, fmt.Errorf("invalid number literal %q at offset %d", lit, start)
		}
		return &jnode{kind: jNumber, num: json.Number(lit)}, nil
	}
	return nil, r.unexpected()
}

func (r *treeReader) literal(lit string, n *jnode) (*jnode, error) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		for k := 0; k < len(lit) && r.i < len(r.b) && r.b[r.i] == lit[k]; k++ {
			r.i++
		}
		return nil, r.unexpected()
	}
	r.i += len(lit)
	return n, nil
}

// str reads a string token; escapes and invalid UTF-8 are decoded by
// encoding/json itself so that both readers agree byte for byte.
func (r *treeReader) str() (string, error) {
	start := r.i
	i := r.i + 1
	slow := false
	for {
		if i >= len(r.b) {
			r.i = i
			return "", io.ErrUnexpectedEOF
		}
		c := r.b[i]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			slow = true
			i += 2
			continue
		case c < 0x20:
			r.i = i
			return "", fmt.Errorf("invalid control character in string at offset %d", i)
		case c >= utf8.RuneSelf:
			slow = true
		}
		i++
	}
	r.i = i + 1
	tok := r.b[start:r.i]
	if !slow || utf8.Valid(tok) && bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1]), nil
	}
	s, ok := decodeString(tok)
	if !ok {
		return "", fmt.Errorf("invalid escape in string at offset %d", start)
	}
	return s, nil
}

func (r *treeReader) array(depth int) (*jnode, error) {
	r.i++ // [
	n := &jnode{kind: jArray}
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return n, nil
	}
	for {
		item, err := r.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, item)
		r.ws()
		if r.i < len(r.b) && r.b[r.i] == ',' {
			r.i++
			continue
		}
		if r.i < len(r.b) && r.b[r.i] == ']' {
			r.i++
			return n, nil
		}
		return nil, r.unexpected()
	}
}

func (r *treeReader) object(depth int) (*jnode, error) {
	r.i++ // {
	n := &jnode{kind: jObject}
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == '}' {
		r.i++
		return n, nil
	}
	var seen map[string]bool // only for wide objects; narrow ones scan keys
	for {
		r.ws()
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			return nil, r.unexpected()
		}
		key, err := r.str()
		if err != nil {
			return nil, err
		}
		r.ws()
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			return nil, r.unexpected()
		}
		r.i++
		val, err := r.value(depth + 1)
		if err != nil {
			return nil, err
		}
		dup := false
		if seen == nil && len(n.keys) >= 16 {
			seen = make(map[string]bool, 2*len(n.keys))
			for _, k := range n.keys {
				seen[k] = true
			}
		}
		if seen != nil {
			dup = seen[key]
			seen[key] = true
		} else {
			for _, k := range n.keys {
				if k == key {
					dup = true
					break
				}
			}
		}
		if dup {
			n.dups = append(n.dups, len(n.keys))
		}
		n.keys = append(n.keys, key)
		n.vals = append(n.vals, val)
		r.ws()
		if r.i < len(r.b) && r.b[r.i] == ',' {
			r.i++
			continue
		}
		if r.i < len(r.b) && r.b[r.i] == '}' {
			r.i++
			return n, nil
		}
		return nil, r.unexpected()
	}
}

// escapeToken escapes one RFC 6901 reference token.
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}

// unescapeToken reverses escapeToken.
func unescapeToken(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	s = strings.ReplaceAll(s, "~1", "/")
	return strings.ReplaceAll(s, "~0", "~")
}

// ptr appends one reference token to a JSON pointer.
func ptr(base, token string) string {
	return base + "/" + escapeToken(token)
}

func ptrIndex(base string, i int) string {
	return base + "/" + strconv.Itoa(i)
}

// splitPointer splits a JSON pointer into unescaped reference tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("json pointer %q does not start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = unescapeToken(s)
	}
	return parts, nil
}
