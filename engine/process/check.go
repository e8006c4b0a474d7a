package process

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/suggest"
)

// Check statically checks a parsed process version against the pinned
// revisions and destinations (through r) and the operator's limits. It
// reports every problem at once, each at the JSON pointer of the offending
// place in the document, sorted by pointer then message; nil means the
// version may be published.
//
// Check is also safe on a hand-built Process: it re-verifies the invariants
// Parse establishes for the node kinds, so that a Process that did not come
// from Parse cannot slip past publish.
func Check(p *Process, r Resolver, lim Limits) []contracts.Violation {
	if p == nil {
		return []contracts.Violation{{Path: "", Message: "no process to check"}}
	}
	if r == nil {
		r = emptyResolver{}
	}
	k := &checker{
		p:          p,
		r:          r,
		lim:        lim,
		revs:       map[string]contracts.Working{},
		validators: map[string]*contracts.Validator{},
		avoid:      map[avoidKey]map[string]bool{},
		parents:    map[avoidKey]map[string]string{},
	}
	if len(p.Nodes) > MaxNodes {
		// Checked in time and memory that grow faster than the document.
		return []contracts.Violation{{Path: "/nodes", Message: fmt.Sprintf("a process has at most %d nodes; this one has %d", MaxNodes, len(p.Nodes))}}
	}
	k.names = make([]string, 0, len(p.Nodes))
	for name := range p.Nodes {
		k.names = append(k.names, name)
	}
	sort.Strings(k.names)

	if !k.known(p.Start) {
		k.add("/start", "start names unknown node %q%s", p.Start, suggest.Hint(p.Start, k.names))
	} else {
		k.startOK = true
	}
	for _, name := range k.names {
		k.node(name, p.Nodes[name])
	}
	k.cycles()
	k.reachability()
	for _, name := range k.names {
		if w, ok := k.revs[name]; ok {
			k.bindings(name, p.Nodes[name], w)
		}
	}
	return k.sorted()
}

// MaxNodes bounds the nodes of a process version: checking one takes time
// and memory that grow faster than its size, and a thousand is far more
// than a process an operator can follow.
const MaxNodes = 1000

// emptyResolver stands in for a nil Resolver: nothing is known, so every
// pinned revision and destination is reported rather than dereferencing nil.
type emptyResolver struct{}

func (emptyResolver) Revision(string, int) (contracts.Working, bool) {
	return contracts.Working{}, false
}
func (emptyResolver) Destination(string) (time.Duration, bool) { return 0, false }

type checker struct {
	collector
	p       *Process
	r       Resolver
	lim     Limits
	names   []string
	startOK bool
	// revs holds the resolved revision of every pull and push node whose
	// pin is known; bindings are only judged against those.
	revs       map[string]contracts.Working
	validators map[string]*contracts.Validator
	// avoid caches, per source node and kind of edge, the nodes
	// reachable from start without taking that node's edges of that kind;
	// parents, the shortest paths to them (see pathAvoiding).
	avoid   map[avoidKey]map[string]bool
	parents map[avoidKey]map[string]string
}

// avoidKey names the edges a reach leaves out: the success edges of node
// (success true) or its error edges.
type avoidKey struct {
	node    string
	success bool
}

func (k *checker) node(name string, n *Node) {
	at := jsontree.Pointer("/nodes", name)
	if n == nil {
		k.add(at, "node %q is nil", name)
		return
	}
	if !nodeNameRe.MatchString(name) {
		k.add(at, "node name %q must match %s", name, nodeNameRe)
	} else if name == Hold {
		k.add(at, reservedHold)
	}
	switch n.Kind {
	case KindEnd:
		k.end(at, n)
	case KindPull, KindPush:
		k.task(at, name, n)
	default:
		k.add(jsontree.Pointer(at, "kind"), "unknown kind %q, want pull, push or end", n.Kind)
	}
}

func (k *checker) end(at string, n *Node) {
	if n.Next != "" {
		k.add(jsontree.Pointer(at, "next"), "end nodes have no next")
	}
	if n.Routes != nil {
		k.add(jsontree.Pointer(at, "routes"), "end nodes have no routes")
	}
	if !n.OnError.IsZero() {
		k.add(jsontree.Pointer(at, "on_error"), "end nodes have no on_error")
	}
	if n.Status != "" && n.Status != StatusCompleted && n.Status != StatusFailed {
		k.add(jsontree.Pointer(at, "status"), "unknown status %q, want completed or failed%s", n.Status, suggest.Hint(n.Status, []string{StatusCompleted, StatusFailed}))
	}
}

