package stream

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/relais/relais/internal/jsontree"
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
			hint = shapeHint(data, m.ProtoReflect().Descriptor(), err.Error())
		}
		return fmt.Errorf("%w%s", err, hint)
	}
	return nil
}

// shapeHint names a member of data, at any depth, whose JSON type is not
// what md's field takes (60 or {"seconds": 60} for a duration, "all" for a
// list of revisions): protobuf's JSON then says only "unexpected token",
// at a column (verifier QA). It names the member msg (protobuf's error)
// names when msg names one, else the first in document order, which is
// where protobuf stopped; "" when none is found.
func shapeHint(data []byte, md protoreflect.MessageDescriptor, msg string) string {
	root, err := jsontree.Read(data, 64)
	if err != nil {
		return ""
	}
	var found []mismatch
	messageMismatches(root, md, "", &found)
	if len(found) == 0 {
		return ""
	}
	pick := found[0]
	if named := fieldNamed.FindStringSubmatch(msg); named != nil {
		i := slices.IndexFunc(found, func(m mismatch) bool { return m.jsonName == named[1] || m.protoName == named[1] })
		if i < 0 {
			return "" // protobuf's words are about another member
		}
		pick = found[i]
	}
	return " (" + pick.at + " is " + pick.want + ")"
}

// fieldNamed finds the field protobuf's JSON error names ("invalid value
// for string field workerId: 7").
var fieldNamed = regexp.MustCompile(`field ([A-Za-z_][A-Za-z0-9_]*)`)

// mismatch is a member whose JSON type its field does not take, with
// the field's names as protobuf's errors may say them.
type mismatch struct {
	at, jsonName, protoName, want string
}

// messageMismatches appends the members of n, an object read for md,
// whose type their field does not take, in document order.
func messageMismatches(n *jsontree.Node, md protoreflect.MessageDescriptor, at string, found *[]mismatch) {
	if n.Kind != jsontree.Object {
		return
	}
	fields := md.Fields()
	for k, name := range n.Keys {
		val := n.Vals[k]
		f := fields.ByJSONName(name)
		if f == nil {
			f = fields.ByName(protoreflect.Name(name))
		}
		if f == nil || val.Kind == jsontree.Null || f.IsMap() {
			continue
		}
		path := name
		if at != "" {
			path = at + "." + name
		}
		if f.IsList() {
			if val.Kind != jsontree.Array {
				*found = append(*found, mismatch{at: path, jsonName: f.JSONName(), protoName: string(f.Name()), want: "a list, as " + listExample(f)})
				continue
			}
			for i, item := range val.Items {
				valueMismatches(item, f, path+"["+strconv.Itoa(i)+"]", found)
			}
			continue
		}
		valueMismatches(val, f, path, found)
	}
}

// valueMismatches is messageMismatches for one value of field f.
func valueMismatches(v *jsontree.Node, f protoreflect.FieldDescriptor, at string, found *[]mismatch) {
	add := func(want string) {
		*found = append(*found, mismatch{at: at, jsonName: f.JSONName(), protoName: string(f.Name()), want: want})
	}
	isString := v.Kind == jsontree.String
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch f.Message().FullName() {
		case "google.protobuf.Duration":
			if !isString {
				add(`a duration: a string of seconds ending in s, as "60s"`)
			}
		case "google.protobuf.Timestamp":
			if !isString {
				add(`a time: an RFC 3339 string in UTC, as "2026-12-06T10:00:00Z"`)
			}
		default:
			if strings.HasPrefix(string(f.Message().FullName()), "google.protobuf.") {
				return // wrappers, Struct, Value: protobuf's words do
			}
			if v.Kind != jsontree.Object {
				add("an object")
				return
			}
			messageMismatches(v, f.Message(), at, found)
		}
	case protoreflect.BoolKind:
		if v.Kind != jsontree.Bool {
			add("true or false")
		}
	case protoreflect.StringKind:
		if !isString {
			add("a string")
		}
	case protoreflect.BytesKind:
		if !isString {
			add("a base64 string")
		}
	case protoreflect.EnumKind:
		if v.Kind != jsontree.Number && !isString {
			add("an enum's name, a string")
		}
	default: // numbers, which protobuf's JSON also takes quoted
		if v.Kind != jsontree.Number && (!isString || !isNumeric(v.Str)) {
			add("a number")
		}
	}
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

// isNumeric says whether s is a number as protobuf's JSON takes one
// quoted (NaN and Infinity included).
func isNumeric(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
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
