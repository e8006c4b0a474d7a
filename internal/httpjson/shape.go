package httpjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	numberType          = reflect.TypeFor[json.Number]()
)

// shapeProblems compares a request body with the Go type it decodes into
// and returns every unknown member and every value the type refuses, each
// at its JSON pointer. encoding/json stops at the first problem and names
// no field for errors of custom types (a duration written "60s"); a client
// fixing its request deserves the whole list at once.
func shapeProblems(body []byte, t reflect.Type) (unknown, invalid []fault.FieldError, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, false
	}
	s := shaper{}
	if doc == nil && t.Kind() == reflect.Struct {
		// A body of null would decode as an empty object.
		s.refuse("", "must be an object, not null")
	} else {
		s.walk(doc, t, "")
	}
	return s.unknown, s.invalid, true
}

var timeType = reflect.TypeFor[time.Time]()

type shaper struct {
	unknown, invalid []fault.FieldError
}

func (s *shaper) refuse(at, format string, args ...any) {
	s.invalid = append(s.invalid, fault.FieldError{Path: at, Message: fmt.Sprintf(format, args...)})
}

// walk checks v, decoded at pointer at, against t.
func (s *shaper) walk(v any, t reflect.Type, at string) {
	if v == nil {
		s.null(t, at)
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
	case t == numberType:
		if _, isNum := v.(json.Number); !isNum {
			s.refuse(at, "must be a number, not %s", kindOf(v))
		}
	case reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType):
		s.custom(v, t, at)
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		s.object(v, t, at)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		s.list(v, t, at)
	default:
		s.scalar(v, t, at)
	}
}

// null checks a JSON null: it leaves any Go value as it is, as
// encoding/json does, except that a value (not a pointer) with its own
// decoding is asked.
func (s *shaper) null(t reflect.Type, at string) {
	if t.Kind() != reflect.Pointer && t != rawMessageType && reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := json.Unmarshal([]byte("null"), reflect.New(t).Interface()); err != nil {
			s.refuse(at, "%s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
}

// custom asks a type with its own decoding what it makes of v.
func (s *shaper) custom(v any, t reflect.Type, at string) {
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
		if t == timeType {
			// Go's own words name its layout (2006-01-02T15:04:05Z07:00).
			s.refuse(at, "must be an RFC 3339 time, such as 2026-12-01T15:04:05Z")
			return
		}
		s.refuse(at, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// object checks a JSON object against a struct (its members must be
// fields) or a map (any member, each of its element type), in key order.
func (s *shaper) object(v any, t reflect.Type, at string) {
	obj, isObj := v.(map[string]any)
	if !isObj {
		s.refuse(at, "must be an object, not %s", kindOf(v))
		return
	}
	var fields fieldSet
	if t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ft := t
		if t.Kind() == reflect.Map {
			ft = t.Elem()
		} else {
			var found bool
			if ft, found = fields.lookup(k); !found {
				// workerId for worker_id, retriable for retryable: the
				// member meant is named.
				hint := suggest.Hint(k, slices.Sorted(maps.Keys(fields)))
				if hint == "" {
					hint = suggest.Synonym(k, slices.Sorted(maps.Keys(fields)))
				}
				s.unknown = append(s.unknown, fault.FieldError{Path: jsontree.Pointer(at, k), Message: "unknown field" + hint})
				continue
			}
		}
		s.walk(obj[k], ft, jsontree.Pointer(at, k))
	}
}

// list checks a JSON array against a slice or an array; []byte is a
// base64 string, as encoding/json has it.
func (s *shaper) list(v any, t reflect.Type, at string) {
	if t.Elem().Kind() == reflect.Uint8 {
		if _, isStr := v.(string); !isStr {
			s.refuse(at, "must be a string, not %s", kindOf(v))
		}
		return
	}
	arr, isArr := v.([]any)
	if !isArr {
		s.refuse(at, "must be an array, not %s", kindOf(v))
		return
	}
	for i, e := range arr {
		if e == nil && t.Elem().Kind() == reflect.Struct {
			// encoding/json leaves a zero item for null: a list of
			// objects (a batch's items) would act on an empty one.
			s.refuse(jsontree.PointerIndex(at, i), "must be an object, not null")
			continue
		}
		s.walk(e, t.Elem(), jsontree.PointerIndex(at, i))
	}
}

// scalar checks a string, a boolean or a number against a Go type of
// that kind, numbers against its range; an interface takes anything.
func (s *shaper) scalar(v any, t reflect.Type, at string) {
	switch t.Kind() {
	case reflect.String:
		if _, isStr := v.(string); !isStr {
			s.refuse(at, "must be a string, not %s", kindOf(v))
		}
		return
	case reflect.Bool:
		if _, isBool := v.(bool); !isBool {
			s.refuse(at, "must be a boolean, not %s", kindOf(v))
		}
		return
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
	default:
		return
	}
	n, isNum := v.(json.Number)
	if !isNum {
		s.refuse(at, "must be a number, not %s", kindOf(v))
		return
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if i, err := strconv.ParseInt(string(n), 10, 64); err != nil || reflect.New(t).Elem().OverflowInt(i) {
			s.refuse(at, "must be an integer that fits in %d bits, not %s", t.Bits(), n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if u, err := strconv.ParseUint(string(n), 10, 64); err != nil || reflect.New(t).Elem().OverflowUint(u) {
			s.refuse(at, "must be a non-negative integer that fits in %d bits, not %s", t.Bits(), n)
		}
	default:
		if f, err := strconv.ParseFloat(string(n), t.Bits()); err != nil || math.IsInf(f, 0) {
			s.refuse(at, "must be a finite number, not %s", n)
		}
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// fieldSet is a struct's JSON members by name.
type fieldSet map[string]reflect.Type

// lookup finds a member as encoding/json does: the exact name, else one
// equal under case folding.
func (fs fieldSet) lookup(name string) (reflect.Type, bool) {
	if t, ok := fs[name]; ok {
		return t, true
	}
	names := make([]string, 0, len(fs))
	for n := range fs {
		if strings.EqualFold(n, name) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, false
	}
	// Several names fold alike only in odd types; pick one steadily.
	sort.Strings(names)
	return fs[names[0]], true
}

// jsonFields lists the JSON members of a struct type, with those of
// embedded structs promoted.
func jsonFields(t reflect.Type) fieldSet {
	fs := fieldSet{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, promoted, ok := jsonMember(f)
		switch {
		case !ok:
		case promoted:
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			for n, ft := range jsonFields(et) {
				if _, shadowed := fs[n]; !shadowed {
					fs[n] = ft
				}
			}
		default:
			fs[name] = f.Type
		}
	}
	return fs
}

// jsonMember says how encoding/json sees a struct field: as the member
// name, as an embedded struct whose members are promoted, or not at all.
func jsonMember(f reflect.StructField) (name string, promoted, ok bool) {
	name, _, _ = strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case name == "-":
		return "", false, false
	case name == "" && f.Anonymous:
		et := f.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if et.Kind() == reflect.Struct {
			return "", true, true
		}
		return et.Name(), false, f.IsExported()
	case !f.IsExported():
		return "", false, false
	case name == "":
		return f.Name, false, true
	}
	return name, false, true
}