func (k *checker) known(name string) bool {
	n, ok := k.p.Nodes[name]
	return ok && n != nil
}

// task checks a pull or push node on its own: edges, policy, pinned
// revision, routes and push budget.
func (k *checker) task(at, name string, n *Node) {
	switch {
	case n.Next != "" && n.Routes != nil:
		k.add(at, "%s node has both next and routes: use exactly one", n.Kind)
	case n.Next == "" && n.Routes == nil:
		k.add(at, "%s node needs next or routes", n.Kind)
	}
	if n.Next != "" && !k.known(n.Next) {
		k.add(jsontree.Pointer(at, "next"), "next names unknown node %q%s", n.Next, k.hint(n.Next))
	}
	for _, route := range sortedKeys(n.Routes) {
		if target := n.Routes[route]; !k.known(target) {
			k.add(jsontree.Pointer(at, "routes", route), "route %q names unknown node %q%s", route, target, k.hint(target))
		}
	}
	k.onError(at, name, n.OnError)
	if n.Status != "" {
		k.add(jsontree.Pointer(at, "status"), "status is not allowed on %s nodes", n.Kind)
	}

	k.policy(at, n)
	w, ok := k.revision(at, n)
	if ok {
		k.revs[name] = w
		k.routes(at, n, w)
	}
	if n.Kind == KindPush {
		k.push(at, n)
	} else {
		if n.Destination != "" {
			k.add(jsontree.Pointer(at, "destination"), "destination is not allowed on pull nodes")
		}
		if n.Timeout != 0 {
			k.add(jsontree.Pointer(at, "timeout"), "timeout is not allowed on pull nodes")
		}
	}
}

// hint says what an unknown next or route target may have meant: hold
// is for on_error only, else the node whose name is closest.
func (k *checker) hint(target string) string {
	if target == Hold {
		return " (hold is an on_error target only)"
	}
	return suggest.Hint(target, k.names)
}

// onError checks every on_error target: a known node other than the node
// itself, or hold; and every code key (Parse checks them too, but a
// hand-built Process may hold anything).
func (k *checker) onError(at, name string, o OnError) {
	oat := jsontree.Pointer(at, "on_error")
	target := func(tat, t string) {
		switch {
		case t == Hold:
		case t == name:
			k.add(tat, "on_error must not point at the node itself")
		case !k.known(t):
			// hold is a target too: "hodl" meant it.
			hint := suggest.Hint(t, append(slices.Clone(k.names), Hold))
			if lt := strings.ToLower(t); hint == "" && (lt == "failed" || lt == "fail" || lt == "error") {
				// A Camunda or Zeebe habit: there is no built-in end
				// (designer QA).
				hint = fmt.Sprintf(" (there is no built-in %q: declare the end node, %s: {kind: end, status: failed}, or hold the instance for an operator with hold)", t, t)
			}
			k.add(tat, "on_error names unknown node %q%s", t, hint)
		}
	}
	if o.Codes == nil {
		if o.Default != "" {
			target(oat, o.Default)
		}
		return
	}
	if o.Default != "" {
		target(jsontree.Pointer(oat, AnyCode), o.Default)
	}
	for _, code := range sortedKeys(o.Codes) {
		cat := jsontree.Pointer(oat, code)
		switch {
		case code == AnyCode:
			k.add(cat, `the "*" target belongs in OnError.Default, not in OnError.Codes`)
		case !ErrorCodePattern.MatchString(code):
			k.add(cat, `error code %q must match %s (or be "*" for any other code)`, code, ErrorCodePattern)
		}
		if t := o.Codes[code]; t == "" {
			k.add(cat, "on_error target must not be empty")
		} else {
			target(cat, t)
		}
	}
}

