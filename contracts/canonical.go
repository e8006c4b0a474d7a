package contracts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Canonical returns the canonical JSON encoding of the working copy: fixed
// key order, fields in declared order, no insignificant whitespace, every
// field's effective classification written explicitly, required written only
// when true and options written only when set and meaningful for the type.
// Two working copies with the same meaning therefore digest identically.
// Number options keep their literal text: 1 and 1.0 are different documents.
func (w Working) Canonical() []byte {
	b := make([]byte, 0, 512)
	b = append(b, `{"name":`...)
	b = appendString(b, w.Name)
	if w.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, w.Description)
	}
	b = append(b, `,"inputs":`...)
	b = appendContract(b, w.Inputs)
	b = append(b, `,"outputs":`...)
	b = appendContract(b, w.Outputs)
	if w.RoutingOutput != "" {
		b = append(b, `,"routing_output":`...)
		b = appendString(b, w.RoutingOutput)
	}
	return append(b, '}')
}

// Digest returns "sha256:" followed by the hex SHA-256 of Canonical; it
// identifies a revision's content.
func (w Working) Digest() string {
	sum := sha256.Sum256(w.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Canonical returns the canonical JSON encoding of the contract, with the
// same rules as Working.Canonical.
func (c Contract) Canonical() []byte {
	return appendContract(make([]byte, 0, 256), c)
}

// Digest returns "sha256:" followed by the hex SHA-256 of Canonical; it
// keys compiled validators of bare contracts.
func (c Contract) Digest() string {
	sum := sha256.Sum256(c.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

func appendContract(b []byte, c Contract) []byte {
	b = append(b, `{"fields":`...)
	b = appendFields(b, c.Fields, ClassNormal)
	return append(b, '}')
}

func appendFields(b []byte, fs []Field, parent Classification) []byte {
	b = append(b, '[')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendField(b, f, parent, true)
	}
	return append(b, ']')
}

// appendField writes one field; named is false for list items, which carry
// neither name nor required.
func appendField(b []byte, f Field, parent Classification, named bool) []byte {
	class := MaxClass(parent, f.Classification)
	b = append(b, '{')
	if named {
		b = append(b, `"name":`...)
		b = appendString(b, f.Name)
		b = append(b, ',')
	}
	b = append(b, `"type":`...)
	b = appendString(b, string(f.Type))
	if named && f.Required {
		b = append(b, `,"required":true`...)
	}
	b = append(b, `,"classification":`...)
	b = appendString(b, string(class))
	if f.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, f.Description)
	}
	for _, opt := range optionsOf(f.Type) {
		switch opt {
		case "min_length":
			b = appendCount(b, opt, f.MinLength)
		case "max_length":
			b = appendCount(b, opt, f.MaxLength)
		case "pattern":
			if f.Pattern != "" {
				b = append(b, `,"pattern":`...)
				b = appendString(b, f.Pattern)
			}
		case "format":
			if f.Format != "" {
				b = append(b, `,"format":`...)
				b = appendString(b, f.Format)
			}
		case "minimum":
			b = appendNumberOpt(b, opt, f.Minimum)
		case "maximum":
			b = appendNumberOpt(b, opt, f.Maximum)
		case "values":
			b = append(b, `,"values":[`...)
			for i, v := range f.Values {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, v)
			}
			b = append(b, ']')
		case "fields":
			b = append(b, `,"fields":`...)
			b = appendFields(b, f.Fields, class)
		case "items":
			if f.Items != nil {
				b = append(b, `,"items":`...)
				b = appendField(b, *f.Items, class, false)
			}
		case "min_items":
			b = appendCount(b, opt, f.MinItems)
		case "max_items":
			b = appendCount(b, opt, f.MaxItems)
		}
	}
	return append(b, '}')
}

func appendCount(b []byte, key string, v *int64) []byte {
	if v == nil {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, *v, 10)
}

func appendNumberOpt(b []byte, key string, v *json.Number) []byte {
	if v == nil {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendNumber(b, *v)
}

// appendNumber writes a number literal verbatim when it is valid JSON, and
// 0 otherwise, so that the output is always parseable.
func appendNumber(b []byte, n json.Number) []byte {
	if !validNumberLiteral(string(n)) {
		return append(b, '0')
	}
	return append(b, n...)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Unlike encoding/json it does not
// escape <, > and &, which keeps canonical documents readable; invalid UTF-8
// becomes U+FFFD exactly as the decoder would read it back.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript embedding.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendValue writes a value decoded with UseNumber deterministically:
// object keys sorted, numbers verbatim.
func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		if v {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case json.Number:
		return appendNumber(b, v)
	case string:
		return appendString(b, v)
	case []any:
		b = append(b, '[')
		for i, item := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, item)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendValue(b, v[k])
		}
		return append(b, '}')
	case json.RawMessage:
		return append(b, v...)
	}
	return append(b, "null"...)
}
