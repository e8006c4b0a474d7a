package httpjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/jsontree"
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
	s.walk(doc, t, "")
	return s.unknown, s.invalid, true
}

var timeType = reflect.TypeFor[time.Time]()

type shaper struct {
	unknown, invalid []fault.FieldError
}

func (s *shaper) refuse(at, format string, args ...any) {
	s.invalid = append(s.invalid, fault.FieldError{Path: at, Message: fmt.Sprintf(format, args...)})
}

func (s *shaper) walk(v any, t reflect.Type, at string) {
	if v == nil {
		// null leaves any Go value as it is, as encoding/json does, except
		// that a value (not a pointer) with its own decoding is asked.
		if t.Kind() != reflect.Pointer && t != rawMessageType && reflect.PointerTo(t).Implements(unmarshalerType) {
			if err := json.Unmarshal([]byte("null"), reflect.New(t).Interface()); err != nil {
				s.refuse(at, "%s", strings.TrimPrefix(err.Error(), "json: "))
			}
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return
	}
	if t == numberType {
		if _, isNum := v.(json.Number); !isNum {
			s.refuse(at, "must be a number, not %s", kindOf(v))
		}
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			if t == timeType {
				// Go's own words name its layout (2006-01-02T15:04:05Z07:00).
				s.refuse(at, "must be an RFC 3339 time, such as 2026-12-01T15:04:05Z")
				return
			}
			s.refuse(at, "%s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface:
	case reflect.Struct:
		obj, isObj := v.(map[string]any)
		if !isObj {
			s.refuse(at, "must be an object, not %s", kindOf(v))
			return
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f, found := fields.lookup(k)
			if !found {
				s.unknown = append(s.unknown, fault.FieldError{Path: jsontree.Pointer(at, k), Message: "unknown field"})
				continue
			}
			s.walk(obj[k], f, jsontree.Pointer(at, k))
		}
	case reflect.Map:
		obj, isObj := v.(map[string]any)
		if !isObj {
			s.refuse(at, "must be an object, not %s", kindOf(v))
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s.walk(obj[k], t.Elem(), jsontree.Pointer(at, k))
		}
	case reflect.Slice, reflect.Array:
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
			s.walk(e, t.Elem(), jsontree.PointerIndex(at, i))
		}
	case reflect.String:
		if _, isStr := v.(string); !isStr {
			s.refuse(at, "must be a string, not %s", kindOf(v))
		}
	case reflect.Bool:
		if _, isBool := v.(bool); !isBool {
			s.refuse(at, "must be a boolean, not %s", kindOf(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, isNum := v.(json.Number)
		if !isNum {
			s.refuse(at, "must be a number, not %s", kindOf(v))
			return
		}
		if i, err := strconv.ParseInt(string(n), 10, 64); err != nil || reflect.New(t).Elem().OverflowInt(i) {
			s.refuse(at, "must be an integer that fits in %d bits, not %s", t.Bits(), n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, isNum := v.(json.Number)
		if !isNum {
			s.refuse(at, "must be a number, not %s", kindOf(v))
			return
		}
		if u, err := strconv.ParseUint(string(n), 10, 64); err != nil || reflect.New(t).Elem().OverflowUint(u) {
			s.refuse(at, "must be a non-negative integer that fits in %d bits, not %s", t.Bits(), n)
		}
	case reflect.Float32, reflect.Float64:
		n, isNum := v.(json.Number)
		if !isNum {
			s.refuse(at, "must be a number, not %s", kindOf(v))
			return
		}
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