func (k *checker) policy(at string, n *Node) {
	pat := jsontree.Pointer(at, "policy")
	pol := n.Policy
	if n.Kind == KindPush {
		if pol.MaxAttempts != 1 {
			k.add(jsontree.Pointer(pat, "max_attempts"), "push nodes are never retried: max_attempts must be 1")
		}
		if pol.RetryDelay != 0 {
			k.add(jsontree.Pointer(pat, "retry_delay"), "push nodes are never retried: retry_delay must be 0")
		}
		if pol.Backoff() != 1 || pol.MaxRetryDelay != 0 {
			k.add(jsontree.Pointer(pat, "retry_backoff"), "push nodes are never retried: retry_backoff and max_retry_delay are not allowed")
		}
	} else {
		if pol.MaxAttempts < 1 || pol.MaxAttempts > MaxMaxAttempts {
			k.add(jsontree.Pointer(pat, "max_attempts"), "max_attempts must be %s", attemptsRange)
		}
		switch {
		case pol.RetryDelay < 0:
			k.add(jsontree.Pointer(pat, "retry_delay"), "retry_delay must not be negative")
		case k.lim.MaxRetryDelay > 0 && pol.RetryDelay > k.lim.MaxRetryDelay:
			k.add(jsontree.Pointer(pat, "retry_delay"), "retry_delay %s exceeds the ceiling %s",
				isoduration.Format(pol.RetryDelay), isoduration.Format(k.lim.MaxRetryDelay))
		}
		if b := pol.Backoff(); b < 1 || b > MaxRetryBackoff {
			k.add(jsontree.Pointer(pat, "retry_backoff"), "retry_backoff must be %s", backoffRange)
		}
		switch mat := jsontree.Pointer(pat, "max_retry_delay"); {
		case pol.MaxRetryDelay == 0:
		case pol.MaxRetryDelay < 0:
			k.add(mat, "max_retry_delay must be positive")
		case pol.Backoff() == 1:
			k.add(mat, "max_retry_delay caps a delay that grows after each failure: give retry_backoff above 1, or leave max_retry_delay out for a fixed delay")
		case pol.MaxRetryDelay < pol.RetryDelay:
			k.add(mat, "max_retry_delay %s is below retry_delay %s, the first delay",
				isoduration.Format(pol.MaxRetryDelay), isoduration.Format(pol.RetryDelay))
		case k.lim.MaxRetryDelay > 0 && pol.MaxRetryDelay > k.lim.MaxRetryDelay:
			k.add(mat, "max_retry_delay %s exceeds the ceiling %s",
				isoduration.Format(pol.MaxRetryDelay), isoduration.Format(k.lim.MaxRetryDelay))
		}
	}
	if pol.Deadline < 0 {
		k.add(jsontree.Pointer(pat, "deadline"), "deadline must be positive")
	}
	if pol.Priority < 0 || pol.Priority > MaxPriority {
		k.add(jsontree.Pointer(pat, "priority"), "priority must be %s", priorityRange)
	}
}

func (k *checker) revision(at string, n *Node) (contracts.Working, bool) {
	switch {
	case n.Definition == "":
		k.add(jsontree.Pointer(at, "definition"), "definition is required on %s nodes", n.Kind)
	case n.Revision < 1:
		k.add(jsontree.Pointer(at, "revision"), "revision must be %s", revisionRange)
	default:
		w, ok := k.r.Revision(n.Definition, n.Revision)
		if ok {
			return w, true
		}
		// The resolver answers pairs; a Hinter tells an unknown revision
		// of a definition (the revision is wrong) from an unknown key.
		wrong := "definition"
		if h, ok := k.r.(Hinter); ok && h.DefinitionExists(n.Definition) {
			wrong = "revision"
		}
		k.add(jsontree.Pointer(at, wrong), "unknown definition revision %s@%d%s", n.Definition, n.Revision, k.revisionHint(n))
	}
	return contracts.Working{}, false
}

// Hinter is what a Resolver may add to say what exists of a reference that
// resolved to nothing: "(crm has revisions 1 to 2)", "(did you mean …)".
type Hinter interface {
	RevisionHint(definition string, revision int) string
	DestinationHint(name string) string
	// DefinitionExists says whether a definition named by a reference
	// that resolved to nothing exists (its revision does not).
	DefinitionExists(definition string) bool
}

func (k *checker) revisionHint(n *Node) string {
	if h, ok := k.r.(Hinter); ok {
		return h.RevisionHint(n.Definition, n.Revision)
	}
	return ""
}

func (k *checker) destinationHint(n *Node) string {
	if h, ok := k.r.(Hinter); ok {
		return h.DestinationHint(n.Destination)
	}
	return ""
}

