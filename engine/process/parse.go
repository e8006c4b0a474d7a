package process

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

// maxJSONDepth bounds document nesting so that hostile input cannot drive
// the recursive reader arbitrarily deep. It leaves room for the inputs
// contract at its own nesting limit plus the process envelope.
const maxJSONDepth = 160

// maxRevision keeps revisions within the engine's integer column.
const maxRevision = 1<<31 - 1

// Range phrases shared by Parse and Check, so that both word a bound the
// same way.
var (
	revisionRange = fmt.Sprintf("an integer from 1 to %d", maxRevision)
	attemptsRange = fmt.Sprintf("between 1 and %d", MaxMaxAttempts)
	backoffRange  = fmt.Sprintf("a number between 1 (a fixed delay) and %d", MaxRetryBackoff)
	priorityRange = fmt.Sprintf("between 0 and %d", MaxPriority)
)

var nodeNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// collector accumulates violations; publishing shows every problem of a
// document at once, so nothing stops at the first one.
type collector struct {
	vs []contracts.Violation
}

func (c *collector) add(path, format string, args ...any) {
	c.vs = append(c.vs, contracts.Violation{Path: path, Message: fmt.Sprintf(format, args...)})
}

// sorted returns the violations ordered by pointer then message, without
// duplicates, so that callers and tests see a deterministic list.
func (c *collector) sorted() []contracts.Violation {
	if len(c.vs) == 0 {
		return nil
	}
	sort.Slice(c.vs, func(i, j int) bool {
		if c.vs[i].Path != c.vs[j].Path {
			return c.vs[i].Path < c.vs[j].Path
		}
		return c.vs[i].Message < c.vs[j].Message
	})
	out := c.vs[:1]
	for _, v := range c.vs[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// Parse strictly parses a process version document and reports every
// problem found, each at a JSON pointer into data, sorted by pointer then
// message. The returned Process is nil whenever violations are reported.
// Parse judges the document alone; graph, contract and limit checks that
// need the definitions are Check's.
func Parse(data []byte) (*Process, []contracts.Violation) {
	root, err := jsontree.Read(data, maxJSONDepth)
	if err != nil {
		return nil, contracts.ReadViolations(err)
	}
	var c collector
	p := c.process(root)
	if vs := c.sorted(); vs != nil {
		return nil, vs
	}
	return p, nil
}

// leafValue matches the pointers of values no static check reads past
// their own node: a process's name and description, a node's policy and
// timeout. A document whose only problems are there can be checked
// statically all the same (see ParseLenient).
var leafValue = regexp.MustCompile(`^/(name|description)$|^/nodes/[^/]+/(policy|timeout)(/.*)?$`)

// ParseLenient parses like Parse but also returns, when every problem
// found is a value the static checks do not read past its node (a policy's
// max_attempts or retry_delay, a push node's timeout: see leafValue), the
// process as far as it parsed, for Check to judge the rest. A designer
// then reads every problem in one answer instead of learning of the graph's
// after fixing a duration. Check's findings at or under a parse problem's
// pointer are for the caller to drop: they may come from the value that
// did not parse. p is nil when the problems are
// anywhere else.
func ParseLenient(data []byte) (p *Process, vs []contracts.Violation) {
	root, err := jsontree.Read(data, maxJSONDepth)
	if err != nil {
		return nil, contracts.ReadViolations(err)
	}
	var c collector
	p = c.process(root)
	vs = c.sorted()
	for _, v := range vs {
		if v.Cause != contracts.Invalid || !leafValue.MatchString(v.Path) {
			return nil, vs
		}
	}
	return p, vs
}

// members reports duplicate and unknown keys of an object node.
func (c *collector) members(n *jsontree.Node, path string, allowed ...string) {
	c.dups(n, path)
	for _, k := range n.Keys {
		known := false
		for _, a := range allowed {
			if a == k {
				known = true
				break
			}
		}
		if !known {
			c.vs = append(c.vs, contracts.Violation{Path: jsontree.Pointer(path, k), Message: fmt.Sprintf("unknown key %q", k) + keyHint(k, path, allowed), Cause: contracts.UnknownKey})
		}
	}
}

// dups reports duplicate keys of an object node whose keys are free-form.
func (c *collector) dups(n *jsontree.Node, path string) {
	for _, i := range n.Dups {
		c.add(jsontree.Pointer(path, n.Keys[i]), "duplicate key %q", n.Keys[i])
	}
}

// keyHint names the allowed key k most likely meant; at the root, kind and
// key are a relais apply file's.
func keyHint(k, path string, allowed []string) string {
	if path == "" && (k == "kind" || k == "key") {
		return contracts.ApplyKeysHint
	}
	if h := suggest.Hint(k, allowed); h != "" {
		return h
	}
	return suggest.Synonym(k, allowed)
}

// member returns an optional member; JSON null counts as absent because
// YAML documents converted to JSON write unset values that way.
func member(n *jsontree.Node, key string) (*jsontree.Node, bool) {
	v, ok := n.Get(key)
	if !ok || v.Kind == jsontree.Null {
		return nil, false
	}
	return v, true
}

// str reads an optional string member that must not be empty when present.
func (c *collector) str(n *jsontree.Node, key, path string, allowEmpty bool) (string, bool) {
	v, ok := member(n, key)
	if !ok {
		return "", false
	}
	at := jsontree.Pointer(path, key)
	if v.Kind != jsontree.String {
		c.add(at, "%s must be a string, not %s", key, v.Kind)
		return "", false
	}
	if !allowEmpty && strings.TrimSpace(v.Str) == "" {
		c.add(at, "%s must not be empty", key)
		return "", false
	}
	return v.Str, true
}

// integer reads an optional integer member within [lo, hi]; want states
// the range in messages.
func (c *collector) integer(n *jsontree.Node, key, path string, lo, hi int, want string) (int, bool) {
	v, ok := member(n, key)
	if !ok {
		return 0, false
	}
	at := jsontree.Pointer(path, key)
	if v.Kind != jsontree.Number {
		c.add(at, "%s must be an integer, not %s", key, v.Kind)
		return 0, false
	}
	s := v.Num.String()
	i, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && !isIntegralLiteral(s):
		c.add(at, "%s must be an integer, not %s", key, s)
	case err != nil || i < int64(lo) || i > int64(hi):
		c.add(at, "%s must be %s", key, want)
	default:
		return int(i), true
	}
	return 0, false
}

// number reads an optional number member within [lo, hi]; want states
// the range in messages.
func (c *collector) number(n *jsontree.Node, key, path string, lo, hi float64, want string) (float64, bool) {
	v, ok := member(n, key)
	if !ok {
		return 0, false
	}
	at := jsontree.Pointer(path, key)
	if v.Kind != jsontree.Number {
		c.add(at, "%s must be a number, not %s", key, v.Kind)
		return 0, false
	}
	f, err := strconv.ParseFloat(v.Num.String(), 64)
	if err != nil || f < lo || f > hi {
		c.add(at, "%s must be %s", key, want)
		return 0, false
	}
	return f, true
}

// isIntegralLiteral reports whether s is an optionally signed run of
// digits, i.e. an integer too large for int64 rather than a fraction.
func isIntegralLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// duration reads an optional ISO-8601 duration member.
func (c *collector) duration(n *jsontree.Node, key, path string) (time.Duration, bool) {
	v, ok := member(n, key)
	if !ok {
		return 0, false
	}
	at := jsontree.Pointer(path, key)
	if v.Kind != jsontree.String {
		c.add(at, "%s must be an ISO-8601 duration string such as PT30S, not %s", key, v.Kind)
		return 0, false
	}
	d, err := isoduration.Parse(v.Str)
	if err != nil {
		c.add(at, "%v", err) // the pointer names the key
		return 0, false
	}
	return d, true
}

// object reads a required or optional object member.
func (c *collector) object(n *jsontree.Node, key, path string, required bool) (*jsontree.Node, bool) {
	v, ok := member(n, key)
	at := jsontree.Pointer(path, key)
	if !ok {
		if required {
			c.add(at, "%s is required", key)
		}
		return nil, false
	}
	if v.Kind != jsontree.Object {
		c.add(at, "%s must be an object, not %s", key, v.Kind)
		return nil, false
	}
	return v, true
}

func (c *collector) process(root *jsontree.Node) *Process {
	p := &Process{Nodes: map[string]*Node{}}
	if root.Kind != jsontree.Object {
		c.add("", "document must be an object, not %s", root.Kind)
		return p
	}
	c.members(root, "", "name", "description", "inputs", "start", "nodes")
	// The same bounds as a definition's Working.
	for _, t := range []struct {
		key      string
		dst      *string
		maxBytes int
	}{{"name", &p.Name, contracts.MaxNameBytes}, {"description", &p.Description, contracts.MaxDescriptionBytes}} {
		if s, ok := c.str(root, t.key, "", true); ok && len(s) > t.maxBytes {
			c.add("/"+t.key, "is longer than %d bytes", t.maxBytes)
		} else {
			*t.dst = s
		}
	}

	if v, ok := member(root, "inputs"); !ok {
		c.add("/inputs", "inputs is required (it may be {\"fields\": []})")
	} else {
		// The contract parser is reused so that process inputs follow
		// exactly the rules of definition contracts; member order and
		// duplicates are kept so that it judges what was written.
		ct, vs := contracts.ParseContract(jsontree.Append(nil, v, false))
		for _, x := range vs {
			x.Path = "/inputs" + x.Path
			c.vs = append(c.vs, x)
		}
		p.Inputs = ct
	}

	if s, ok := c.str(root, "start", "", false); ok {
		p.Start = s
	} else if _, present := member(root, "start"); !present {
		c.add("/start", "start is required")
	}

	if nodes, ok := c.object(root, "nodes", "", true); ok {
		for _, i := range nodes.Dups {
			c.add(jsontree.Pointer("/nodes", nodes.Keys[i]), "duplicate node %q", nodes.Keys[i])
		}
		if len(nodes.Keys) == 0 {
			c.add("/nodes", "nodes must not be empty")
		}
		for i, name := range nodes.Keys {
			at := jsontree.Pointer("/nodes", name)
			if !nodeNameRe.MatchString(name) {
				c.add(at, "node name %q must match %s", name, nodeNameRe)
			} else if name == Hold {
				c.add(at, reservedHold)
			}
			n := c.node(nodes.Vals[i], at)
			if _, dup := p.Nodes[name]; !dup {
				n.Name = name
				p.Nodes[name] = n
			}
		}
	}
	return p
}

// kindKeys lists the members each node kind accepts. Keys foreign to the
// kind are reported by name rather than as unknown, because they usually
// reveal a misunderstanding (a retry policy on a push node, say).
var kindKeys = map[Kind][]string{
	KindPull: {"kind", "definition", "revision", "inputs", "policy", "routes", "next", "on_error"},
	KindPush: {"kind", "definition", "revision", "inputs", "policy", "routes", "next", "on_error", "destination", "timeout"},
	KindEnd:  {"kind", "status"},
}

var allNodeKeys = []string{"kind", "definition", "revision", "inputs", "policy", "routes", "next", "on_error", "destination", "timeout", "status"}

func (c *collector) node(v *jsontree.Node, at string) *Node {
	n := &Node{}
	if v.Kind != jsontree.Object {
		c.add(at, "node must be an object, not %s", v.Kind)
		return n
	}
	c.members(v, at, allNodeKeys...)

	if k, ok := c.str(v, "kind", at, true); ok {
		switch Kind(k) {
		case KindPull, KindPush, KindEnd:
			n.Kind = Kind(k)
		default:
			c.add(jsontree.Pointer(at, "kind"), "unknown kind %q, want pull, push or end%s", k, suggest.Hint(k, []string{string(KindPull), string(KindPush), string(KindEnd)}))
		}
	} else if _, present := member(v, "kind"); !present {
		c.add(jsontree.Pointer(at, "kind"), "kind is required")
	}
	if n.Kind == "" {
		// Without a kind there is nothing to judge the other members
		// against; their own problems would only be noise.
		return n
	}
	for _, key := range allNodeKeys {
		if _, ok := member(v, key); ok && !contains(kindKeys[n.Kind], key) {
			c.add(jsontree.Pointer(at, key), "%s is not allowed on %s nodes", key, n.Kind)
		}
	}

	if n.Kind == KindEnd {
		n.Status = StatusCompleted
		if s, ok := c.str(v, "status", at, true); ok {
			if s != StatusCompleted && s != StatusFailed {
				c.add(jsontree.Pointer(at, "status"), "unknown status %q, want completed or failed%s", s, suggest.Hint(s, []string{StatusCompleted, StatusFailed}))
			} else {
				n.Status = s
			}
		}
		return n
	}

	if d, ok := c.str(v, "definition", at, false); ok {
		n.Definition = d
	} else if _, present := member(v, "definition"); !present {
		c.add(jsontree.Pointer(at, "definition"), "definition is required on %s nodes", n.Kind)
	}
	if r, ok := c.integer(v, "revision", at, 1, maxRevision, revisionRange); ok {
		n.Revision = r
	} else if _, present := member(v, "revision"); !present {
		c.add(jsontree.Pointer(at, "revision"), "revision is required on %s nodes", n.Kind)
	}

	n.Inputs = map[string]Binding{}
	if in, ok := c.object(v, "inputs", at, false); ok {
		c.dups(in, jsontree.Pointer(at, "inputs"))
		for i, target := range in.Keys {
			b, ok := c.binding(in.Vals[i], jsontree.Pointer(at, "inputs", target))
			if ok {
				n.Inputs[target] = b
			}
		}
	}

	c.policy(v, at, n)

	if rs, ok := c.object(v, "routes", at, false); ok {
		n.Routes = map[string]string{}
		c.dups(rs, jsontree.Pointer(at, "routes"))
		for i, route := range rs.Keys {
			rv := rs.Vals[i]
			rat := jsontree.Pointer(at, "routes", route)
			switch {
			case route == "":
				c.add(rat, "route value must not be empty")
			case rv.Kind != jsontree.String:
				c.add(rat, "route target must be a node name string, not %s", rv.Kind)
			case rv.Str == "":
				c.add(rat, "route target must not be empty")
			default:
				n.Routes[route] = rv.Str
			}
		}
	}
	n.Next, _ = c.str(v, "next", at, false)
	n.OnError = c.onError(v, at)

	if n.Kind == KindPush {
		n.Destination, _ = c.str(v, "destination", at, false)
		if d, ok := c.duration(v, "timeout", at); ok {
			if d <= 0 {
				c.add(jsontree.Pointer(at, "timeout"), "timeout must be positive")
			} else {
				n.Timeout = d
			}
		}
	}
	return n
}

// reservedHold refuses a node named hold: on_error: "hold" must mean one
// thing, holding the instance.
const reservedHold = `node name "hold" is reserved: on_error "hold" holds the instance instead of naming a node`

// onError parses on_error: one target (a node name or hold), or an object
// mapping error codes, and "*" for any other code, to targets. Targets are
// judged against the graph by Check.
func (c *collector) onError(v *jsontree.Node, at string) OnError {
	ov, ok := member(v, "on_error")
	if !ok {
		return OnError{}
	}
	oat := jsontree.Pointer(at, "on_error")
	switch ov.Kind {
	case jsontree.String:
		if strings.TrimSpace(ov.Str) == "" {
			c.add(oat, "on_error must not be empty")
			return OnError{}
		}
		return OnError{Default: ov.Str}
	case jsontree.Object:
	default:
		c.add(oat, "on_error must be a node name, hold, or an object mapping error codes to targets, not %s", ov.Kind)
		return OnError{}
	}
	c.dups(ov, oat)
	if len(ov.Keys) == 0 {
		c.add(oat, `on_error must not be an empty object: map at least one error code or "*" to a target`)
	}
	o := OnError{Codes: map[string]string{}}
	for i, code := range ov.Keys {
		cat := jsontree.Pointer(oat, code)
		if code != AnyCode && !ErrorCodePattern.MatchString(code) {
			c.add(cat, `error code %q must match %s (or be "*" for any other code)`, code, ErrorCodePattern)
		}
		tv := ov.Vals[i]
		switch {
		case tv.Kind != jsontree.String:
			c.add(cat, "on_error target must be a node name or hold, not %s", tv.Kind)
		case strings.TrimSpace(tv.Str) == "":
			c.add(cat, "on_error target must not be empty")
		case code == AnyCode:
			o.Default = tv.Str
		default:
			o.Codes[code] = tv.Str
		}
	}
	return o
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// binding parses {"from": "..."} or {"value": ...}.
func (c *collector) binding(v *jsontree.Node, at string) (Binding, bool) {
	var b Binding
	if v.Kind != jsontree.Object {
		c.add(at, "binding must be an object with from or value, not %s", v.Kind)
		return b, false
	}
	before := len(c.vs)
	c.members(v, at, "from", "value")
	from, hasFrom := member(v, "from")
	val, hasValue := member(v, "value")
	switch {
	case hasFrom && hasValue:
		c.add(at, "binding must have either from or value, not both")
	case !hasFrom && !hasValue:
		if nv, ok := v.Get("value"); ok && nv.Kind == jsontree.Null {
			// null reads as absent everywhere else; here it is a value the
			// author meant to give.
			c.add(jsontree.Pointer(at, "value"), "value must not be null: leave the input unbound to give it none")
		} else {
			c.add(at, "binding must have either from or value")
		}
	case hasFrom:
		if from.Kind != jsontree.String {
			c.add(jsontree.Pointer(at, "from"), "from must be a string, not %s", from.Kind)
		} else if from.Str == "" {
			c.add(jsontree.Pointer(at, "from"), "from must not be empty")
		} else {
			b.From = from.Str
		}
	default:
		c.literalDups(val, jsontree.Pointer(at, "value"))
		b.Value = jsontree.Append(nil, val, true)
	}
	return b, len(c.vs) == before
}

// literalDups reports duplicate keys inside a literal, which would
// otherwise be decided silently by whichever JSON library reads it later.
func (c *collector) literalDups(n *jsontree.Node, at string) {
	switch n.Kind {
	case jsontree.Object:
		c.dups(n, at)
		for i, k := range n.Keys {
			c.literalDups(n.Vals[i], jsontree.Pointer(at, k))
		}
	case jsontree.Array:
		for i, item := range n.Items {
			c.literalDups(item, jsontree.PointerIndex(at, i))
		}
	}
}

func (c *collector) policy(v *jsontree.Node, at string, n *Node) {
	n.Policy = Policy{MaxAttempts: DefaultMaxAttempts, RetryDelay: DefaultRetryDelay, Priority: DefaultPriority}
	if n.Kind == KindPush {
		n.Policy.MaxAttempts, n.Policy.RetryDelay = 1, 0
	}
	pv, ok := c.object(v, "policy", at, false)
	if !ok {
		return
	}
	pat := jsontree.Pointer(at, "policy")
	c.members(pv, pat, "max_attempts", "retry_delay", "retry_backoff", "max_retry_delay", "deadline", "priority")
	if n.Kind == KindPush {
		for _, key := range []string{"max_attempts", "retry_delay", "retry_backoff", "max_retry_delay"} {
			if _, ok := member(pv, key); ok {
				c.add(jsontree.Pointer(pat, key), "push nodes are never retried: %s is not allowed", key)
			}
		}
	} else {
		if m, ok := c.integer(pv, "max_attempts", pat, 1, MaxMaxAttempts, attemptsRange); ok {
			n.Policy.MaxAttempts = m
		}
		if d, ok := c.duration(pv, "retry_delay", pat); ok {
			n.Policy.RetryDelay = d
		}
		if f, ok := c.number(pv, "retry_backoff", pat, 1, MaxRetryBackoff, backoffRange); ok {
			n.Policy.RetryBackoff = f
		}
		if d, ok := c.duration(pv, "max_retry_delay", pat); ok {
			if d <= 0 {
				c.add(jsontree.Pointer(pat, "max_retry_delay"), "max_retry_delay must be positive")
			} else {
				n.Policy.MaxRetryDelay = d
			}
		}
	}
	if d, ok := c.duration(pv, "deadline", pat); ok {
		if d <= 0 {
			c.add(jsontree.Pointer(pat, "deadline"), "deadline must be positive")
		} else {
			n.Policy.Deadline = d
		}
	}
	if pr, ok := c.integer(pv, "priority", pat, 0, MaxPriority, priorityRange); ok {
		n.Policy.Priority = pr
	}
}
