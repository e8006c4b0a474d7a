package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// readTree reads exactly one JSON value from data.
func readTree(data []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	root, err := readNode(dec, 1)
	if err != nil {
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(data)) == 0 {
				return nil, errors.New("empty document")
			}
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return root, nil
}

func readNode(dec *json.Decoder, depth int) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jnode{kind: jNull}, nil
	case bool:
		return &jnode{kind: jBool, b: t}, nil
	case json.Number:
		return &jnode{kind: jNumber, num: t}, nil
	case string:
		return &jnode{kind: jString, str: t}, nil
	case json.Delim:
		if depth > maxJSONDepth {
			return nil, errTooDeep
		}
		switch t {
		case '[':
			n := &jnode{kind: jArray}
			for dec.More() {
				item, err := readNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, item)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		case '{':
			n := &jnode{kind: jObject}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				val, err := readNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if seen[key] {
					n.dups = append(n.dups, len(n.keys))
				}
				seen[key] = true
				n.keys = append(n.keys, key)
				n.vals = append(n.vals, val)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
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