// routes checks that the node branches exactly on the pinned revision's
// routing values: a value left unmapped would strand an instance at run
// time, and an extra key is dead configuration that hides a typo.
func (k *checker) routes(at string, n *Node, w contracts.Working) {
	values := w.Routes()
	if len(values) == 0 {
		if n.Routes != nil {
			k.add(jsontree.Pointer(at, "routes"), "revision %s@%d has no routing output: use next", n.Definition, n.Revision)
		}
		return
	}
	if n.Next != "" && n.Routes == nil {
		k.add(jsontree.Pointer(at, "next"), "revision has routing output %s: use routes", w.RoutingOutput)
	}
	if n.Routes == nil {
		return
	}
	for _, v := range values {
		if _, ok := n.Routes[v]; !ok {
			k.add(jsontree.Pointer(at, "routes"), "route %q is not mapped", v)
		}
	}
	for _, route := range sortedKeys(n.Routes) {
		if !contains(values, route) {
			k.add(jsontree.Pointer(at, "routes", route), "%q is not a value of routing output %s%s", route, w.RoutingOutput, suggest.Hint(route, values))
		}
	}
}

func (k *checker) push(at string, n *Node) {
	var destMax time.Duration
	destOK := false
	if n.Destination == "" {
		k.add(jsontree.Pointer(at, "destination"), "destination is required on push nodes")
	} else if destMax, destOK = k.r.Destination(n.Destination); !destOK {
		k.add(jsontree.Pointer(at, "destination"), "unknown destination %q%s", n.Destination, k.destinationHint(n))
	}
	tat := jsontree.Pointer(at, "timeout")
	t := n.PushTimeout(k.lim)
	what := "timeout " + isoduration.Format(t)
	if n.Timeout == 0 {
		what = "default timeout " + isoduration.Format(t)
	}
	switch {
	case n.Timeout < 0:
		k.add(tat, "timeout must be positive")
	case n.Timeout > 0 && n.Timeout < MinPushTimeout:
		// Judged at publish, not parse: a version published before the
		// floor still reads.
		k.add(tat, "timeout %s is below the floor %s: no call could answer in time", isoduration.Format(n.Timeout), isoduration.Format(MinPushTimeout))
	case t > HardMaxPushTimeout:
		k.add(tat, "%s exceeds the hard ceiling %s", what, isoduration.Format(HardMaxPushTimeout))
	case k.lim.MaxPushTimeout > 0 && t > k.lim.MaxPushTimeout:
		k.add(tat, "%s exceeds the ceiling %s", what, isoduration.Format(k.lim.MaxPushTimeout))
	case destOK && t > destMax && n.Timeout == 0:
		// The node names no timeout: say where the one refused comes from
		// and how to fit it, not only that it does not fit.
		k.add(tat, "%s (RELAIS_PUSH_DEFAULT_TIMEOUT) exceeds destination %s's max_timeout %s: set the node's timeout to at most %s", what, n.Destination, isoduration.Format(destMax), isoduration.Format(destMax))
	case destOK && t > destMax:
		k.add(tat, "%s exceeds destination %s's max_timeout %s", what, n.Destination, isoduration.Format(destMax))
	}
}

// edge is one possible transition; success is false for on_error edges,
// which matters for completion and failure dominance.
type edge struct {
	to      string
	at      string
	success bool
}

// edges lists a node's transitions to existing nodes in a fixed order
// (next, routes by key, on_error: its "*" or only target, then its codes
// by key), so that cycle reports are deterministic. Every on_error target
// is an error edge; hold is not an edge (the instance stops there). End
// nodes never leave, whatever a hand-built struct says; an on_error
// self-loop is reported on its own and left out here.
func (k *checker) edges(name string) []edge {
	n := k.p.Nodes[name]
	if n == nil || (n.Kind != KindPull && n.Kind != KindPush) {
		return nil
	}
	at := jsontree.Pointer("/nodes", name)
	var out []edge
	if n.Next != "" && k.known(n.Next) {
		out = append(out, edge{n.Next, jsontree.Pointer(at, "next"), true})
	}
	for _, route := range sortedKeys(n.Routes) {
		if t := n.Routes[route]; k.known(t) {
			out = append(out, edge{t, jsontree.Pointer(at, "routes", route), true})
		}
	}
	oat := jsontree.Pointer(at, "on_error")
	errorEdge := func(t, tat string) {
		if t != name && t != Hold && k.known(t) {
			out = append(out, edge{t, tat, false})
		}
	}
	if n.OnError.Codes == nil {
		errorEdge(n.OnError.Default, oat)
	} else {
		errorEdge(n.OnError.Default, jsontree.Pointer(oat, AnyCode))
		for _, code := range sortedKeys(n.OnError.Codes) {
			errorEdge(n.OnError.Codes[code], jsontree.Pointer(oat, code))
		}
	}
	return out
}

