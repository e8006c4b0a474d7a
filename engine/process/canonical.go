package process

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
)

// Canonical returns the canonical JSON encoding of the version: fixed key
// order, no insignificant whitespace, nodes and map keys sorted, durations
// as ISO-8601 strings, and every policy default written out, so that two
// documents with the same meaning digest identically and a stored version
// reads the same even if a default changes later. Parse reads it back to an
// equal Process. A push node's timeout is written only when the document
// set one: its default belongs to the operator's configuration (Limits),
// not to the document.
func (p *Process) Canonical() []byte {
	b := make([]byte, 0, 1024)
	b = append(b, '{')
	if p.Name != "" {
		b = append(b, `"name":`...)
		b = jsontree.AppendString(b, p.Name)
		b = append(b, ',')
	}
	if p.Description != "" {
		b = append(b, `"description":`...)
		b = jsontree.AppendString(b, p.Description)
		b = append(b, ',')
	}
	b = append(b, `"inputs":`...)
	b = append(b, p.Inputs.Canonical()...)
	b = append(b, `,"start":`...)
	b = jsontree.AppendString(b, p.Start)
	b = append(b, `,"nodes":{`...)
	for i, name := range sortedKeys(p.Nodes) {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontree.AppendString(b, name)
		b = append(b, ':')
		b = appendNode(b, p.Nodes[name])
	}
	return append(b, "}}"...)
}

// Digest returns "sha256:" followed by the hex SHA-256 of Canonical; it
// makes publishing a version idempotent.
func (p *Process) Digest() string {
	sum := sha256.Sum256(p.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

func appendNode(b []byte, n *Node) []byte {
	if n == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"kind":`...)
	b = jsontree.AppendString(b, string(n.Kind))
	switch n.Kind {
	case KindEnd:
		b = append(b, `,"status":`...)
		b = jsontree.AppendString(b, endStatus(n))
	case KindPull, KindPush:
		b = append(b, `,"definition":`...)
		b = jsontree.AppendString(b, n.Definition)
		b = append(b, `,"revision":`...)
		b = strconv.AppendInt(b, int64(n.Revision), 10)
		b = append(b, `,"inputs":{`...)
		for i, target := range sortedKeys(n.Inputs) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontree.AppendString(b, target)
			bd := n.Inputs[target]
			if bd.Value != nil {
				b = append(b, `:{"value":`...)
				b = append(b, canonicalValue(bd.Value)...)
			} else {
				b = append(b, `:{"from":`...)
				b = jsontree.AppendString(b, bd.From)
			}
			b = append(b, '}')
		}
		b = append(b, `},"policy":{`...)
		if n.Kind == KindPull {
			b = append(b, `"max_attempts":`...)
			b = strconv.AppendInt(b, int64(n.Policy.MaxAttempts), 10)
			b = append(b, `,"retry_delay":`...)
			b = appendDuration(b, n.Policy.RetryDelay)
			b = append(b, ',')
			// Only when the delay grows: a fixed delay's documents keep
			// the digest they had before these members existed.
			if n.Policy.Backoff() != 1 {
				b = append(b, `"retry_backoff":`...)
				b = strconv.AppendFloat(b, n.Policy.Backoff(), 'f', -1, 64)
				b = append(b, ',')
				if n.Policy.MaxRetryDelay > 0 {
					b = append(b, `"max_retry_delay":`...)
					b = appendDuration(b, n.Policy.MaxRetryDelay)
					b = append(b, ',')
				}
			}
		}
		if n.Policy.Deadline > 0 {
			b = append(b, `"deadline":`...)
			b = appendDuration(b, n.Policy.Deadline)
			b = append(b, ',')
		}
		b = append(b, `"priority":`...)
		b = strconv.AppendInt(b, int64(n.Policy.Priority), 10)
		b = append(b, '}')
		if n.Routes != nil {
			b = append(b, `,"routes":{`...)
			for i, route := range sortedKeys(n.Routes) {
				if i > 0 {
					b = append(b, ',')
				}
				b = jsontree.AppendString(b, route)
				b = append(b, ':')
				b = jsontree.AppendString(b, n.Routes[route])
			}
			b = append(b, '}')
		}
		if n.Next != "" {
			b = append(b, `,"next":`...)
			b = jsontree.AppendString(b, n.Next)
		}
		if !n.OnError.IsZero() {
			b = append(b, `,"on_error":`...)
			b = appendOnError(b, n.OnError)
		}
		if n.Kind == KindPush {
			if n.Destination != "" {
				b = append(b, `,"destination":`...)
				b = jsontree.AppendString(b, n.Destination)
			}
			if n.Timeout > 0 {
				b = append(b, `,"timeout":`...)
				b = appendDuration(b, n.Timeout)
			}
		}
	}
	return append(b, '}')
}

// appendOnError writes on_error as one target string when it names no
// code, exactly as versions written before error maps were digested (so
// their digests stay), and a map written {"*": "x"} the same way since it
// means the same. Otherwise it is an object with sorted keys, "*" (sorting
// before every code) included when set.
func appendOnError(b []byte, o OnError) []byte {
	if len(o.Codes) == 0 {
		return jsontree.AppendString(b, o.Default)
	}
	var keys []string
	if o.Default != "" {
		keys = append(keys, AnyCode)
	}
	for _, code := range sortedKeys(o.Codes) {
		// Only a hand-built Process, which Check refuses, can map "*" in
		// Codes; writing it twice would make invalid JSON.
		if code != AnyCode {
			keys = append(keys, code)
		}
	}
	b = append(b, '{')
	for i, code := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		t := o.Default
		if code != AnyCode {
			t = o.Codes[code]
		}
		b = jsontree.AppendString(b, code)
		b = append(b, ':')
		b = jsontree.AppendString(b, t)
	}
	return append(b, '}')
}

func appendDuration(b []byte, d time.Duration) []byte {
	return jsontree.AppendString(b, isoduration.Format(d))
}

// canonicalValue returns raw in canonical form (compact, object keys
// sorted, number literals kept), so that two documents differing only in
// the key order of a literal digest identically. Invalid JSON becomes null
// rather than producing an invalid document.
func canonicalValue(raw json.RawMessage) json.RawMessage {
	n, err := jsontree.Read(raw, maxJSONDepth)
	if err != nil {
		return json.RawMessage("null")
	}
	return jsontree.Append(nil, n, true)
}
