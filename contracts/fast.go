package contracts

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The fast path answers one question, "is this value valid?", straight from
// the raw bytes, without building a tree. Most submissions are valid, and
// the schema library needs tens of microseconds per payload mostly to keep
// the bookkeeping that error reporting needs. Whenever the fast path says
// no, or meets anything unusual (duplicate keys, numbers out of range), the
// value goes through the library, which stays the reference: the fast path
// may only ever accept what the library accepts, and FuzzValidate checks
// exactly that.

// fastNode is one compiled field check.
type fastNode struct {
	typ Type

	minLen, maxLen int64 // -1 when unset
	re             *regexp.Regexp
	format         func(any) bool

	min, max       decimal[string]
	hasMin, hasMax bool

	values []string

	props    []fastProp
	index    map[string]int // by name, for wide objects
	required uint64         // bit i set when props[i] is required

	items              *fastNode
	minItems, maxItems int64 // -1 when unset
}

type fastProp struct {
	name string
	node *fastNode
}

// maxFastProps keeps the seen-set of an object in one machine word.
const maxFastProps = 64

// linearProps is the object width below which a linear scan beats a map.
const linearProps = 12

func compileFast(c Contract) (*fastNode, error) {
	return compileFastObject(c.Fields)
}

func compileFastObject(fields []Field) (*fastNode, error) {
	if len(fields) > maxFastProps {
		return nil, fmt.Errorf("object with %d fields is too wide for the fast path", len(fields))
	}
	n := &fastNode{typ: TypeObject, minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	for i, f := range fields {
		child, err := compileFastField(f)
		if err != nil {
			return nil, err
		}
		n.props = append(n.props, fastProp{name: f.Name, node: child})
		if f.Required {
			n.required |= 1 << uint(i)
		}
	}
	if len(fields) > linearProps {
		n.index = make(map[string]int, len(fields))
		for i, f := range fields {
			n.index[f.Name] = i
		}
	}
	return n, nil
}

func compileFastField(f Field) (*fastNode, error) {
	n := &fastNode{typ: f.Type, minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	switch f.Type {
	case TypeText:
		if f.MinLength != nil {
			n.minLen = *f.MinLength
		}
		if f.MaxLength != nil {
			n.maxLen = *f.MaxLength
		}
		if f.Pattern != "" {
			re, err := regexp.Compile(f.Pattern)
			if err != nil {
				return nil, err
			}
			n.re = re
		}
		if f.Format != "" {
			n.format = formats[f.Format]
			if n.format == nil {
				return nil, fmt.Errorf("unknown format %q", f.Format)
			}
		}
	case TypeDate:
		n.format = formats["date"]
	case TypeDatetime:
		n.format = formats["date-time"]
	case TypeInteger, TypeNumber:
		var ok bool
		if f.Minimum != nil {
			if n.min, ok = parseDecimal(string(*f.Minimum)); !ok || !numberInRange(*f.Minimum) {
				return nil, fmt.Errorf("bad minimum %q", *f.Minimum)
			}
			n.hasMin = true
		}
		if f.Maximum != nil {
			if n.max, ok = parseDecimal(string(*f.Maximum)); !ok || !numberInRange(*f.Maximum) {
				return nil, fmt.Errorf("bad maximum %q", *f.Maximum)
			}
			n.hasMax = true
		}
	case TypeBoolean:
	case TypeChoice:
		if len(f.Values) == 0 {
			return nil, fmt.Errorf("choice without values")
		}
		n.values = f.Values
	case TypeObject:
		obj, err := compileFastObject(f.Fields)
		if err != nil {
			return nil, err
		}
		obj.typ = TypeObject
		return obj, nil
	case TypeList:
		if f.Items == nil {
			return nil, fmt.Errorf("list without items")
		}
		items, err := compileFastField(*f.Items)
		if err != nil {
			return nil, err
		}
		n.items = items
		if f.MinItems != nil {
			n.minItems = *f.MinItems
		}
		if f.MaxItems != nil {
			n.maxItems = *f.MaxItems
		}
	default:
		return nil, fmt.Errorf("unknown type %q", f.Type)
	}
	return n, nil
}

// fastScanner walks raw JSON bytes.
type fastScanner struct {
	b []byte
	i int
}

// accepts reports whether data is certainly a valid value for root.
func (root *fastNode) accepts(data []byte) bool {
	s := fastScanner{b: data}
	if !s.object(root) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

func (s *fastScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *fastScanner) value(n *fastNode) bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch n.typ {
	case TypeObject:
		return s.object(n)
	case TypeList:
		return s.array(n)
	case TypeBoolean:
		return s.literal("true") || s.literal("false")
	case TypeInteger, TypeNumber:
		return s.number(n)
	default:
		return s.text(n)
	}
}

func (s *fastScanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// str scans a string token. It returns its raw content, or, when the
// token has escapes or invalid UTF-8, the content decoded exactly as
// encoding/json would (decoded is then true).
func (s *fastScanner) str() (raw []byte, decoded string, isDecoded, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, "", false, false
	}
	start := s.i
	escaped, nonASCII := false, false
	i := s.i + 1
	for {
		if i >= len(s.b) {
			return nil, "", false, false
		}
		c := s.b[i]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			escaped = true
			i += 2
			continue
		case c < 0x20:
			return nil, "", false, false
		case c >= utf8.RuneSelf:
			nonASCII = true
		}
		i++
	}
	s.i = i + 1
	raw = s.b[start+1 : i]
	if escaped || (nonASCII && !utf8.Valid(raw)) {
		decoded, ok := decodeString(s.b[start:s.i])
		return nil, decoded, true, ok
	}
	return raw, "", false, true
}

// decodeString unquotes a JSON string token with encoding/json's exact
// rules; kept apart so that the common path does not allocate. A string
// holding the NUL character is left to the library path, which refuses it.
func decodeString(tok []byte) (string, bool) {
	var out string
	if err := json.Unmarshal(tok, &out); err != nil || strings.IndexByte(out, 0) >= 0 {
		return "", false
	}
	return out, true
}

func (s *fastScanner) text(n *fastNode) bool {
	raw, dec, isDec, ok := s.str()
	if !ok {
		return false
	}
	if isDec {
		raw = []byte(dec)
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := int64(utf8.RuneCount(raw))
		if (n.minLen >= 0 && l < n.minLen) || (n.maxLen >= 0 && l > n.maxLen) {
			return false
		}
	}
	if n.re != nil && !n.re.Match(raw) {
		return false
	}
	if n.values != nil {
		found := false
		for _, v := range n.values {
			if string(raw) == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.format != nil && !n.format(string(raw)) {
		return false
	}
	return true
}

func (s *fastScanner) number(n *fastNode) bool {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.i++
			continue
		}
		break
	}
	lit := s.b[start:s.i]
	d, ok := parseDecimal(lit)
	if !ok || !numberInRange(lit) {
		return false
	}
	if n.typ == TypeInteger && !d.integral() {
		return false
	}
	if n.hasMin && cmpDecimal(d, n.min) < 0 {
		return false
	}
	if n.hasMax && cmpDecimal(d, n.max) > 0 {
		return false
	}
	return true
}

func (s *fastScanner) array(n *fastNode) bool {
	if s.b[s.i] != '[' {
		return false
	}
	s.i++
	count := int64(0)
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
	} else {
		for {
			if !s.value(n.items) {
				return false
			}
			count++
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.b[s.i] == ']' {
				s.i++
				break
			}
			return false
		}
	}
	return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

func (s *fastScanner) object(n *fastNode) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	var seen uint64
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return seen&n.required == n.required
	}
	for {
		s.ws()
		raw, dec, isDec, ok := s.str()
		if !ok {
			return false
		}
		if isDec {
			raw = []byte(dec)
		}
		idx := n.lookup(raw)
		if idx < 0 || seen&(1<<uint(idx)) != 0 {
			// Unknown or duplicate: leave the verdict to the library.
			return false
		}
		seen |= 1 << uint(idx)
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		if !s.value(n.props[idx].node) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		if s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.b[s.i] == '}' {
			s.i++
			break
		}
		return false
	}
	return seen&n.required == n.required
}

func (n *fastNode) lookup(name []byte) int {
	if n.index != nil {
		if i, ok := n.index[string(name)]; ok {
			return i
		}
		return -1
	}
	for i := range n.props {
		if n.props[i].name == string(name) {
			return i
		}
	}
	return -1
}