// cycles reports every back edge found by a depth-first search from each
// node in name order, once, at the pointer of the edge that closes it.
func (k *checker) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(string)
	visit = func(name string) {
		color[name] = grey
		stack = append(stack, name)
		for _, e := range k.edges(name) {
			switch color[e.to] {
			case white:
				visit(e.to)
			case grey:
				i := len(stack) - 1
				for i > 0 && stack[i] != e.to {
					i--
				}
				loop := append(append([]string(nil), stack[i:]...), e.to)
				k.add(e.at, "closes a cycle: %s", strings.Join(loop, " → "))
			}
		}
		stack = stack[:len(stack)-1]
		color[name] = black
	}
	for _, name := range k.names {
		if color[name] == white {
			visit(name)
		}
	}
}

// reach returns the nodes reachable from start, skipping the edges of
// skip.node whose success is skip.success (none when skip.node is empty).
func (k *checker) reach(skip avoidKey) map[string]bool {
	seen := map[string]bool{}
	if !k.startOK {
		return seen
	}
	queue := []string{k.p.Start}
	seen[k.p.Start] = true
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, e := range k.edges(cur) {
			if cur == skip.node && e.success == skip.success {
				continue
			}
			if !seen[e.to] {
				seen[e.to] = true
				queue = append(queue, e.to)
			}
		}
	}
	return seen
}

func (k *checker) reachability() {
	if !k.startOK {
		// Everything would be unreachable; the bad start says it all.
		return
	}
	seen := k.reach(avoidKey{})
	for _, name := range k.names {
		if !seen[name] {
			k.add(jsontree.Pointer("/nodes", name), "node %q is not reachable from start", name)
		}
	}
}

// pathAvoiding is a shortest path from start to node that takes none of
// skip's edges, its nodes joined by arrows: the path a refusal names, so
// that the designer sees which one lacks the edge. One search from start
// per skip serves every node (a document with many bindings of one node
// searched once per binding, and named every path in full: a few
// thousand nodes held a core for half a minute, security QA); a path
// longer than pathShown nodes is named by its ends.
func (k *checker) pathAvoiding(skip avoidKey, node string) string {
	parent, ok := k.parents[skip]
	if !ok {
		parent = map[string]string{k.p.Start: ""}
		for queue := []string{k.p.Start}; len(queue) > 0; {
			cur := queue[0]
			queue = queue[1:]
			for _, e := range k.edges(cur) {
				if cur == skip.node && e.success == skip.success {
					continue
				}
				if _, seen := parent[e.to]; !seen {
					parent[e.to] = cur
					queue = append(queue, e.to)
				}
			}
		}
		k.parents[skip] = parent
	}
	if _, found := parent[node]; !found {
		return node
	}
	path := []string{node}
	for n := node; n != k.p.Start; n = parent[n] {
		path = append(path, parent[n])
	}
	slices.Reverse(path)
	if len(path) > pathShown {
		ends := pathShown / 2
		left := len(path) - 2*ends
		path = append(append(path[:ends:ends], fmt.Sprintf("… (%d nodes) …", left)), path[len(path)-ends:]...)
	}
	return strings.Join(path, " → ")
}

// pathShown bounds the nodes a refusal's path names.
const pathShown = 12

// completes reports whether every path from start to node passes through
// a successful exit of src, i.e. whether src's outputs are guaranteed to
// exist when node runs.
func (k *checker) completes(src, node string) bool {
	return k.dominates(avoidKey{src, true}, node)
}

// fails reports whether every path from start to node passes through an
// on_error edge of src, i.e. whether src's error is guaranteed to exist
// when node runs.
func (k *checker) fails(src, node string) bool {
	return k.dominates(avoidKey{src, false}, node)
}

// dominates reports whether node is unreachable once the edges skip names
// are left out: every path to it takes one of them.
func (k *checker) dominates(skip avoidKey, node string) bool {
	r, ok := k.avoid[skip]
	if !ok {
		r = k.reach(skip)
		k.avoid[skip] = r
	}
	return !r[node]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

func findField(fs []contracts.Field, name string) (contracts.Field, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return contracts.Field{}, false
}

// Revisions says which revisions definition key has, its newest being
// latest (0 before its first snapshot), for a refusal that names a
// revision it lacks: a process node's, a release's, or `relais apply
// --dry-run`'s, in the same words.
func Revisions(key string, latest int) string {
	if latest == 0 {
		return key + " has no revision yet: snapshot its Working"
	}
	if latest == 1 {
		return key + " has only revision 1"
	}
	return fmt.Sprintf("%s has revisions 1 to %d", key, latest)
}
