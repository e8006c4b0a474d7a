package stream

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
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
	return protojson.UnmarshalOptions{}.Unmarshal(data, m)
}

// strictJSONCodecs replaces both names connect-go registers its JSON codec
// under.
func strictJSONCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithCodec(strictJSON{"json"}), connect.WithCodec(strictJSON{"json; charset=utf-8"})}
}
