package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// strictJSON is the Connect protocol's JSON codec refusing members the
// message does not have, as the REST routes refuse them (400
// unknown_field): connect-go's own discards them, so that a Fail written
// after another platform's API ({"retries": 2, "errorMessage": …}) was
// taken as a terminal failure without its message. A client on a newer
// schema than the server's sends protobuf, whose unknown fields are kept.
type strictJSON struct{ name string }

var _ connect.Codec = strictJSON{}

func (c strictJSON) Name() string { return c.name }

func (c strictJSON) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", message)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (c strictJSON) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", message)
	}
	if len(data) == 0 {
		return errors.New("an empty body is no JSON object")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, m); err != nil {
		hint := jsonHint(err.Error())
		if hint == "" {
			hint = shapeHint(data, m.ProtoReflect().Descriptor())
		}
		return fmt.Errorf("%w%s", err, hint)
	}
	return nil
}

// shapeHint names the first member of data, at any depth, whose JSON
// type is not what md's field takes (60 or {"seconds": 60} for a
// duration, "all" for a list of revisions): protobuf's JSON then says only
// "unexpected token", at a column (verifier QA). Empty when none is found.
func shapeHint(data []byte, md protoreflect.MessageDescriptor) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	if at, want := messageMismatch(v, md, ""); at != "" {
		return " (" + at + " is " + want + ")"
	}
	return ""
}

// messageMismatch finds the first member of v, an object read for md,
// whose type its field does not take, in key order: its path and what it
// takes.
func messageMismatch(v any, md protoreflect.MessageDescriptor, at string) (string, string) {
	obj, ok := v.(map[string]any)
	if !ok {
		return "", ""
	}
	fields := md.Fields()
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		val := obj[name]
		f := fields.ByJSONName(name)
		if f == nil {
			f = fields.ByName(protoreflect.Name(name))
		}
		if f == nil || val == nil || f.IsMap() {
			continue
		}
		path := name
		if at != "" {
			path = at + "." + name
		}
		if f.IsList() {
			items, ok := val.([]any)
			if !ok {
				return path, "a list, as " + listExample(f)
			}
			for i, item := range items {
				if p, want := valueMismatch(item, f, path+"["+strconv.Itoa(i)+"]"); p != "" {
					return p, want
				}
			}
			continue
		}
		if p, want := valueMismatch(val, f, path); p != "" {
			return p, want
		}
	}
	return "", ""
}

// valueMismatch is messageMismatch for one value of field f.
func valueMismatch(v any, f protoreflect.FieldDescriptor, at string) (string, string) {
	_, isString := v.(string)
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch f.Message().FullName() {
		case "google.protobuf.Duration":
			if !isString {
				return at, `a duration: a string of seconds ending in s, as "60s"`
			}
		case "google.protobuf.Timestamp":
			if !isString {
				return at, `a time: an RFC 3339 string in UTC, as "2026-12-06T10:00:00Z"`
			}
		default:
			if strings.HasPrefix(string(f.Message().FullName()), "google.protobuf.") {
				return "", "" // wrappers, Struct, Value: protobuf's words do
			}
			if _, ok := v.(map[string]any); !ok {
				return at, "an object"
			}
			return messageMismatch(v, f.Message(), at)
		}
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			return at, "true or false"
		}
	case protoreflect.StringKind:
		if !isString {
			return at, "a string"
		}
	case protoreflect.BytesKind:
		if !isString {
			return at, "a base64 string"
		}
	case protoreflect.EnumKind:
		if _, ok := v.(json.Number); !ok && !isString {
			return at, "an enum's name, a string"
		}
	default: // numbers, which protobuf's JSON also takes quoted
		_, isNumber := v.(json.Number)
		if s, _ := v.(string); !isNumber && (!isString || !isNumeric(s)) {
			return at, "a number"
		}
	}
	return "", ""
}

// isNumeric says whether s is a number as protobuf's JSON takes one
// quoted (NaN and Infinity included).
func isNumeric(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// listExample is an example of a list f takes.
func listExample(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.StringKind, protoreflect.EnumKind:
		return `["…"]`
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "[{…}]"
	case protoreflect.BoolKind:
		return "[true]"
	}
	return "[1, 2]"
}

// jsonHint says how to write what protobuf's JSON refused, where its words
// do not: connect-go answers a body that does not decode with its own
// error, no Relais Problem (stream client QA: "PT60S", REST's way, read
// as an invalid Duration, with no word of the form wanted).
func jsonHint(msg string) string {
	switch {
	case strings.Contains(msg, "google.protobuf.Duration value"):
		return ` (a duration is a string of seconds ending in s, as "60s" or "1.5s", not ISO 8601's "PT60S")`
	case strings.Contains(msg, "google.protobuf.Timestamp value"):
		return ` (a time is an RFC 3339 string in UTC, as "2026-12-06T10:00:00Z")`
	case strings.Contains(msg, "unknown field"):
		return " (members are named as in proto/relais/worker/v1/worker.proto, in lowerCamelCase or snake_case)"
	case strings.Contains(msg, "illegal base64"), strings.Contains(msg, "invalid value for bytes field"):
		return " (a bytes member, outputs or inputs, is base64: the JSON document encoded)"
	}
	return ""
}

// strictJSONCodecs replaces both names connect-go registers its JSON codec
// under.
func strictJSONCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithCodec(strictJSON{"json"}), connect.WithCodec(strictJSON{"json; charset=utf-8"})}
}
