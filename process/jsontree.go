package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// maxJSONDepth bounds document nesting so that hostile input cannot drive
// the recursive reader arbitrarily deep. It leaves room for the inputs
// contract at its own nesting limit plus the process envelope.
const maxJSONDepth = 160

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

// jnode is an order-preserving JSON tree. encoding/json maps silently keep
// the last duplicate key; a strict parser must see every member.
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
					return nil, errors.New("object key is not a string")
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

// appendTree re-encodes n as compact JSON. With sorted false it keeps
// member order and duplicates, so that a sub-document handed to another
// strict parser (the inputs contract) is judged exactly as written; with
// sorted true it produces the canonical form of a literal value.
func appendTree(b []byte, n *jnode, sorted bool) []byte {
	switch n.kind {
	case jNull:
		return append(b, "null"...)
	case jBool:
		return strconv.AppendBool(b, n.b)
	case jNumber:
		return append(b, n.num...)
	case jString:
		return appendString(b, n.str)
	case jArray:
		b = append(b, '[')
		for i, item := range n.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTree(b, item, sorted)
		}
		return append(b, ']')
	default:
		order := make([]int, len(n.keys))
		for i := range order {
			order[i] = i
		}
		if sorted {
			sort.SliceStable(order, func(i, j int) bool { return n.keys[order[i]] < n.keys[order[j]] })
		}
		b = append(b, '{')
		for i, k := range order {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n.keys[k])
			b = append(b, ':')
			b = appendTree(b, n.vals[k], sorted)
		}
		return append(b, '}')
	}
}

// appendString writes s as a JSON string without HTML escaping: canonical
// documents are compared and hashed, never embedded in HTML.
func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		// Encoding a Go string cannot fail; keep the output valid anyway.
		return append(b, `""`...)
	}
	return append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
}

// canonicalValue returns raw in canonical form (compact, object keys
// sorted, number literals kept), so that two documents differing only in
// the key order of a literal digest identically. Invalid JSON becomes null
// rather than producing an invalid document.
func canonicalValue(raw json.RawMessage) json.RawMessage {
	n, err := readTree(raw)
	if err != nil {
		return json.RawMessage("null")
	}
	return appendTree(nil, n, true)
}

// escapeToken escapes one RFC 6901 reference token.
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}

// ptr appends reference tokens to a JSON pointer.
func ptr(base string, tokens ...string) string {
	for _, t := range tokens {
		base += "/" + escapeToken(t)
	}
	return base
}
