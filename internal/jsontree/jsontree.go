// Package jsontree reads JSON documents into an order-preserving tree.
//
// Contract and process documents are parsed strictly: every problem is
// reported at once, each at a JSON pointer into the document, and no input
// may make the parser panic or recurse without bound. encoding/json cannot
// serve such a parser on its own: its maps lose member order and silently
// keep the last of duplicate keys, and float64 blurs number literals.
// jsontree keeps what a strict parser needs to see: members in document
// order with duplicate keys marked, number literals exactly as written, and
// a nesting limit chosen by the caller. It also holds the RFC 6901 pointer
// helpers that such parsers use to report where a problem is.
//
// The package depends on the standard library only.
package jsontree

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

// Kind is the JSON type of a Node.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// String returns the name of the type as messages show it: null, boolean,
// number, string, array or object.
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	default:
		return "object"
	}
}

// Node is one JSON value. Only the fields of its Kind are set.
type Node struct {
	Kind Kind
	// Bool is the value of a boolean.
	Bool bool
	// Str is the decoded value of a string.
	Str string
	// Num is the literal of a number, exactly as written.
	Num json.Number
	// Keys and Vals are the members of an object in document order,
	// duplicates included.
	Keys []string
	Vals []*Node
	// Items are the elements of an array.
	Items []*Node
	// Dups lists the indexes into Keys of members whose key already
	// appeared earlier in the same object, in increasing order.
	Dups []int
}

// Get returns the value of the first member named key of an object.
func (n *Node) Get(key string) (*Node, bool) {
	for i, k := range n.Keys {
		if k == key {
			return n.Vals[i], true
		}
	}
	return nil, false
}

// ErrTooDeep matches, with errors.Is, the error Read returns for a document
// nested deeper than its limit.
var ErrTooDeep = errors.New("document nested too deep")

// depthError reports the limit a document exceeded.
type depthError int

func (e depthError) Error() string {
	return "document nested deeper than " + strconv.Itoa(int(e)) + " levels"
}

func (e depthError) Is(target error) bool { return target == ErrTooDeep }

// ErrNUL matches, with errors.Is, the error Read returns for a document
// holding the NUL character (U+0000, written \u0000) in a string or a key.
var ErrNUL = errors.New("the NUL character (\\u0000) is not allowed")

// NULError lists where a document holds the NUL character. PostgreSQL
// stores neither text nor jsonb holding it, so Relais refuses it where
// documents are read rather than fail when it stores them.
type NULError struct {
	// Pointers are JSON pointers, in document order, to each string
	// holding the character and to each object with a key holding it (a
	// pointer never holds the character itself, so it can be shown and
	// stored).
	Pointers []string
}

func (e *NULError) Error() string {
	return ErrNUL.Error() + " (at " + strings.Join(e.Pointers, ", ") + ")"
}

// Is reports whether target is ErrNUL.
func (e *NULError) Is(target error) bool { return target == ErrNUL }

// Read reads exactly one JSON value from data, surrounded by optional
// whitespace. It accepts what encoding/json accepts (json.Valid) and
// decodes strings the same way, invalid UTF-8 and lone surrogates becoming
// U+FFFD, while being several times faster than the decoder's token API
// and keeping member order and duplicates. The one exception is the NUL
// character: a string or key holding it yields a *NULError (matching
// ErrNUL) that points at every place it occurs.
//
// Arrays and objects may nest at most maxDepth levels, the top-level value
// being at level 1; deeper input yields an error matching ErrTooDeep, so
// that hostile input cannot drive the recursive reader arbitrarily deep.
// Other errors say what is wrong and, where it applies, at which byte
// offset; a truncated document yields io.ErrUnexpectedEOF.
func Read(data []byte, maxDepth int) (*Node, error) {
	r := reader{b: data, maxDepth: maxDepth}
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
	if r.nul {
		// Rare: the pointers are only worked out once the tree is built.
		e := &NULError{}
		nulPointers(root, "", &e.Pointers)
		return nil, e
	}
	return root, nil
}

