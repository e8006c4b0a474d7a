package jsontree

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// TextProblem is a place where a well-formed JSON document says something
// whose meaning a reader would have to guess: Pointer locates it and
// Message says what it is.
type TextProblem struct {
	Pointer string
	Message string
}

// Messages of CheckText's problems.
const (
	MsgInvalidUTF8    = "holds bytes that are not UTF-8 text"
	MsgLoneSurrogate  = `holds an escaped lone surrogate (such as \ud800), which is not a character`
	MsgKeyInvalidUTF8 = "has a key holding bytes that are not UTF-8 text"
	MsgKeySurrogate   = `has a key holding an escaped lone surrogate (such as \ud800)`
)

// CheckText reports what encoding/json and Read accept silently but a
// strict reader must not: strings and keys holding invalid UTF-8 or an
// escaped lone surrogate (both decoded as U+FFFD, so a stored value would
// differ from the one sent), and duplicate keys (of which decoders keep
// the last, whatever the sender meant). Each problem is at the JSON
// pointer of the string, the duplicate member, or the object whose key is
// broken (a pointer cannot hold such a key). Problems are in document
// order.
//
// It returns nil for a document that is not well-formed JSON or nests
// deeper than maxDepth: the caller's decoder reports those.
func CheckText(data []byte, maxDepth int) []TextProblem {
	// Nearly every document has no problem: a first pass only looks for
	// one, without building the pointers of every member (most of what a
	// check allocated); a document with problems is read again to place
	// them.
	if c := (checker{b: data, maxDepth: maxDepth}); !c.check() || !c.found {
		return nil
	}
	c := checker{b: data, maxDepth: maxDepth, paths: true}
	c.check()
	return c.problems
}

type checker struct {
	b        []byte
	i        int
	maxDepth int
	// paths: build each value's pointer and record problems; otherwise
	// found only says whether there is one.
	paths    bool
	found    bool
	problems []TextProblem
}

// check reads the whole document and reports whether it is well-formed.
func (c *checker) check() bool {
	c.ws()
	if !c.value("", 1) {
		return false
	}
	c.ws()
	return c.i == len(c.b)
}

func (c *checker) add(at, msg string) {
	c.found = true
	if c.paths {
		c.problems = append(c.problems, TextProblem{Pointer: at, Message: msg})
	}
}

func (c *checker) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value checks one value at pointer at; it reports whether the text was
// well-formed.
func (c *checker) value(at string, depth int) bool {
	if c.i >= len(c.b) {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		return depth <= c.maxDepth && c.object(at, depth)
	case ch == '[':
		return depth <= c.maxDepth && c.array(at, depth)
	case ch == '"':
		_, problem, ok := c.str(false)
		if problem != "" {
			c.add(at, problem)
		}
		return ok
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	case ch == '-' || ch >= '0' && ch <= '9':
		start := c.i
		for c.i < len(c.b) {
			d := c.b[c.i]
			if d >= '0' && d <= '9' || d == '-' || d == '+' || d == '.' || d == 'e' || d == 'E' {
				c.i++
				continue
			}
			break
		}
		return validNumber(c.b[start:c.i])
	}
	return false
}

func (c *checker) literal(lit string) bool {
	if len(c.b)-c.i < len(lit) || string(c.b[c.i:c.i+len(lit)]) != lit {
		return false
	}
	c.i += len(lit)
	return true
}

func (c *checker) array(at string, depth int) bool {
	c.i++ // [
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return true
	}
	for n := 0; ; n++ {
		c.ws()
		item := at
		if c.paths {
			item = PointerIndex(at, n)
		}
		if !c.value(item, depth+1) {
			return false
		}
		c.ws()
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}

func (c *checker) object(at string, depth int) bool {
	c.i++ // {
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return true
	}
	var seen map[string]bool
	var first [16][]byte
	keys := first[:0] // narrow objects: a scan beats a map
	badKey := false
	for {
		c.ws()
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return false
		}
		key, problem, ok := c.str(true)
		if !ok {
			return false
		}
		if problem != "" && !badKey {
			badKey = true
			if problem == MsgInvalidUTF8 {
				c.add(at, MsgKeyInvalidUTF8)
			} else {
				c.add(at, MsgKeySurrogate)
			}
		}
		dup := false
		if seen == nil && len(keys) >= 16 {
			seen = make(map[string]bool, 2*len(keys))
			for _, k := range keys {
				seen[string(k)] = true
			}
		}
		if seen != nil {
			dup = seen[string(key)]
			seen[string(key)] = true
		} else {
			for _, k := range keys {
				if bytes.Equal(k, key) {
					dup = true
					break
				}
			}
			keys = append(keys, key)
		}
		member := at
		if problem == "" {
			if c.paths {
				member = Pointer(at, string(key))
			}
			if dup {
				c.add(member, "duplicate key "+strconv.Quote(string(key)))
			}
		}
		c.ws()
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return false
		}
		c.i++
		c.ws()
		if !c.value(member, depth+1) {
			return false
		}
		c.ws()
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string token and returns its value (as encoding/json would
// decode it; nil unless decode is set), the first problem it holds (""
// for none), and whether the token was well-formed. A value without
// escapes or multi-byte characters is its bytes in c.b, not a copy.
func (c *checker) str(decode bool) ([]byte, string, bool) {
	c.i++ // "
	start := c.i
	problem := ""
	plain := true // no escape and no multi-byte character: the bytes are the value
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			raw := c.b[start:c.i]
			c.i++
			switch {
			case !decode:
				return nil, problem, true
			case plain:
				return raw, problem, true
			}
			return []byte(decodeString(raw)), problem, true
		case ch < 0x20:
			return nil, "", false
		case ch == '\\':
			plain = false
			if c.i+1 >= len(c.b) {
				return nil, "", false
			}
			switch c.b[c.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				r, ok := hex4(c.b, c.i+2)
				if !ok {
					return nil, "", false
				}
				c.i += 6
				switch {
				case r >= 0xD800 && r < 0xDC00:
					// A high surrogate must be followed by an escaped low one.
					low, ok := rune(-1), false
					if c.i+1 < len(c.b) && c.b[c.i] == '\\' && c.b[c.i+1] == 'u' {
						low, ok = hex4(c.b, c.i+2)
					}
					if ok && low >= 0xDC00 && low < 0xE000 {
						c.i += 6
					} else if problem == "" {
						problem = MsgLoneSurrogate
					}
				case r >= 0xDC00 && r < 0xE000:
					if problem == "" {
						problem = MsgLoneSurrogate
					}
				}
			default:
				return nil, "", false
			}
		case ch < utf8.RuneSelf:
			c.i++
		default:
			plain = false
			r, size := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError && size == 1 && problem == "" {
				problem = MsgInvalidUTF8
			}
			c.i += size
		}
	}
	return nil, "", false
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

// decodeString decodes the inside of a well-formed string token the way
// encoding/json does (invalid sequences become U+FFFD), for keys compared
// as duplicates.
func decodeString(raw []byte) string {
	tok := make([]byte, 0, len(raw)+2)
	tok = append(tok, '"')
	tok = append(tok, raw...)
	tok = append(tok, '"')
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return string(raw)
	}
	return s
}
