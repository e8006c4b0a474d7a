package stream

import (
	"encoding/json"
	"errors"
	"fmt"
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
			hint = durationHint(data, m.ProtoReflect().Descriptor())
		}
		return fmt.Errorf("%w%s", err, hint)
	}
	return nil
}

// durationHint names a duration member of md that data gives as no
// string (60, {"seconds": 60}): protobuf's JSON then says only "unexpected
// token", at a column (verifier QA).
func durationHint(data []byte, md protoreflect.MessageDescriptor) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil {
		return ""
	}
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Message() == nil || f.Message().FullName() != "google.protobuf.Duration" {
			continue
		}
		for _, name := range []string{f.JSONName(), string(f.Name())} {
			if v, ok := members[name]; ok && len(v) > 0 && v[0] != '"' && string(v) != "null" {
				return fmt.Sprintf(` (%s is a duration: a string of seconds ending in s, as "60s")`, name)
			}
		}
	}
	return ""
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
