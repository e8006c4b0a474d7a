package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/relais/relais/internal/jsontree"
)

// Scope is everything a binding may read while an instance runs.
type Scope struct {
	// InstanceID feeds instance.id.
	InstanceID string
	// BusinessKey feeds instance.business_key; nil means the instance has
	// none.
	BusinessKey *string
	// Input is the instance's validated input object.
	Input json.RawMessage
	// Outputs maps a node name to its validated outputs, for every node
	// that has completed.
	Outputs map[string]json.RawMessage
	// Errors maps a node name to the error of its failed occurrence, for
	// every node that has failed.
	Errors map[string]NodeError
}

// NodeError is what nodes.<node>.error.code and .message read: the error
// a failed occurrence keeps (its message already scrubbed of protected
// values).
type NodeError struct {
	Code    string
	Message string
}

// errAbsent marks a source with no value in this instance; the target is
// then left out, which only a Check-approved optional target allows.
var errAbsent = errors.New("absent")

// EvaluateInputs builds the input object of a pull or push node from its
// bindings, with keys in sorted order so that the same scope always yields
// the same bytes. A source that is absent (an optional field not given,
// no business key) leaves its target out; the engine validates the result
// against the pinned revision anyway.
func (p *Process) EvaluateInputs(node string, s Scope) (json.RawMessage, error) {
	n, err := p.task(node)
	if err != nil {
		return nil, fmt.Errorf("process: evaluate %s: %w", node, err)
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	for _, target := range sortedKeys(n.Inputs) {
		v, err := resolve(n.Inputs[target], s)
		if errors.Is(err, errAbsent) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("process: evaluate %s: input %s: %w", node, target, err)
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(jsontree.AppendString(nil, target))
		buf.WriteByte(':')
		if err := json.Compact(&buf, v); err != nil {
			return nil, fmt.Errorf("process: evaluate %s: input %s: %w", node, target, err)
		}
	}
	buf.WriteByte('}')
	return json.RawMessage(buf.Bytes()), nil
}

func (p *Process) task(node string) (*Node, error) {
	if p == nil {
		return nil, errors.New("no process")
	}
	n, ok := p.Nodes[node]
	if !ok || n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}
	if n.Kind != KindPull && n.Kind != KindPush {
		return nil, fmt.Errorf("node %q has kind %s, not pull or push", node, n.Kind)
	}
	return n, nil
}

// resolve returns the raw value a binding denotes in s.
func resolve(b Binding, s Scope) (json.RawMessage, error) {
	if b.Value != nil {
		return b.Value, nil
	}
	segs := strings.Split(b.From, ".")
	switch {
	case len(segs) >= 2 && segs[0] == srcInput:
		return dig(s.Input, segs[1:], b.From)
	case len(segs) >= 4 && segs[0] == srcNodes && segs[2] == srcOutput:
		out, ok := s.Outputs[segs[1]]
		if !ok {
			// Check proved the node completed first; its outputs missing
			// here is an engine bug, not an absent value.
			return nil, fmt.Errorf("source %s: outputs of node %s are not in scope", b.From, segs[1])
		}
		return dig(out, segs[3:], b.From)
	case len(segs) == 4 && segs[0] == srcNodes && segs[2] == srcError:
		e, ok := s.Errors[segs[1]]
		if !ok {
			// Check proved the node failed first.
			return nil, fmt.Errorf("source %s: the error of node %s is not in scope", b.From, segs[1])
		}
		switch segs[3] {
		case srcErrorCode:
			return jsontree.AppendString(nil, e.Code), nil
		case srcErrorMsg:
			return jsontree.AppendString(nil, e.Message), nil
		}
	case len(segs) == 2 && segs[0] == srcInstance && segs[1] == srcInstanceID:
		if s.InstanceID == "" {
			return nil, fmt.Errorf("source %s: the scope has no instance id", b.From)
		}
		return jsontree.AppendString(nil, s.InstanceID), nil
	case len(segs) == 2 && segs[0] == srcInstance && segs[1] == srcBusinessKey:
		if s.BusinessKey == nil {
			return nil, errAbsent
		}
		return jsontree.AppendString(nil, *s.BusinessKey), nil
	}
	return nil, fmt.Errorf("unknown source %q", b.From)
}

// dig follows field names through nested objects of doc. A missing member
// or a JSON null is absent; anything but an object on the way is an error
// because validated values cannot produce it.
func dig(doc json.RawMessage, path []string, from string) (json.RawMessage, error) {
	cur := doc
	if len(bytes.TrimSpace(cur)) == 0 {
		// An instance started without inputs has none to read.
		return nil, errAbsent
	}
	for i, seg := range path {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			// The decoder's message is left out: it may quote a byte of
			// a sensitive value.
			where := "the source document"
			if i > 0 {
				where = strings.Join(path[:i], ".")
			}
			return nil, fmt.Errorf("source %s: %s is not an object", from, where)
		}
		if obj == nil {
			return nil, errAbsent
		}
		v, ok := obj[seg]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, errAbsent
		}
		cur = v
	}
	return cur, nil
}

// NextOnSuccess returns the node that follows a successful occurrence of
// node: routes[route] when the node routes, else next. route is the value
// contracts.Working.Route derived from the validated outputs ("" for a
// revision without routing output).
func (p *Process) NextOnSuccess(node, route string) (string, error) {
	n, err := p.task(node)
	if err != nil {
		return "", fmt.Errorf("process: next of %s: %w", node, err)
	}
	if n.Routes != nil {
		target, ok := n.Routes[route]
		if !ok {
			return "", fmt.Errorf("process: next of %s: route %q is not mapped", node, route)
		}
		return target, nil
	}
	if route != "" {
		return "", fmt.Errorf("process: next of %s: got route %q but the node has no routes", node, route)
	}
	if n.Next == "" {
		return "", fmt.Errorf("process: next of %s: the node has neither next nor routes", node)
	}
	return n.Next, nil
}

// Target is where a failed occurrence leads: a node to enter, or Hold.
type Target struct {
	// Node is the node to enter; empty when Hold is set.
	Node string
	// Hold means the instance is held at the failed node (an incident,
	// DESIGN §12) instead of failing.
	Hold bool
}

// NextOnFailure returns where a failed occurrence of node with error code
// leads: the on_error target mapped to code, else its "*" (or only)
// target. False means the failure fails the instance.
func (p *Process) NextOnFailure(node, code string) (Target, bool) {
	n, err := p.task(node)
	if err != nil {
		return Target{}, false
	}
	t, ok := n.OnError.Target(code)
	switch {
	case !ok:
		return Target{}, false
	case t == Hold:
		return Target{Hold: true}, true
	}
	return Target{Node: t}, true
}

// EndStatus returns the instance status an end node sets; false when node
// is not an end node.
func (p *Process) EndStatus(node string) (status string, ok bool) {
	if p == nil {
		return "", false
	}
	n, found := p.Nodes[node]
	if !found || n == nil || n.Kind != KindEnd {
		return "", false
	}
	if n.Status == "" {
		return StatusCompleted, true
	}
	return n.Status, true
}