// nulPointers appends the pointers of n's strings holding U+0000, and of
// its objects with a key holding it.
func nulPointers(n *Node, at string, out *[]string) {
	switch n.Kind {
	case String:
		if strings.IndexByte(n.Str, 0) >= 0 {
			*out = append(*out, at)
		}
	case Array:
		for i, item := range n.Items {
			nulPointers(item, PointerIndex(at, i), out)
		}
	case Object:
		for _, k := range n.Keys {
			if strings.IndexByte(k, 0) >= 0 {
				*out = append(*out, at)
				break
			}
		}
		for i, k := range n.Keys {
			if strings.IndexByte(k, 0) < 0 {
				nulPointers(n.Vals[i], Pointer(at, k), out)
			}
		}
	}
}

type reader struct {
	b        []byte
	i        int
	maxDepth int
	nul      bool // a string or key holds U+0000
}

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *reader) unexpected() error {
	if r.i >= len(r.b) {
		return io.ErrUnexpectedEOF
	}
	return fmt.Errorf("invalid character %q at offset %d", r.b[r.i], r.i)
}

func (r *reader) value(depth int) (*Node, error) {
	r.ws()
	if r.i >= len(r.b) {
		return nil, io.ErrUnexpectedEOF
	}
	switch c := r.b[r.i]; {
	case c == '{' || c == '[':
		if depth > r.maxDepth {
			return nil, depthError(r.maxDepth)
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
		return &Node{Kind: String, Str: str}, nil
	case c == 't':
		return r.literal("true", &Node{Kind: Bool, Bool: true})
	case c == 'f':
		return r.literal("false", &Node{Kind: Bool})
	case c == 'n':
		return r.literal("null", &Node{Kind: Null})
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
		if !validNumber(lit) {
			return nil, fmt.Errorf("invalid number literal %q at offset %d", lit, start)
		}
		return &Node{Kind: Number, Num: json.Number(lit)}, nil
	}
	return nil, r.unexpected()
}

func (r *reader) literal(lit string, n *Node) (*Node, error) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		for k := 0; k < len(lit) && r.i < len(r.b) && r.b[r.i] == lit[k]; k++ {
			r.i++
		}
		return nil, r.unexpected()
	}
	r.i += len(lit)
	return n, nil
}

// validNumber reports whether lit follows the JSON number grammar.
func validNumber(lit []byte) bool {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		i++
	}
	switch {
	case i < len(lit) && lit[i] == '0':
		i++
	case i < len(lit) && lit[i] >= '1' && lit[i] <= '9':
		i = skipDigits(lit, i)
	default:
		return false
	}
	if i < len(lit) && lit[i] == '.' {
		j := skipDigits(lit, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			i++
		}
		j := skipDigits(lit, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(lit)
}

// skipDigits returns the index of the first non-digit at or after i.
func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// str reads a string token; escapes and invalid UTF-8 are decoded by
// encoding/json itself so that both agree byte for byte.
func (r *reader) str() (string, error) {
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
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", fmt.Errorf("invalid escape in string at offset %d", start)
	}
	// Only an escape can produce U+0000: a raw NUL byte is a control
	// character, refused above.
	if strings.IndexByte(s, 0) >= 0 {
		r.nul = true
	}
	return s, nil
}

func (r *reader) array(depth int) (*Node, error) {
	r.i++ // [
	n := &Node{Kind: Array}
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
		n.Items = append(n.Items, item)
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

func (r *reader) object(depth int) (*Node, error) {
	r.i++ // {
	n := &Node{Kind: Object}
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
		if seen == nil && len(n.Keys) >= 16 {
			seen = make(map[string]bool, 2*len(n.Keys))
			for _, k := range n.Keys {
				seen[k] = true
			}
		}
		if seen != nil {
			dup = seen[key]
			seen[key] = true
		} else {
			for _, k := range n.Keys {
				if k == key {
					dup = true
					break
				}
			}
		}
		if dup {
			n.Dups = append(n.Dups, len(n.Keys))
		}
		n.Keys = append(n.Keys, key)
		n.Vals = append(n.Vals, val)
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
